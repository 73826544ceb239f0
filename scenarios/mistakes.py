"""Typed mistakes: the kinds every scenario shares, and one finding (a mistake in its context).

A scenario adds its own value kinds through its API (``Param.mistake``: ``wrong_quantity``); a finding's
``kind`` is then that plain string. The shared kinds are :class:`Mistake` members (a ``str``: they compare
and serialise as their value), in the order a person corrects them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Mistake(StrEnum):
    """Mistake names shared by the scenarios (the calendar's value kinds included, in study order)."""

    WRONG_FUNCTION = "wrong_function"
    SYNTAX = "syntax"
    MULTIPLE_CALLS = "multiple_calls"
    MISSING_CALL = "missing_call"  # a turn that needs two calls (a move: remove, then add) got one
    CHATTY = "chatty"
    MISSING_ARGUMENT = "missing_argument"
    BAD_FORMAT = "bad_format"
    WRONG_TITLE = "wrong_title"
    WRONG_YEAR = "wrong_year"
    WRONG_DATE = "wrong_date"
    WRONG_TIME = "wrong_time"
    WRONG_DURATION = "wrong_duration"
    # Found only by following a dialogue on the scenario's simulated state (``scenarios.dialogue``):
    REGRESSION = "regression"  # a record that was right before this reply is broken or gone
    DOUBLE_BOOKING = "double_booking"  # the reply made two calendar entries overlap in time


STATE_MISTAKES: frozenset[str] = frozenset({Mistake.REGRESSION, Mistake.DOUBLE_BOOKING})
STRUCTURAL: tuple[Mistake, ...] = (Mistake.WRONG_FUNCTION, Mistake.SYNTAX, Mistake.MULTIPLE_CALLS,
                                   Mistake.MISSING_CALL, Mistake.CHATTY, Mistake.MISSING_ARGUMENT,
                                   Mistake.BAD_FORMAT)
STATE_ORDER: tuple[Mistake, ...] = (Mistake.REGRESSION, Mistake.DOUBLE_BOOKING)


@dataclass(frozen=True, slots=True)
class Finding:
    """One mistake with its context: which parameter, what was written, what was expected."""

    kind: str
    param: str | None = None
    got: str | None = None
    expected: str | None = None
    detail: str | None = None  # e.g. "extra_parenthesis", "prefix", "params"
