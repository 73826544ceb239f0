"""The short English correction a person would type, written from a grade's first mistake.

The sentences follow the study's author ("The current year is 2024.", "Just the API call please.",
"Respect the date format.", "Time in 24h format.", "Wrong API call: use add_calendar_entry."): one
mistake at a time, the most visible first (``grader.mistake_order``), because that is how people correct
and because a model is then judged on fixing what it was told. Three styles:

* ``fix`` (default) names the fix whenever the scenario knows it, in the person's words: "Use the
  default duration." (the request gave none), "The duration is 3 hours.", "The time is 20:00.",
  "Time in 24h format.", "Fix the year in the API call.". The study's author corrected like this; a
  terse "Wrong duration." left Qwen2.5-Coder guessing 60, then 45, never the prompt's default of 30;
* ``hint`` names the error only ("Wrong duration."), the terse second style;
* ``explicit`` gives the right value after the hint ("Wrong duration: 30 minutes.").
  Mistakes whose hint already says what to do (``chatty``, ``multiple_calls``) read the same in all.

The sentences are shared by every scenario; a scenario's :class:`Phrasebook` overrides them by key, the
most specific first: ``kind:param@function``, ``kind:param``, ``kind@function``, ``kind/detail``,
``kind``. Templates may use ``{param}``, ``{value}`` (the expected value as said), ``{function}``,
``{namespace}``, ``{params}`` (the expected function's parameters), ``{detail}`` and ``{year}``.
The automatic arena records the style of each dialogue run so fix rates can be compared per style.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from scenarios import values
from scenarios.api import Api, Param
from scenarios.fields import DateValue
from scenarios.grader import Grade, TargetCall, parse_target
from scenarios.mistakes import Finding, Mistake

Style = Literal["fix", "hint", "explicit"]
STYLES: tuple[Style, ...] = ("fix", "hint", "explicit")
_STATES_DURATION = re.compile(r"\d+(?:[./]\d+)?\s*(?:h|hrs?|hours?|min|mins|minutes?)\b", re.IGNORECASE)
_NO_VALUE: frozenset[str] = frozenset({Mistake.WRONG_FUNCTION, Mistake.SYNTAX, Mistake.MULTIPLE_CALLS,
                                       Mistake.MISSING_CALL, Mistake.CHATTY, Mistake.REGRESSION,
                                       Mistake.DOUBLE_BOOKING})

HINTS: dict[str, str] = {
    "wrong_function/prefix": "Wrong API call: use {namespace}.{function}.",
    "wrong_function": "Wrong API call: use {function}.",
    "syntax/extra_parenthesis": "Extra parenthesis.",
    "syntax": "Syntax error in the call.",
    "multiple_calls": "Only one API call please.",
    "missing_call": "You also need {function}.",
    "chatty": "Just the API call please.",
    "missing_argument": "The {param} is required.",
    "bad_format:params": "Use only the API's parameters: {params}.",
    "bad_format": "The {param} is not in the API's format.",
    "wrong_year": "Fix the year in the API call.",
    "regression": "Keep {detail} as it was.",
    "double_booking": "That overlaps another entry.",
}
FIXES: dict[str, str] = {
    "syntax/extra_parenthesis": "Remove the extra parenthesis.",
}
EXPLICIT: dict[str, str] = {
    "wrong_year": "The current year is {year}.",
}


@dataclass(frozen=True, slots=True)
class Phrasebook:
    """A scenario's own sentences, by key (see the module docstring); the shared ones fill the rest."""

    hints: Mapping[str, str] = field(default_factory=dict)
    fixes: Mapping[str, str] = field(default_factory=dict)
    explicit: Mapping[str, str] = field(default_factory=dict)


def write_correction(grade: Grade, *, api: Api, phrases: Phrasebook = Phrasebook(), style: Style = "fix",
                     target: str | None = None, request: str | None = None) -> str | None:
    """The correction for ``grade`` (None when it is correct). ``explicit`` requires ``target``;
    ``request`` (the user turn being answered) tells ``fix`` whether a duration was asked for."""
    if style not in STYLES:
        raise ValueError(f"unknown correction style {style!r}; expected one of {', '.join(STYLES)}")
    if grade.is_correct:
        return None
    expected = parse_target(api, target) if target is not None else None
    if style == "explicit" and expected is None:
        raise ValueError("an explicit correction needs the target reply")
    if grade.label == "garbage" or not grade.findings:
        return _garbage(api, expected, target if style == "explicit" else None)
    finding = grade.findings[0]
    words = _Words(api, phrases, finding, expected)
    hint = words.say(HINTS, phrases.hints) or f"Wrong {finding.param or 'call'}."
    if style == "fix":
        return words.fix(request) or hint
    if style == "hint" or expected is None:
        return hint
    if finding.kind == Mistake.WRONG_YEAR:
        return words.say(EXPLICIT, phrases.explicit) or hint
    value = words.explicit_value()
    return hint if value is None else f"{hint[:-1]}: {value}."


def _garbage(api: Api, expected: tuple[TargetCall, ...] | None, full_target: str | None) -> str:
    if full_target is not None:
        return f"Reply with the API call only: {full_target}"
    function = expected[0].function.name if expected else api.functions[0].name
    return f"Reply with a single line of code calling {api.namespace}.{function}."


class _Words:
    """One finding, with what the sentences need to know about it."""

    def __init__(self, api: Api, phrases: Phrasebook, finding: Finding,
                 expected: tuple[TargetCall, ...] | None) -> None:
        self.api, self.phrases, self.finding = api, phrases, finding
        self.target = _target_for(finding, expected)
        self.param = _param(self.target, finding.param)
        self.value = self.target.value(finding.param) if self.target and finding.param else None

    def keys(self) -> list[str]:
        kind, param = self.finding.kind, self.finding.param
        function = self.target.function.name if self.target else (
            self.finding.expected or "").rsplit(".", 1)[-1]
        keys = []
        if param:
            keys += [f"{kind}:{param}@{function}", f"{kind}:{param}"]
        keys.append(f"{kind}@{function}")
        if self.finding.detail:
            keys.append(f"{kind}/{self.finding.detail}")
        return [*keys, kind]

    def say(self, shared: Mapping[str, str], own: Mapping[str, str]) -> str | None:
        for key in self.keys():
            template = own.get(key, shared.get(key))
            if template is not None:
                return template.format(**self._fills())
        return None

    def _fills(self) -> dict[str, str]:
        target = self.target
        function = target.function.name if target else self.api.functions[0].name
        value = self.value
        spoken = values.spoken(self.param, value) if self.param and value not in (None, values.ANY) else ""
        year = str(value.year) if isinstance(value, DateValue) and value.year is not None else ""
        return {"param": self.finding.param or "argument", "value": spoken, "function": function,
                "namespace": self.api.namespace, "detail": self.finding.detail or "the other entries",
                "params": ", ".join(target.function.signature) if target else "", "year": year}

    def fix(self, request: str | None) -> str | None:
        """The sentence naming the fix, or None where the hint already does (or nothing is known)."""
        own = self.say(FIXES, self.phrases.fixes)
        if own is not None:
            return own
        param, value = self.param, self.value
        if param is None or value is None or value is values.ANY:
            return None
        kind = self.finding.kind
        if param.type == "minutes" and kind in (Mistake.MISSING_ARGUMENT, param.value_mistake):
            stated = request is not None and _STATES_DURATION.search(request) is not None
            if param.default is not None and value == param.default and not stated:
                return f"Use the default {param.name}."
            return f"The {param.name} is {values.spoken(param, value)}."
        if kind == param.value_mistake:
            return f"The {param.name} is {values.spoken(param, value)}."
        return None

    def explicit_value(self) -> str | None:
        """The right value for an explicit correction, or None when the hint says it all."""
        param, value = self.param, self.value
        if self.finding.kind in _NO_VALUE or param is None or value is None or value is values.ANY:
            return None
        if param.type == "title":
            return values.literal(param, value)
        if param.type == "minutes" and isinstance(value, float):
            return f"{value:g} minutes"
        if param.type in ("date", "time"):
            return values.literal(param, value).strip('"')
        return values.spoken(param, value)


def _target_for(finding: Finding, expected: tuple[TargetCall, ...] | None) -> TargetCall | None:
    """The expected call the finding is about: the one giving its parameter, else the first."""
    if not expected:
        return None
    if finding.kind == Mistake.MISSING_CALL:
        return next((t for t in expected if t.function.name == finding.expected), expected[0])
    return next((t for t in expected if finding.param and finding.param in t.function.signature), expected[0])


def _param(target: TargetCall | None, name: str | None) -> Param | None:
    if target is None or name is None or name not in target.function.signature:
        return None
    return target.function.param(name)
