"""Helpers for the scenario tests: play a dialogue's turns with given replies, and write an expected call
back with one thing changed (the mutations every gradable scenario must not grade correct)."""

from __future__ import annotations

from collections.abc import Sequence

from scenarios.api import Api, Param
from scenarios.base import Scenario, Turn
from scenarios.dialogue import DialogueMessage, ReplyGrade, grade_dialogue
from scenarios.fields import DateValue
from scenarios.grader import TargetCall
from scenarios.values import Value, literal


def dialogue_messages(turns: Sequence[Turn], replies: Sequence[str]) -> list[DialogueMessage]:
    """Each turn's user text (a false correction sent as a ``correction``), then its reply."""
    out = []
    for turn, reply in zip(turns, replies, strict=True):
        out.append(DialogueMessage("user", "request" if turn.kind == "request" else "correction", turn.user))
        out.append(DialogueMessage("assistant", "reply", reply))
    return out


def play(scenario: Scenario, turns: Sequence[Turn], replies: Sequence[str]) -> list[ReplyGrade]:
    return grade_dialogue(scenario, dialogue_messages(turns, replies), tuple(turns))


def rewrite_call(api: Api, target: TargetCall, *, function: str | None = None,
                 change: str | None = None) -> str:
    """The expected call written back with keywords, with one parameter changed or another function."""
    args = []
    for param in target.function.params:
        value = target.value(param.name)
        if value is None:
            continue
        if param.name == change:
            value = other_value(param, value)
        args.append(f"{param.name}={literal(param, value)}")
    return f"{api.namespace}.{function or target.function.name}({', '.join(args)})"


def other_value(param: Param, value: Value) -> Value:
    """A different value of the same type."""
    if param.type in ("title", "text"):
        return "Something Else Entirely"
    if isinstance(value, DateValue):
        return DateValue(value.year, value.month, value.day % 27 + 1)
    if param.type == "time" and isinstance(value, tuple):
        return ((int(value[0]) + 1) % 24, int(value[1]))
    if isinstance(value, bool):
        return not value
    if isinstance(value, float):
        return value + 7
    if param.type == "choice":
        return next(c for c in param.choices if c != value)
    if param.type == "days" and isinstance(value, tuple):
        return tuple(d for d in param.choices if d not in value) or (param.choices[0],)
    raise AssertionError(f"no other value for {param}")
