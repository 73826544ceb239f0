"""The short English correction a person would type, written from a grade's first mistake.

The sentences follow the study's author ("The current year is 2024.", "Just the API call please.",
"Respect the date format.", "Time in 24h format.", "Wrong API call: use add_calendar_entry."): one
mistake at a time, the most visible first (``grader.MISTAKE_ORDER``), because that is how people correct
and because a model is then judged on fixing what it was told. Three styles:

* ``fix`` (default) names the fix whenever the scenario knows it, in the person's words: "Use the
  default duration." (the request gave none), "The duration is 3 hours.", "The time is 20:00.",
  "Time in 24h format.", "Fix the year in the API call.". The study's author corrected like this; a
  terse "Wrong duration." left Qwen2.5-Coder guessing 60, then 45, never the prompt's default of 30;
* ``hint`` names the error only ("Wrong duration."), the terse second style;
* ``explicit`` gives the right value after the hint ("Wrong duration: 30 minutes.").
  Mistakes whose hint already says what to do (``chatty``, ``multiple_calls``) read the same in all.
The automatic arena records the style of each dialogue run so fix rates can be compared per style.
"""

from __future__ import annotations

import re
from typing import Literal

from scenarios.grader import Finding, Grade, Mistake, Target, parse_target

Style = Literal["fix", "hint", "explicit"]
STYLES: tuple[Style, ...] = ("fix", "hint", "explicit")
DEFAULT_DURATION = 30.0  # the calendar system prompt's default for new events
_STATES_DURATION = re.compile(r"\d+(?:[./]\d+)?\s*(?:h|hrs?|hours?|min|mins|minutes?)\b", re.IGNORECASE)
_MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
                "October", "November", "December")


def write_correction(grade: Grade, *, style: Style = "fix", target: str | None = None,
                     request: str | None = None) -> str | None:
    """The correction for ``grade`` (None when it is correct). ``explicit`` requires ``target``;
    ``request`` (the user turn being answered) tells ``fix`` whether a duration was asked for."""
    if style not in STYLES:
        raise ValueError(f"unknown correction style {style!r}; expected one of {', '.join(STYLES)}")
    if grade.is_correct:
        return None
    expected = parse_target(target) if target is not None else None
    if style == "explicit" and expected is None:
        raise ValueError("an explicit correction needs the target reply")
    if grade.label == "garbage" or not grade.findings:
        return _garbage(expected, target if style == "explicit" else None)
    hint = _hint(grade.findings[0], expected)
    if style == "fix":
        return _fix(grade.findings[0], expected, request) or hint
    if style == "hint" or expected is None:
        return hint
    first = grade.findings[0]
    if first.kind is Mistake.WRONG_YEAR:  # no year to give while the dialogue has not said it
        return hint if first.detail == "year_unknown" else f"The current year is {expected.date.year}."
    value = _value(first, expected)
    return hint if value is None else f"{hint[:-1]}: {value}."


def _garbage(expected: Target | None, full_target: str | None) -> str:
    if full_target is not None:
        return f"Reply with the API call only: {full_target}"
    function = expected.function if expected else "add_calendar_entry"
    return f"Reply with a single line of code calling action.{function}."


def _hint(finding: Finding, expected: Target | None) -> str:
    kind = finding.kind
    if kind is Mistake.WRONG_FUNCTION:
        function = expected.function if expected else "add_calendar_entry"
        if finding.detail == "prefix":
            return f"Wrong API call: use action.{function}."
        return f"Wrong API call: use {function}."
    if kind is Mistake.SYNTAX:
        return "Extra parenthesis." if finding.detail == "extra_parenthesis" else "Syntax error in the call."
    if kind is Mistake.MULTIPLE_CALLS:
        return "Only one API call please."
    if kind is Mistake.CHATTY:
        return "Just the API call please."
    if kind is Mistake.MISSING_ARGUMENT:
        return _missing(finding.param, expected)
    if kind is Mistake.BAD_FORMAT:
        return _format(finding.param, expected)
    return {
        Mistake.WRONG_TITLE: "It's the wrong event now.",
        Mistake.WRONG_YEAR: "Fix the year in the API call.",
        Mistake.WRONG_DATE: "Wrong date.",
        Mistake.WRONG_TIME: "Wrong time.",
        Mistake.WRONG_DURATION: "Wrong duration.",
        Mistake.REGRESSION: f"Keep {finding.detail or 'the other entries'} as it was.",
        Mistake.DOUBLE_BOOKING: "That overlaps another entry.",
    }[kind]


def _missing(param: str | None, expected: Target | None) -> str:
    if param == "duration":
        return "Duration is required."
    if expected is not None and expected.function == "remove_calendar_entry":
        return "API requires three params."
    return f"The {param or 'argument'} is required."


def _format(param: str | None, expected: Target | None) -> str:
    if param == "date":
        return "Respect the date format."
    if param == "time":
        return "Time in 24h format."
    if param == "duration":
        return "Duration in minutes, as a number."
    if param == "title":
        return "The title must be a quoted string."
    if expected is not None and expected.function == "remove_calendar_entry":
        return "API requires three params."
    return "Use only the API's parameters: title, date, time, duration."


def _fix(finding: Finding, expected: Target | None, request: str | None) -> str | None:
    """The sentence naming the fix, or None where the hint already does (or nothing is known)."""
    kind, param = finding.kind, finding.param
    if kind is Mistake.SYNTAX and finding.detail == "extra_parenthesis":
        return "Remove the extra parenthesis."
    if kind is Mistake.BAD_FORMAT and param == "date":
        return "Date in YYYY-MM-DD format."
    if expected is None:
        return None
    if kind is Mistake.WRONG_FUNCTION and expected.function == "remove_calendar_entry":
        return "Use remove_calendar_entry to cancel."
    if kind is Mistake.WRONG_TITLE:
        return f'The event is "{expected.title}".'
    if kind is Mistake.WRONG_DATE:
        return f"The date is {_MONTH_NAMES[expected.date.month - 1]} {expected.date.day}."
    if kind is Mistake.WRONG_TIME:
        return f"The time is {expected.time[0]:02d}:{expected.time[1]:02d}."
    if param == "duration" and kind in (Mistake.MISSING_ARGUMENT, Mistake.WRONG_DURATION):
        return _duration_fix(expected.duration, request)
    return None


def _duration_fix(minutes: float | None, request: str | None) -> str | None:
    if minutes is None:
        return None
    stated = request is not None and _STATES_DURATION.search(request) is not None
    if minutes == DEFAULT_DURATION and not stated:
        return "Use the default duration."
    if minutes % 60 == 0:
        hours = minutes / 60
        return f"The duration is {hours:g} hour{'s' if hours != 1 else ''}."
    return f"The duration is {minutes:g} minutes."


def _value(finding: Finding, expected: Target) -> str | None:
    """The right value for an explicit correction, or None when the hint says it all."""
    param = finding.param
    if finding.kind in (Mistake.WRONG_FUNCTION, Mistake.SYNTAX, Mistake.MULTIPLE_CALLS, Mistake.CHATTY,
                        Mistake.REGRESSION, Mistake.DOUBLE_BOOKING):
        return None
    if param == "title":
        return f'"{expected.title}"'
    if param == "date":
        return f"{expected.date.year:04d}-{expected.date.month:02d}-{expected.date.day:02d}"
    if param == "time":
        return f"{expected.time[0]:02d}:{expected.time[1]:02d}"
    if param == "duration" and expected.duration is not None:
        return f"{expected.duration:g} minutes"
    return None

