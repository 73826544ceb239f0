"""Parameter values by type: read what a reply wrote, compare it with what was expected, say it back.

Every scenario's parameters are one of :data:`scenarios.api.PARAM_TYPES`. For each type this module
reads a written argument leniently (:func:`read`: the value understood, and whether the *format* broke
the API's rules), compares it with the expected value (:func:`findings`: typed mistakes, plus the
assumptions a reply made where the dialogue had not said the value yet), and writes an expected value
the way a person says it (:func:`spoken`) or the API writes it (:func:`literal`).

An expected value may be :data:`ANY`: the dialogue has not stated it (a trap such as the calendar's
missing year, or a bottle of oil of unknown size), so any readable value is accepted and recorded as an
assumption. A date whose ``year`` is None is the same for the year alone.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Final

from scenarios.api import Param, Scalar
from scenarios.calls import ArgValue, safe_parse
from scenarios.fields import DateValue as DateValue
from scenarios.fields import read_date, read_duration, read_time, title_words, titles_match
from scenarios.mistakes import Finding, Mistake

_MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
                "October", "November", "December")
_NUMBER_TEXT = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*$")
_TRUE = frozenset({"true", "on", "yes", "1"})
_FALSE = frozenset({"false", "off", "no", "0"})
MAX_DAYS = 16


class _Any:
    """The expected value the dialogue has not stated: any readable value is an assumption."""

    _instance: _Any | None = None

    def __new__(cls) -> _Any:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ANY"


ANY: Final = _Any()
Value = Scalar | DateValue | tuple[int, int] | _Any


@dataclass(frozen=True, slots=True)
class Read:
    """What was understood (None: cannot tell) and whether the format broke the API's rules."""

    value: Value | None
    bad_format: bool


def read(param: Param, arg: ArgValue) -> Read:
    """The value of ``arg`` for ``param``'s type."""
    kind = param.type
    if kind == "date":
        date = read_date(arg)
        return Read(date.value, date.bad_format)
    if kind == "time":
        time = read_time(arg)
        return Read(time.value, time.bad_format)
    if kind == "minutes":
        minutes = read_duration(arg)
        return Read(minutes.value, minutes.bad_format)
    if kind in ("title", "text"):
        if arg.kind == "str" and isinstance(arg.value, str):
            return Read(arg.value, False)
        return Read(None, True)
    if kind == "number":
        return _read_number(arg)
    if kind == "choice":
        return _read_choice(param, arg)
    if kind == "bool":
        return _read_bool(arg)
    return _read_days(param, arg)


def _read_number(arg: ArgValue) -> Read:
    if arg.kind == "number" and isinstance(arg.value, float):
        return Read(arg.value, False)
    text = arg.value if isinstance(arg.value, str) else arg.source
    match = _NUMBER_TEXT.match(text.strip("\"' "))
    return Read(float(match[1]) if match else None, True)


def _read_choice(param: Param, arg: ArgValue) -> Read:
    text = arg.value if isinstance(arg.value, str) else arg.source.strip("\"' ")
    word = text.strip().lower()
    chosen = next((c for c in param.choices if c.lower() == word), None)
    return Read(chosen, arg.kind != "str" or chosen is None or chosen != text)


def _read_bool(arg: ArgValue) -> Read:
    word = (arg.value if isinstance(arg.value, str) else arg.source).strip("\"' ").lower()
    value = True if word in _TRUE else False if word in _FALSE else None
    exact = arg.kind == "other" and arg.source.strip() in ("True", "False")
    return Read(value, not exact)


def _read_days(param: Param, arg: ArgValue) -> Read:
    tree = safe_parse(arg.source.strip())
    if tree is None or not isinstance(tree.body, ast.List | ast.Tuple) or len(tree.body.elts) > MAX_DAYS:
        return Read(None, True)
    days: list[str] = []
    for element in tree.body.elts:
        if not isinstance(element, ast.Constant) or not isinstance(element.value, str):
            return Read(None, True)
        word = element.value.strip().lower()[:3]
        if word not in param.choices:
            return Read(None, True)
        days.append(word)
    ordered = tuple(d for d in param.choices if d in days)
    exact = isinstance(tree.body, ast.List) and all(
        isinstance(e, ast.Constant) and e.value in param.choices for e in tree.body.elts)
    return Read(ordered, not exact)


def unknown(name: str, value: Value, names: frozenset[str]) -> Value:
    """``value`` of parameter ``name`` with what ``names`` leaves unsaid made a wildcard: "year" blanks a
    date's year; a parameter's name makes its whole value :data:`ANY`."""
    if "year" in names and isinstance(value, DateValue):
        return DateValue(None, value.month, value.day)
    return ANY if name in names else value


def same(param: Param, got: Value, want: Value) -> bool:
    """``got`` is ``want`` for this type (titles by the title rule; a wildcard matches anything)."""
    if want is ANY:
        return True
    if param.type == "title":
        return isinstance(got, str) and isinstance(want, str) and titles_match(got, want)
    if param.type == "text":
        return isinstance(got, str) and isinstance(want, str) and title_words(got) == title_words(want)
    if param.type == "date" and isinstance(got, DateValue) and isinstance(want, DateValue):
        years = got.year is None or want.year is None or got.year == want.year
        return years and (got.month, got.day) == (want.month, want.day)
    if param.type == "days" and isinstance(got, tuple) and isinstance(want, tuple):
        return set(got) == set(want)
    return got == want


def findings(param: Param, arg: ArgValue, want: Value | None) -> tuple[list[Finding], list[Finding]]:
    """The mistakes of ``arg`` against ``want`` (None: not compared), and the assumptions it made: each
    as the finding it would be were the value known (``wrong_year`` with the year written)."""
    reading = read(param, arg)
    if param.type == "date":
        return _date_findings(param, arg, reading, want)
    expected = _plain(param, want) if want is not None and want is not ANY and param.type != "title" else None
    width = 40 if param.type in ("time", "minutes") else 60
    found: list[Finding] = []
    if reading.bad_format:
        found.append(Finding(Mistake.BAD_FORMAT, param=param.name, got=arg.source[:width], expected=expected))
        if param.type in ("title", "text"):
            return found, []
    if reading.value is None or want is None:
        return found, []
    if want is ANY:
        return found, [Finding(mistake_kind(param.value_mistake), param=param.name,
                               got=_plain(param, reading.value)[:width])]
    if not same(param, reading.value, want):
        got = reading.value if isinstance(reading.value, str) else arg.source
        found.append(Finding(mistake_kind(param.value_mistake), param=param.name, got=str(got)[:width],
                             expected=_plain(param, want)))
    return found, []


def _date_findings(param: Param, arg: ArgValue, reading: Read,
                   want: Value | None) -> tuple[list[Finding], list[Finding]]:
    found: list[Finding] = []
    iso = literal(param, want).strip('"') if isinstance(want, DateValue) else None
    if reading.bad_format:
        found.append(Finding(Mistake.BAD_FORMAT, param=param.name, got=arg.source[:40], expected=iso))
    got = reading.value
    if not isinstance(got, DateValue) or not isinstance(want, DateValue):
        return found, []
    assumed: list[Finding] = []
    if want.year is None:
        if got.year is not None:
            assumed.append(Finding(Mistake.WRONG_YEAR, param=param.name, got=str(got.year)))
    elif got.year != want.year:
        found.append(Finding(Mistake.WRONG_YEAR, param=param.name, got=str(got.year),
                             expected=str(want.year)))
    if (got.month, got.day) != (want.month, want.day):
        found.append(Finding(mistake_kind(param.value_mistake), param=param.name, got=arg.source[:40],
                             expected=iso))
    return found, assumed


def mistake_kind(name: str) -> str:
    """A Mistake member where the name is one (so ``is`` comparisons keep working), else the name."""
    try:
        return Mistake(name)
    except ValueError:
        return name


def literal(param: Param, value: Value | None) -> str:
    """``value`` as the API writes it: ``"2024-11-11"``, ``"17:00"``, ``180``, ``True``, ``["mon"]``."""
    if value is None or value is ANY:
        return "?"
    if isinstance(value, DateValue):
        year = f"{value.year:04d}" if value.year is not None else "YYYY"
        return f'"{year}-{value.month:02d}-{value.day:02d}"'
    if param.type == "time" and isinstance(value, tuple):
        return f'"{value[0]:02d}:{value[1]:02d}"'
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple):
        return "[" + ", ".join(f'"{d}"' for d in value) + "]"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _plain(param: Param, value: Value) -> str:
    """The expected value in a finding (no quotes; a date as ISO)."""
    return literal(param, value).strip('"')


def spoken(param: Param, value: Value) -> str:
    """``value`` as a person says it in a correction: "November 11", "20:00", "3 hours", "750 ml"."""
    if isinstance(value, DateValue):
        return f"{_MONTH_NAMES[value.month - 1]} {value.day}"
    if param.type == "minutes" and isinstance(value, float):
        if value % 60 == 0:
            hours = value / 60
            return f"{hours:g} hour{'s' if hours != 1 else ''}"
        return f"{value:g} minutes"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple) and param.type == "days":
        return ", ".join(_DAY_NAMES.get(str(d), str(d)) for d in value)
    return _plain(param, value)


_DAY_NAMES = {"mon": "Monday", "tue": "Tuesday", "wed": "Wednesday", "thu": "Thursday", "fri": "Friday",
              "sat": "Saturday", "sun": "Sunday"}
