"""Read one argument (date, time, duration, title) the way a lenient person would, and say if its format
is off.

Each reader returns the value it understood (or None when it cannot tell) and whether the *format*
broke the API's rules. Keeping the two apart lets the grader report "12-hour time" (``bad_format``)
separately from "the wrong hour" (``wrong_time``): ``time="5:00 PM"`` for 17:00 is one mistake, not two.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date as Date
from typing import Generic, TypeVar

from scenarios.calls import ArgValue

_ISO_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_YMD = re.compile(r"^(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})")
_MDY = re.compile(r"^(\d{1,2})/(\d{1,2})/(\d{4})$")
_DMY_DOTS = re.compile(r"^(\d{1,2})\.(\d{1,2})\.(\d{4})$")
_MD = re.compile(r"^(\d{1,2})[-/](\d{1,2})$")
_MONTHS = {
    m: i + 1
    for i, names in enumerate(
        [("jan", "january"), ("feb", "february"), ("mar", "march"), ("apr", "april"), ("may",),
         ("jun", "june"), ("jul", "july"), ("aug", "august"), ("sep", "sept", "september"),
         ("oct", "october"), ("nov", "november"), ("dec", "december")]
    )
    for m in names
}
_MONTH_DAY = re.compile(r"^([a-z]+)\.?\s*(\d{1,2})(?:st|nd|rd|th)?(?:,?\s*(\d{4}))?$")
_DAY_MONTH = re.compile(r"^(\d{1,2})(?:st|nd|rd|th)?\s+([a-z]+)\.?,?(?:\s+(\d{4}))?$")

_TIME_24 = re.compile(r"^(\d{1,2}):(\d{2})$")
_TIME_LOOSE = re.compile(r"^(\d{1,2})(?:[:.h]?(\d{2}))?(?::\d{2})?\s*(am|pm|a\.m\.|p\.m\.|h)?$")

_DURATION_TEXT = re.compile(r"^(\d+(?:\.\d+)?)\s*(m|min|mins|minutes?|h|hr|hrs|hours?)?$")


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class DateValue:
    year: int | None
    month: int
    day: int


@dataclass(frozen=True, slots=True)
class Reading(Generic[T]):
    """What was understood (None: cannot tell) and whether the format broke the API's rules."""

    value: T | None
    bad_format: bool


def read_date(arg: ArgValue) -> Reading[DateValue]:
    """``"YYYY-MM-DD"`` is right; "20 24-11-11", "11/11/2024", "Nov 11, 2024", unquoted dates are read
    but flagged; a date without a year reads with ``year=None``."""
    if arg.kind == "str" and isinstance(arg.value, str):
        exact = _ISO_DATE.match(arg.value)
        if exact and _valid(int(exact[1]), int(exact[2]), int(exact[3])):
            return Reading(DateValue(int(exact[1]), int(exact[2]), int(exact[3])), bad_format=False)
        return Reading(_loose_date(arg.value), bad_format=True)
    return Reading(_loose_date(arg.source.strip("\"' ")), bad_format=True)


def _valid(year: int, month: int, day: int) -> bool:
    try:
        Date(year, month, day)
    except ValueError:
        return False
    return True


def _loose_date(text: str) -> DateValue | None:
    squeezed = re.sub(r"\s+", "", text)
    for pattern, order in ((_YMD, "ymd"), (_MDY, "mdy"), (_DMY_DOTS, "dmy")):
        match = pattern.match(squeezed)
        if match:
            parts = dict(zip(order, (int(g) for g in match.groups()), strict=True))
            if _valid(parts["y"], parts["m"], parts["d"]):
                return DateValue(parts["y"], parts["m"], parts["d"])
    short = _MD.match(squeezed)
    if short and _valid(2000, int(short[1]), int(short[2])):
        return DateValue(None, int(short[1]), int(short[2]))
    words = " ".join(text.lower().split())
    match = _MONTH_DAY.match(words)
    if match and match[1] in _MONTHS:
        return _named(month=_MONTHS[match[1]], day=int(match[2]), year=match[3])
    match = _DAY_MONTH.match(words)
    if match and match[2] in _MONTHS:
        return _named(month=_MONTHS[match[2]], day=int(match[1]), year=match[3])
    return None


def _named(*, month: int, day: int, year: str | None) -> DateValue | None:
    if not _valid(2000, month, day):
        return None
    return DateValue(int(year) if year else None, month, day)


def read_time(arg: ArgValue) -> Reading[tuple[int, int]]:
    """``"HH:MM"`` (24h; one-digit hours accepted) is right; "5PM", "5:00 PM", ``17``, unquoted ``17:00``
    are read but flagged."""
    if arg.kind == "str" and isinstance(arg.value, str):
        exact = _TIME_24.match(arg.value.strip())
        if exact and int(exact[1]) < 24 and int(exact[2]) < 60:
            return Reading((int(exact[1]), int(exact[2])), bad_format=False)
        return Reading(_loose_time(arg.value), bad_format=True)
    if arg.kind == "number" and isinstance(arg.value, float) and arg.value.is_integer():
        hour = int(arg.value)
        return Reading((hour, 0) if 0 <= hour < 24 else None, bad_format=True)
    return Reading(_loose_time(arg.source.strip("\"' ")), bad_format=True)


def _loose_time(text: str) -> tuple[int, int] | None:
    match = _TIME_LOOSE.match(text.strip().lower())
    if not match:
        return None
    hour, minute = int(match[1]), int(match[2] or 0)
    suffix = (match[3] or "").replace(".", "")
    if suffix == "pm" and hour < 12:
        hour += 12
    elif suffix == "am" and hour == 12:
        hour = 0
    if hour >= 24 or minute >= 60:
        return None
    return hour, minute


def read_duration(arg: ArgValue) -> Reading[float]:
    """A number of minutes (``180``, ``60*3``) is right; "180", "3 hours" are read but flagged."""
    if arg.kind == "number" and isinstance(arg.value, float):
        return Reading(arg.value, bad_format=False)
    text = arg.value if isinstance(arg.value, str) else arg.source.strip("\"' ")
    match = _DURATION_TEXT.match(text.strip().lower())
    if not match:
        return Reading(None, bad_format=True)
    amount = float(match[1])
    unit = match[2] or "m"
    return Reading(amount * 60 if unit.startswith("h") else amount, bad_format=True)


# Title rule (see scenarios.grader's docstring): compare sets of significant words.
STOPWORDS = frozenset({"a", "an", "the", "with", "and", "of", "for", "at", "on", "in", "to", "my", "our"})
GENERIC_WORDS = frozenset({"meeting", "meet", "event", "appointment", "entry", "calendar", "call"})


def title_words(title: str) -> frozenset[str]:
    """Lower-case alphanumeric words, plural "s" dropped, stop words removed."""
    words = re.findall(r"[a-z0-9]+", title.lower())
    return frozenset(w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words if w not in STOPWORDS)


def titles_match(got: str, expected: str) -> bool:
    """Same significant words, in any order and case; generic words ("meeting", "event") are optional
    unless they are all the expected title has."""
    got_words, expected_words = title_words(got), title_words(expected)
    if got_words == expected_words:
        return True
    specific = expected_words - GENERIC_WORDS
    return bool(specific) and got_words - GENERIC_WORDS == specific
