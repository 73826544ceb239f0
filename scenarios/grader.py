"""The grader: label a reply against the reply its turn expected, and type every mistake.

Nothing here executes model output: calls are located with ``re`` and read with ``ast`` (see
``scenarios.calls``); hostile text (a megabyte, NUL bytes, deep nesting, ``__import__``) is ``garbage``.
What a scenario's calls look like comes from its declared API (``scenarios.api``); how each value is read
and compared, from its parameter's type (``scenarios.values``). The grader itself knows no scenario.

Rules, decided for Fixit Arena and applied the same way by people reading the grades:

* **Equivalent forms are correct**: positional or keyword arguments, single or double quotes, constant
  arithmetic (``60*3`` == ``180``), a call split over several lines, a trailing ``;`` or ``# comment``,
  and markdown code fences or backticks around the call *when nothing else is written*.
* **Title variation rule** (``title`` parameters): two titles match when they have the same set of
  significant words — lower-cased alphanumeric words with a plural ``s`` dropped, without stop words
  (a, an, the, with, and, of, for, at, on, in, to, my, our). Generic event words (meeting, meet, event,
  appointment, entry, calendar, call) are optional unless they are all the expected title has. So
  "Meeting with Fred", "Fred meeting", "meeting fred" and "Fred" match; "Rock concert" and "Rock Concert
  event" match "Rock Concert"; "Concert", "Meeting with Paul" or "Fred's meeting on Nov 11" do not
  (``wrong_title``). ``text`` parameters (an item's name) need the same significant words.
* **Format vs value**: a 12-hour time, a date not written ``YYYY-MM-DD`` ("20 24-11-11", "11/11/2024"),
  a duration or a number as text, an unknown or extra parameter are ``bad_format``; the value is still
  read and compared, so ``time="5:00 PM"`` for 17:00 is one mistake and ``time="5:00 AM"`` is two.
* **Assumptions are not mistakes**: a value the dialogue has not stated yet (the calendar's year before
  anyone says it; a trap turn's ``assumes``) accepts any readable value and records it in ``assumed``.
* **A turn may expect several calls** (a move: remove, then add): each expected call is paired with the
  first call of its function; a call too many is ``multiple_calls``, one too few ``missing_call``.
* **Labels**: ``garbage`` when no recognisable call is found (then ``mistakes`` is empty); else
  ``many`` for three or more mistakes, counted per finding (a 12-hour time *and* a slashed date are two
  ``bad_format`` mistakes), ``partial`` for one or two, ``correct`` for none. ``mistakes`` lists the
  distinct kinds in the order a person would correct them (:func:`mistake_order`); ``findings`` has each.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from scenarios import values
from scenarios.api import Api, Function, bind_call
from scenarios.calls import ParsedCall, extract_calls
from scenarios.mistakes import STATE_MISTAKES, STATE_ORDER, STRUCTURAL, Finding, Mistake
from scenarios.values import Value

Label = Literal["correct", "partial", "garbage", "many"]
EMOJI: dict[str, str] = {"correct": "✓", "partial": "🍄", "garbage": "🔥", "many": "🔥🔥"}

__all__ = ["EMOJI", "STATE_MISTAKES", "Finding", "Grade", "Label", "Mistake", "TargetCall", "build_grade",
           "grade_reply", "mistake_order", "parse_target"]


def mistake_order(api: Api) -> tuple[str, ...]:
    """Every mistake kind of ``api``'s scenario, in the order a person corrects them: the shape of the
    reply, then its values in parameter order, then what it did to the state."""
    return (*STRUCTURAL, *(k for k in api.value_mistakes() if k not in STRUCTURAL), *STATE_ORDER)


@dataclass(frozen=True, slots=True)
class Grade:
    label: Label
    mistakes: list[str]
    findings: tuple[Finding, ...] = ()
    call: ParsedCall | None = None
    assumptions: tuple[Finding, ...] = ()  # values taken on trust where the dialogue had not said them

    @property
    def assumed(self) -> tuple[str, ...]:
        """The names of the values assumed: "year" for a date's year, else the parameter's name."""
        return tuple(dict.fromkeys("year" if f.kind == Mistake.WRONG_YEAR else f.param or "?"
                                   for f in self.assumptions))

    @property
    def emoji(self) -> str:
        return EMOJI[self.label]

    @property
    def is_correct(self) -> bool:
        return self.label == "correct"

    def without(self, *kinds: str) -> Grade:
        """The grade with some mistake kinds forgiven."""
        if self.label == "garbage":
            return self
        findings = tuple(f for f in self.findings if f.kind not in kinds)
        return build_grade(findings, call=self.call, assumptions=self.assumptions)


@dataclass(frozen=True, slots=True)
class TargetCall:
    """One expected call, read once: its function and the value of each parameter it gives."""

    function: Function
    values: dict[str, Value]

    def value(self, name: str) -> Value | None:
        return self.values.get(name)


def build_grade(findings: Iterable[Finding], *, call: ParsedCall | None, order: tuple[str, ...] = (),
                assumptions: tuple[Finding, ...] = ()) -> Grade:
    """A grade from its findings: label by their count, kinds in ``order`` (as given when empty)."""
    ordered = tuple(findings)
    if order:
        rank = {kind: i for i, kind in enumerate(order)}
        ordered = tuple(sorted(ordered, key=lambda f: rank.get(f.kind, len(rank))))
    kinds = list(dict.fromkeys(f.kind for f in ordered))
    label: Label = "many" if len(ordered) >= 3 else "partial" if kinds else "correct"
    return Grade(label=label, mistakes=kinds, findings=ordered, call=call, assumptions=assumptions)


def grade_reply(reply: str, *, target: str, api: Api, assumes: frozenset[str] = frozenset()) -> Grade:
    """Grade ``reply`` against the expected reply ``target`` (one line of correct API calls). ``assumes``
    names the values the dialogue has not stated ("year" for a date's year, or a parameter's name)."""
    targets = [_unknown(t, assumes) for t in parse_target(api, target)]
    extraction = extract_calls(reply, api)
    if not extraction.calls:
        return Grade(label="garbage", mistakes=[])
    pairs = _pair(api, extraction.calls, targets)
    findings: list[Finding] = []
    assumed: list[Finding] = []
    for call, expected in pairs:
        if call is None:
            findings.append(Finding(Mistake.MISSING_CALL, expected=expected.function.name))
            continue
        findings += _function_findings(api, call, expected)
        if call.syntax is not None:
            findings.append(Finding(Mistake.SYNTAX, detail=call.syntax))
    if len(extraction.calls) > len(targets):
        findings.append(Finding(Mistake.MULTIPLE_CALLS, got=str(len(extraction.calls))))
    if extraction.leftover:
        findings.append(Finding(Mistake.CHATTY, got=extraction.leftover[:120]))
    for call, expected in pairs:
        if call is not None:
            found, made = _argument_findings(api, call, expected)
            findings += found
            assumed += made
    first = next(call for call, _ in pairs if call is not None)
    return build_grade(findings, call=first, order=mistake_order(api), assumptions=tuple(assumed))


def _pair(api: Api, calls: tuple[ParsedCall, ...],
          targets: list[TargetCall]) -> list[tuple[ParsedCall | None, TargetCall]]:
    """Each expected call with the reply's call of its function (else the next call not yet taken)."""
    free = list(calls)
    pairs: list[tuple[ParsedCall | None, TargetCall]] = []
    for expected in targets:
        name = expected.function.name
        call = next((c for c in free if api.is_api(c) and c.function == name), free[0] if free else None)
        if call is not None:
            free.remove(call)
        pairs.append((call, expected))
    return pairs


_TARGETS: dict[tuple[int, str], tuple[TargetCall, ...]] = {}


def parse_target(api: Api, target: str) -> tuple[TargetCall, ...]:
    """Read an expected reply (trusted scenario data) into expected calls; ValueError if it is not one or
    more clean API calls that each give every required parameter readably."""
    key = (id(api), target)
    cached = _TARGETS.get(key)
    if cached is not None:
        return cached
    extraction = extract_calls(target, api)
    calls = extraction.calls
    if not calls or extraction.leftover or any(not api.is_api(c) or c.syntax for c in calls):
        raise ValueError(f"target is not a line of API calls: {target[:80]!r}")
    parsed = tuple(_target_call(api, call, target) for call in calls)
    if len(_TARGETS) > 4096:
        _TARGETS.clear()
    _TARGETS[key] = parsed
    return parsed


def _target_call(api: Api, call: ParsedCall, target: str) -> TargetCall:
    function = api.function(call.function)
    assert function is not None
    bound, problems = bind_call(call, function.signature, api.aliases)
    read: dict[str, Value] = {}
    for param in function.params:
        arg = bound.get(param.name)
        reading = values.read(param, arg) if arg is not None else None
        if reading is not None and reading.value is not None and not reading.bad_format:
            read[param.name] = reading.value
        elif param.required or arg is not None:
            raise ValueError(f"target lacks a readable {param.name}: {target[:80]!r}")
    if problems:
        raise ValueError(f"target breaks the signature ({problems[0]}): {target[:80]!r}")
    return TargetCall(function, read)


def _unknown(target: TargetCall, assumes: frozenset[str]) -> TargetCall:
    if not assumes:
        return target
    return TargetCall(target.function, {name: values.unknown(name, value, assumes)
                                        for name, value in target.values.items()})


def _function_findings(api: Api, call: ParsedCall, expected: TargetCall) -> list[Finding]:
    wanted = f"{api.namespace}.{expected.function.name}"
    if call.callee == wanted:
        return []
    detail = "prefix" if call.function == expected.function.name else "function"
    return [Finding(Mistake.WRONG_FUNCTION, got=call.callee, expected=wanted, detail=detail)]


def _argument_findings(api: Api, call: ParsedCall,
                       expected: TargetCall) -> tuple[list[Finding], list[Finding]]:
    own = api.function(call.function)
    signature = own.signature if own is not None else expected.function.signature
    bound, problems = bind_call(call, signature, api.aliases)
    compared = [p for p in expected.function.params if own is None or p.name in own.signature]
    findings = [Finding(Mistake.BAD_FORMAT, param="params", got=p, detail="params") for p in problems]
    assumed: list[Finding] = []
    for param in compared:
        arg = bound.get(param.name)
        want = expected.value(param.name)
        if arg is None:
            if param.required:
                findings.append(Finding(Mistake.MISSING_ARGUMENT, param=param.name))
            elif want is not None and want is not values.ANY and param.default is not None \
                    and not values.same(param, param.default, want):
                findings.append(Finding(values.mistake_kind(param.value_mistake), param=param.name,
                                        got="(left out)", expected=values.literal(param, want).strip('"')))
            continue
        found, made = values.findings(param, arg, want)
        findings += found
        assumed += made
    return findings, assumed
