"""The calendar grader: label a reply against the reply the scenario expected, and type every mistake.

Nothing here executes model output: calls are located with ``re`` and read with ``ast`` (see
``scenarios.calls``); hostile text (a megabyte, NUL bytes, deep nesting, ``__import__``) is ``garbage``.

Rules, decided for Fixit Arena and applied the same way by people reading the grades:

* **Equivalent forms are correct**: positional or keyword arguments, single or double quotes, constant
  arithmetic (``60*3`` == ``180``), a call split over several lines, a trailing ``;`` or ``# comment``,
  and markdown code fences or backticks around the call *when nothing else is written*.
* **Title variation rule**: two titles match when they have the same set of significant words —
  lower-cased alphanumeric words with a plural ``s`` dropped, without stop words (a, an, the, with, and,
  of, for, at, on, in, to, my, our). Generic event words (meeting, meet, event, appointment, entry,
  calendar, call) are optional unless they are all the expected title has. So "Meeting with Fred",
  "Fred meeting", "meeting fred" and "Fred" match; "Rock concert" and "Rock Concert event" match "Rock
  Concert"; "Concert", "Meeting with Paul" or "Fred's meeting on Nov 11" do not (``wrong_title``).
* **Format vs value**: a 12-hour time, a date not written ``YYYY-MM-DD`` ("20 24-11-11", "11/11/2024"),
  a duration as text, an unknown or extra parameter are ``bad_format``; the value is still read and
  compared, so ``time="5:00 PM"`` for 17:00 is one mistake and ``time="5:00 AM"`` is two.
* **The year**: with ``year_known=False`` (turn 1 never says it) any year is one ``wrong_year`` mistake.
* **Labels**: ``garbage`` when no recognisable call is found (then ``mistakes`` is empty); else
  ``many`` for three or more mistakes, counted per finding (a 12-hour time *and* a slashed date are two
  ``bad_format`` mistakes), ``partial`` for one or two, ``correct`` for none. ``mistakes`` lists the
  distinct kinds in the order a person would correct them (``MISTAKE_ORDER``); ``findings`` has each.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from scenarios.calls import ADD, KNOWN_FUNCTIONS, REMOVE, ArgValue, ParsedCall, extract_calls
from scenarios.fields import DateValue, read_date, read_duration, read_time, titles_match

Label = Literal["correct", "partial", "garbage", "many"]
EMOJI: dict[str, str] = {"correct": "✓", "partial": "🍄", "garbage": "🔥", "many": "🔥🔥"}


class Mistake(StrEnum):
    """Typed mistake names (a ``str``: compares and serialises as its value)."""

    WRONG_FUNCTION = "wrong_function"
    SYNTAX = "syntax"
    MULTIPLE_CALLS = "multiple_calls"
    CHATTY = "chatty"
    MISSING_ARGUMENT = "missing_argument"
    BAD_FORMAT = "bad_format"
    WRONG_TITLE = "wrong_title"
    WRONG_YEAR = "wrong_year"
    WRONG_DATE = "wrong_date"
    WRONG_TIME = "wrong_time"
    WRONG_DURATION = "wrong_duration"
    # Found only by following a dialogue on the simulated calendar (``scenarios.dialogue``):
    REGRESSION = "regression"  # an entry that was right before this reply is broken or gone
    DOUBLE_BOOKING = "double_booking"  # the reply made two entries overlap in time


STATE_MISTAKES: frozenset[Mistake] = frozenset({Mistake.REGRESSION, Mistake.DOUBLE_BOOKING})


MISTAKE_ORDER: tuple[Mistake, ...] = tuple(Mistake)  # declaration order = correction priority

SIGNATURES: dict[str, tuple[str, ...]] = {
    ADD: ("title", "date", "time", "duration"),
    REMOVE: ("title", "date", "time"),
}
# Keyword names models use instead of the API's: bound for comparison, but still ``bad_format``.
ALIASES: dict[str, str] = {
    "name": "title", "event": "title", "event_name": "title", "summary": "title", "subject": "title",
    "description": "title", "day": "date", "event_date": "date", "start_date": "date",
    "start_time": "time", "start": "time", "hour": "time", "duration_minutes": "duration",
    "length": "duration", "minutes": "duration",
}


@dataclass(frozen=True, slots=True)
class Finding:
    """One mistake with its context: which parameter, what was written, what was expected."""

    kind: Mistake
    param: str | None = None
    got: str | None = None
    expected: str | None = None
    detail: str | None = None  # e.g. "extra_parenthesis", "prefix", "params"


@dataclass(frozen=True, slots=True)
class Grade:
    label: Label
    mistakes: list[Mistake]
    findings: tuple[Finding, ...] = ()
    call: ParsedCall | None = None

    @property
    def emoji(self) -> str:
        return EMOJI[self.label]

    @property
    def is_correct(self) -> bool:
        return self.label == "correct"

    def without(self, *kinds: Mistake) -> Grade:
        """The grade with some mistake kinds forgiven (e.g. the expected ``wrong_year`` of turn 1)."""
        if self.label == "garbage":
            return self
        findings = tuple(f for f in self.findings if f.kind not in kinds)
        return build_grade(findings, call=self.call)


@dataclass(frozen=True, slots=True)
class Target:
    """The expected call, read once: function name and normalised values."""

    function: str
    title: str
    date: DateValue
    time: tuple[int, int]
    duration: float | None


def grade_reply(reply: str, *, target: str, year_known: bool) -> Grade:
    """Grade ``reply`` against the expected reply ``target`` (a correct API call)."""
    expected = parse_target(target)
    extraction = extract_calls(reply)
    if not extraction.calls:
        return Grade(label="garbage", mistakes=[])
    call = next((c for c in extraction.calls if c.is_api and c.function == expected.function),
                extraction.calls[0])
    findings: list[Finding] = []
    findings += _function_findings(call, expected)
    if call.syntax is not None:
        findings.append(Finding(Mistake.SYNTAX, detail=call.syntax))
    if len(extraction.calls) > 1:
        findings.append(Finding(Mistake.MULTIPLE_CALLS, got=str(len(extraction.calls))))
    if extraction.leftover:
        findings.append(Finding(Mistake.CHATTY, got=extraction.leftover[:120]))
    findings += _argument_findings(call, expected, year_known=year_known)
    return build_grade(tuple(findings), call=call)


def build_grade(findings: tuple[Finding, ...], *, call: ParsedCall | None) -> Grade:
    """A grade from its findings: label by their count, kinds in ``MISTAKE_ORDER``."""
    ordered = tuple(sorted(findings, key=lambda f: MISTAKE_ORDER.index(f.kind)))
    kinds = list(dict.fromkeys(f.kind for f in ordered))
    label: Label = "many" if len(ordered) >= 3 else "partial" if kinds else "correct"
    return Grade(label=label, mistakes=kinds, findings=ordered, call=call)


@functools.lru_cache(maxsize=64)
def parse_target(target: str) -> Target:
    """Read an expected reply (trusted scenario data) into normalised values; ValueError if it is not
    a single, clean API call."""
    calls = extract_calls(target).calls
    if len(calls) != 1 or not calls[0].is_api or calls[0].syntax:
        raise ValueError(f"target is not a single API call: {target[:80]!r}")
    call = calls[0]
    bound, _ = bind_call(call, SIGNATURES[call.function])
    title, day, time = bound.get("title"), bound.get("date"), bound.get("time")
    date_value = read_date(day).value if day else None
    time_value = read_time(time).value if time else None
    if title is None or not isinstance(title.value, str) or date_value is None or time_value is None:
        raise ValueError(f"target lacks a title, date or time: {target[:80]!r}")
    duration = read_duration(bound["duration"]).value if "duration" in bound else None
    return Target(call.function, title.value, date_value, time_value, duration)


def _function_findings(call: ParsedCall, expected: Target) -> list[Finding]:
    wanted = f"action.{expected.function}"
    if call.callee == wanted:
        return []
    detail = "prefix" if call.function == expected.function else "function"
    return [Finding(Mistake.WRONG_FUNCTION, got=call.callee, expected=wanted, detail=detail)]


def bind_call(call: ParsedCall, params: tuple[str, ...]) -> tuple[dict[str, ArgValue], list[str]]:
    """Map arguments to parameter names (positional in signature order, keywords and their
    ``ALIASES`` by name); return them and the problems that broke the signature."""
    bound: dict[str, ArgValue] = {}
    problems: list[str] = []
    for index, arg in enumerate(call.args):
        if index < len(params):
            bound[params[index]] = arg
        else:
            problems.append(f"extra positional argument {arg.source[:30]}")
    for name, arg in call.kwargs:
        param = name if name in params else ALIASES.get(name)
        if name not in params:
            problems.append(f"unknown parameter {name}")
        if param is None or param not in params:
            continue
        if param in bound:
            problems.append(f"{param} given twice")
            continue
        bound[param] = arg
    return bound, problems


def _argument_findings(call: ParsedCall, expected: Target, *, year_known: bool) -> list[Finding]:
    expected_params = SIGNATURES[expected.function]
    own = SIGNATURES.get(call.function) if call.function in KNOWN_FUNCTIONS else None
    bound, problems = bind_call(call, own or expected_params)
    compared = [p for p in expected_params if own is None or p in own]
    findings = [Finding(Mistake.BAD_FORMAT, param="params", got=p, detail="params") for p in problems]
    for param in compared:
        arg = bound.get(param)
        if arg is None:
            findings.append(Finding(Mistake.MISSING_ARGUMENT, param=param))
        elif param == "title":
            findings += _title_findings(arg, expected)
        elif param == "date":
            findings += _date_findings(arg, expected, year_known=year_known)
        elif param == "time":
            findings += _time_findings(arg, expected)
        else:
            findings += _duration_findings(arg, expected)
    return findings


def _title_findings(arg: ArgValue, expected: Target) -> list[Finding]:
    if not isinstance(arg.value, str) or arg.kind != "str":
        return [Finding(Mistake.BAD_FORMAT, param="title", got=arg.source[:60])]
    if titles_match(arg.value, expected.title):
        return []
    return [Finding(Mistake.WRONG_TITLE, param="title", got=arg.value[:60], expected=expected.title)]


def _date_findings(arg: ArgValue, expected: Target, *, year_known: bool) -> list[Finding]:
    reading = read_date(arg)
    want = expected.date
    iso = f"{want.year:04d}-{want.month:02d}-{want.day:02d}"
    findings = []
    if reading.bad_format:
        findings.append(Finding(Mistake.BAD_FORMAT, param="date", got=arg.source[:40], expected=iso))
    got = reading.value
    if got is None:
        return findings
    if not year_known or got.year != want.year:
        findings.append(Finding(Mistake.WRONG_YEAR, param="date", got=str(got.year), expected=str(want.year),
                                detail=None if year_known else "year_unknown"))
    if (got.month, got.day) != (want.month, want.day):
        findings.append(Finding(Mistake.WRONG_DATE, param="date", got=arg.source[:40], expected=iso))
    return findings


def _time_findings(arg: ArgValue, expected: Target) -> list[Finding]:
    reading = read_time(arg)
    want = f"{expected.time[0]:02d}:{expected.time[1]:02d}"
    findings = []
    if reading.bad_format:
        findings.append(Finding(Mistake.BAD_FORMAT, param="time", got=arg.source[:40], expected=want))
    if reading.value is not None and reading.value != expected.time:
        findings.append(Finding(Mistake.WRONG_TIME, param="time", got=arg.source[:40], expected=want))
    return findings


def _duration_findings(arg: ArgValue, expected: Target) -> list[Finding]:
    reading = read_duration(arg)
    want = f"{expected.duration:g}" if expected.duration is not None else None
    findings = []
    if reading.bad_format:
        findings.append(Finding(Mistake.BAD_FORMAT, param="duration", got=arg.source[:40], expected=want))
    if reading.value is not None and expected.duration is not None and reading.value != expected.duration:
        findings.append(Finding(Mistake.WRONG_DURATION, param="duration", got=arg.source[:40], expected=want))
    return findings

