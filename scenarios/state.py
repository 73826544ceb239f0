"""A scenario's simulated world: what its records would be after the calls a reply makes.

The dialogue grader (``scenarios.dialogue``) compares the state after each turn with the state the
expected replies produce, as BFCL's multi-turn checker and τ-bench compare an environment's state instead
of call text. What a call does is declared on the API (``scenarios.api.Effect``); this module reads those
declarations, it never runs anything. Calls are bound to the API signature (positional or keyword) and
their values read leniently by type (``scenarios.values``). The rules:

* ``upsert`` sets the call's fields on the record of the collection whose key fields are the same
  (titles by the title rule; fields the call does not have are kept), else appends one; ``delete``
  removes the first such record; ``update`` sets the call's other fields on it. No such record: no
  change.
* A call whose key fields cannot be read, or that leaves out (or garbles) a parameter with no default,
  changes nothing (a real API would raise). An unreadable or missing parameter with a default takes the
  default; a ``minutes`` value of zero or less, too. The ``namespace.`` prefix is not required: the
  grader already types that mistake; the state records what the person asked for.
* An expected value the dialogue has not stated (``values.ANY``, a date with year None) matches any.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from scenarios.api import Api, Function, Param, bind_call
from scenarios.calls import ParsedCall, extract_calls
from scenarios.values import Value, literal, read, same, unknown

Fields = tuple[tuple[str, Value], ...]


@dataclass(frozen=True, slots=True)
class Record:
    """One thing in the world (a calendar entry, an item on the list, a room's light)."""

    collection: str
    fields: Fields

    def get(self, name: str) -> Value | None:
        return next((v for k, v in self.fields if k == name), None)


State = tuple[Record, ...]
EMPTY: State = ()


@dataclass(frozen=True, slots=True)
class Call:
    """A call understood against the API: its function and the values of its parameters."""

    function: Function
    values: Fields


def understand(api: Api, call: ParsedCall) -> Call | None:
    """The call's function and values (defaults filled), or None when a real API would refuse it."""
    function = api.function(call.function)
    if function is None:
        return None
    bound, _ = bind_call(call, function.signature, api.aliases)
    values: list[tuple[str, Value]] = []
    for param in function.params:
        arg = bound.get(param.name)
        value = _value(param, read(param, arg).value if arg is not None else None)
        if value is not None:
            values.append((param.name, value))
        elif arg is not None or param.required or param.name in function.effect.key:
            return None  # garbled, or left out with no default: the API would raise
    return Call(function, tuple(values))


def _value(param: Param, value: Value | None) -> Value | None:
    if value is None:
        return param.default
    if param.type == "minutes" and isinstance(value, float) and value <= 0:
        return param.default
    return value


def _params(api: Api, collection: str) -> dict[str, Param]:
    """Every field of ``collection``, by the first function that declares it."""
    out: dict[str, Param] = {}
    for function in api.functions:
        if function.effect.collection == collection:
            for param in function.params:
                out.setdefault(param.name, param)
    return out


def _same_key(api: Api, record: Record, call: Call) -> bool:
    if record.collection != call.function.effect.collection:
        return False
    params = _params(api, record.collection)
    values = dict(call.values)
    for name in call.function.effect.key:
        got = record.get(name)
        if got is None or not same(params[name], got, values[name]):
            return False
    return True


def apply_call(api: Api, state: State, call: ParsedCall) -> State:
    """The state after one call (unchanged when the call cannot be understood)."""
    understood = understand(api, call)
    if understood is None:
        return state
    effect = understood.function.effect
    index = next((i for i, r in enumerate(state) if _same_key(api, r, understood)), None)
    if effect.op == "delete":
        return state if index is None else state[:index] + state[index + 1:]
    if effect.op == "update":
        if index is None:
            return state
        merged = dict(state[index].fields)
        merged.update(understood.values)
        return (*state[:index], Record(effect.collection, tuple(merged.items())), *state[index + 1:])
    if index is None:
        return (*state, Record(effect.collection, understood.values))
    kept = dict(state[index].fields)  # fields the call does not have (a shopping item's note) stay
    kept.update(understood.values)
    return (*state[:index], Record(effect.collection, tuple(kept.items())), *state[index + 1:])


def apply_calls(api: Api, state: State, calls: Iterable[ParsedCall]) -> State:
    for call in calls:
        state = apply_call(api, state, call)
    return state


def apply_reply(api: Api, state: State, reply: str) -> State:
    """The state after every recognisable call in ``reply``, in order (garbage changes nothing)."""
    return apply_calls(api, state, extract_calls(reply, api).calls)


def record_matches(api: Api, got: Record, want: Record) -> bool:
    """``got`` is the ``want`` record: same collection and fields, every value the same."""
    if got.collection != want.collection:
        return False
    params = _params(api, want.collection)
    got_fields = dict(got.fields)
    if set(got_fields) != {k for k, _ in want.fields}:
        return False
    return all(same(params[k], got_fields[k], v) for k, v in want.fields)


def states_match(api: Api, actual: State, expected: State) -> bool:
    """Every expected record present exactly once, and nothing else."""
    left = list(actual)
    for want in expected:
        hit = next((i for i, got in enumerate(left) if record_matches(api, got, want)), None)
        if hit is None:
            return False
        del left[hit]
    return not left


def describe(api: Api, record: Record) -> str:
    """The record in words: its values as the API writes them ("Meeting with Fred 2024-11-11 17:00 30")."""
    params = _params(api, record.collection)
    return " ".join(literal(params[k], v).strip('"') if k in params else str(v) for k, v in record.fields)


def name_of(api: Api, record: Record) -> str:
    """What a person calls the record: its first title or text value, else its description."""
    params = _params(api, record.collection)
    named = next((v for k, v in record.fields if k in params and params[k].type in ("title", "text")
                  and isinstance(v, str)), None)
    return named if named is not None else describe(api, record)


def with_unknown(state: State, names: frozenset[str]) -> State:
    """The same records with the values named in ``names`` not known yet ("year": a date's year)."""
    if not names:
        return state
    return tuple(Record(r.collection, tuple((k, unknown(k, v, names)) for k, v in r.fields)) for r in state)
