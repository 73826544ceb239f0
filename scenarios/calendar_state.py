"""A simulated calendar: what the calendar would hold after the calls a reply makes.

The dialogue grader (``scenarios.dialogue``) compares the state after each turn with the state the
scripted replies produce, as BFCL's multi-turn checker and τ-bench compare an environment's state
instead of call text. Calls are bound to the API signature (``grader.bind_call``: positional or keyword)
and their values read leniently (``scenarios.fields``: ``60*3`` through ``calls.constant_arithmetic``,
an AST walk; nothing is evaluated). The rules, decided here:

* ``add_calendar_entry`` with the same title (``titles_match``), date and time as an existing entry
  **updates** it (the study's turn 4 re-adds the concert with ``duration=60*3``); otherwise it adds one.
* ``remove_calendar_entry`` removes the first entry with that title, date and time; no match, no change.
* A call whose title, date or time cannot be read changes nothing (a real API would raise). The
  ``action.`` prefix is not required here: the grader already types that mistake; the state records
  what the person asked for. A missing duration is the system prompt's default, 30 minutes.
* A date whose year is ``None`` in an *expected* entry is a wildcard: the year is an assumption of the
  dialogue (turn 1 never says it), so any year matches.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from scenarios.calls import ADD, REMOVE, ParsedCall, extract_calls
from scenarios.fields import DateValue, read_date, read_duration, read_time, titles_match
from scenarios.grader import SIGNATURES, bind_call

DEFAULT_DURATION = 30.0  # minutes, from the calendar's system prompt


@dataclass(frozen=True, slots=True)
class Entry:
    """One calendar entry as understood: title, date (year None = any year), start time, minutes."""

    title: str
    date: DateValue
    time: tuple[int, int]
    duration: float = DEFAULT_DURATION

    def same_slot(self, other: Entry) -> bool:
        """Same title (by the title rule), date and start time: the key an add updates, a remove hits."""
        return (titles_match(self.title, other.title) and self.time == other.time
                and _same_date(self.date, other.date))

    def matches(self, expected: Entry) -> bool:
        """This (actual) entry is the ``expected`` one, duration included."""
        return self.same_slot(expected) and self.duration == expected.duration

    def overlaps(self, other: Entry) -> bool:
        """Both on the same day (years equal or unknown) and their [start, end) intervals intersect."""
        if not _same_date(self.date, other.date):
            return False
        a, b = _minutes(self.time), _minutes(other.time)
        return a < b + max(other.duration, 1.0) and b < a + max(self.duration, 1.0)

    def describe(self) -> str:
        year = f"{self.date.year:04d}" if self.date.year is not None else "????"
        return (f"{self.title} {year}-{self.date.month:02d}-{self.date.day:02d} "
                f"{self.time[0]:02d}:{self.time[1]:02d} ({self.duration:g} min)")


Calendar = tuple[Entry, ...]
EMPTY: Calendar = ()


def _same_date(a: DateValue, b: DateValue) -> bool:
    years_agree = a.year is None or b.year is None or a.year == b.year
    return years_agree and (a.month, a.day) == (b.month, b.day)


def _minutes(time: tuple[int, int]) -> int:
    return 60 * time[0] + time[1]


def read_entry(call: ParsedCall) -> Entry | None:
    """The entry a recognised add/remove call names, or None when its title, date or time is unreadable."""
    if call.function not in (ADD, REMOVE):
        return None
    bound, _ = bind_call(call, SIGNATURES[call.function])
    title, day, time = bound.get("title"), bound.get("date"), bound.get("time")
    if title is None or not isinstance(title.value, str) or day is None or time is None:
        return None
    date_value, time_value = read_date(day).value, read_time(time).value
    if date_value is None or time_value is None:
        return None
    duration = read_duration(bound["duration"]).value if "duration" in bound else None
    if duration is None or duration <= 0:
        duration = DEFAULT_DURATION
    return Entry(title.value, date_value, time_value, duration)


def apply_call(calendar: Calendar, call: ParsedCall) -> Calendar:
    """The calendar after one call (unchanged when the call cannot be read)."""
    entry = read_entry(call)
    if entry is None:
        return calendar
    index = next((i for i, e in enumerate(calendar) if e.same_slot(entry)), None)
    if call.function == REMOVE:
        return calendar if index is None else calendar[:index] + calendar[index + 1:]
    if index is None:
        return (*calendar, entry)
    return (*calendar[:index], entry, *calendar[index + 1:])


def apply_calls(calendar: Calendar, calls: Iterable[ParsedCall]) -> Calendar:
    for call in calls:
        calendar = apply_call(calendar, call)
    return calendar


def apply_reply(calendar: Calendar, reply: str) -> Calendar:
    """The calendar after every recognisable call in ``reply``, in order (garbage changes nothing)."""
    return apply_calls(calendar, extract_calls(reply).calls)


def without_years(calendar: Calendar) -> Calendar:
    """The same entries with their years unknown (expected state while the dialogue has not said it)."""
    return tuple(Entry(e.title, DateValue(None, e.date.month, e.date.day), e.time, e.duration)
                 for e in calendar)


def states_match(actual: Calendar, expected: Calendar) -> bool:
    """Every expected entry present exactly once, and nothing else."""
    left = list(actual)
    for want in expected:
        hit = next((i for i, got in enumerate(left) if got.matches(want)), None)
        if hit is None:
            return False
        del left[hit]
    return not left


def overlap_count(calendar: Calendar) -> int:
    """Pairs of entries that overlap in time."""
    return sum(1 for i, a in enumerate(calendar) for b in calendar[i + 1:] if a.overlaps(b))
