"""A scenario's API as data: its functions, their parameters (type, default, required) and what each call
does to the world.

The grader, the state model, the correction writer and the generators read these declarations; nothing
here runs model output. A parameter's ``type`` names one of the value readers of :mod:`scenarios.values`
(how a written argument is understood and compared); its ``mistake`` names the mistake kind a wrong value
is (``wrong_quantity``). An :class:`Effect` says what a call does to the scenario's state
(:mod:`scenarios.state`): insert-or-replace a record keyed by some parameters, delete it, or update some
of its fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from scenarios.calls import ArgValue, ParsedCall

ParamType = Literal["title", "date", "time", "minutes", "number", "choice", "text", "bool", "days"]
PARAM_TYPES: tuple[ParamType, ...] = ("title", "date", "time", "minutes", "number", "choice", "text", "bool",
                                      "days")
Scalar = str | float | bool | tuple[str, ...]
EffectOp = Literal["upsert", "delete", "update"]


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter. ``required``: the grader wants it written (a missing one is ``missing_argument``)
    even when ``default`` fills the state (the calendar's duration: the study counts it missing).
    ``choices`` bounds a ``choice`` or ``days`` value; ``mistake`` is the kind of a wrong value
    (default ``wrong_<name>``; a date also has ``wrong_year``)."""

    name: str
    type: ParamType
    required: bool = True
    default: Scalar | None = None
    choices: tuple[str, ...] = ()
    mistake: str = ""

    def __post_init__(self) -> None:
        if self.type not in PARAM_TYPES:
            raise ValueError(f"parameter {self.name!r}: unknown type {self.type!r}")
        if self.type in ("choice", "days") and not self.choices:
            raise ValueError(f"parameter {self.name!r}: a {self.type} needs its choices")

    @property
    def mistake_kinds(self) -> tuple[str, ...]:
        """The value mistakes this parameter can carry, in correction order."""
        if self.type == "date":
            return ("wrong_year", self.mistake or "wrong_date")
        return (self.mistake or f"wrong_{self.name}",)

    @property
    def value_mistake(self) -> str:
        """The kind of a wrong value (a date's wrong day or month; its year is ``wrong_year``)."""
        return self.mistake_kinds[-1]


@dataclass(frozen=True, slots=True)
class Effect:
    """What a call does to ``collection``: ``upsert`` inserts the call's record, or sets its fields on the
    one with the same ``key`` fields (keeping fields the call does not have); ``delete`` removes the first
    record with that key; ``update`` sets the call's other fields on the record with that key (no such
    record: no change)."""

    op: EffectOp
    collection: str
    key: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Function:
    name: str
    params: tuple[Param, ...]
    effect: Effect
    doc: str = ""

    def __post_init__(self) -> None:
        names = [p.name for p in self.params]
        missing = [k for k in self.effect.key if k not in names]
        if missing:
            raise ValueError(f"function {self.name!r}: effect key {missing} is not among its parameters")

    @property
    def signature(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)


@dataclass(frozen=True, slots=True)
class Api:
    """The functions a scenario's replies call, on the object ``namespace`` (``action.add_calendar_entry``).
    ``aliases`` are keyword names models use instead of the API's: bound for comparison, still
    ``bad_format``."""

    namespace: str
    functions: tuple[Function, ...]
    aliases: Mapping[str, str] = field(default_factory=dict)

    def function(self, name: str) -> Function | None:
        return next((f for f in self.functions if f.name == name), None)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.functions)

    def is_api(self, call: ParsedCall) -> bool:
        """Exactly one of the API's functions, called on ``namespace``."""
        return call.callee == f"{self.namespace}.{call.function}" and call.function in self.names

    def recognisable(self, callee: str) -> bool:
        """The API's functions, with or without the prefix, and any method called on ``namespace``."""
        parts = callee.split(".")
        return parts[-1] in self.names or (parts[0] == self.namespace and len(parts) >= 2)

    def markers(self) -> tuple[str, ...]:
        """Substrings one of which every recognisable call contains (the extractor's fast path)."""
        return (f"{self.namespace}.", *self.names)

    def value_mistakes(self) -> tuple[str, ...]:
        """Every value mistake kind of the API, in parameter declaration order (correction priority)."""
        kinds: dict[str, None] = {}
        for function in self.functions:
            for param in function.params:
                kinds.update(dict.fromkeys(param.mistake_kinds))
        return tuple(kinds)

    def describe(self) -> list[dict[str, object]]:
        """The API as JSON-ready data (``scenarios list --json``, docs)."""
        return [{"name": f.name, "params": [{"name": p.name, "type": p.type, "required": p.required,
                                             "default": p.default, "choices": list(p.choices)}
                                            for p in f.params],
                 "effect": {"op": f.effect.op, "collection": f.effect.collection, "key": list(f.effect.key)}}
                for f in self.functions]


def bind_call(call: ParsedCall, params: tuple[str, ...],
              aliases: Mapping[str, str] | None = None) -> tuple[dict[str, ArgValue], list[str]]:
    """Map arguments to parameter names (positional in signature order, keywords and their ``aliases``
    by name); return them and the problems that broke the signature."""
    bound: dict[str, ArgValue] = {}
    problems: list[str] = []
    for index, arg in enumerate(call.args):
        if index < len(params):
            bound[params[index]] = arg
        else:
            problems.append(f"extra positional argument {arg.source[:30]}")
    for name, arg in call.kwargs:
        param = name if name in params else (aliases or {}).get(name)
        if name not in params:
            problems.append(f"unknown parameter {name}")
        if param is None or param not in params:
            continue
        if param in bound:
            problems.append(f"{param} given twice")
            continue
        bound[param] = arg
    return bound, problems
