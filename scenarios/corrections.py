"""The short English correction a person would type, written from a grade's first mistake.

The sentences follow the study's author ("The current year is 2024.", "Just the API call please.",
"Respect the date format.", "Time in 24h format.", "Wrong API call: use add_calendar_entry."): one
mistake at a time, the most visible first (``grader.MISTAKE_ORDER``), because that is how people correct
and because a model is then judged on fixing what it was told. Two styles:

* ``hint`` (default) names the error, as the study did;
* ``explicit`` also gives the right value ("Time in 24h format: 17:00."), which needs the target reply.
  Mistakes with no value to give (``chatty``, ``multiple_calls``, ``syntax``) read the same in both.
"""

from __future__ import annotations

from typing import Literal

from scenarios.grader import Finding, Grade, Mistake, Target, parse_target

Style = Literal["hint", "explicit"]
STYLES: tuple[Style, ...] = ("hint", "explicit")


def write_correction(grade: Grade, *, style: Style = "hint", target: str | None = None) -> str | None:
    """The correction for ``grade`` (None when it is correct). ``explicit`` requires ``target``."""
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

