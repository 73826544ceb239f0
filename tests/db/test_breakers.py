"""Circuit breakers in the database (``db.actions.breakers``): they open after failures in a row within a
window, stay open for a cool-down, give one trial when half-open and close on a good reply; on SQLite and
on PostgreSQL, with the clock passed in (no sleeping)."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import Engine

from db import actions
from db.errors import InvalidInput, NotFound
from tests.db.conftest import Arena

T0 = dt.datetime(2026, 12, 7, 12, 0, tzinfo=dt.UTC)
S = dt.timedelta(seconds=1)
RULES = actions.BreakerRules(failures=3, window=60 * S, cooldown=120 * S)


def _fail(engine: Engine, slug: str, at: dt.datetime) -> actions.BreakerState:
    return actions.record_reply(engine, slug=slug, failed=True, rules=RULES, now=at)


def _ok(engine: Engine, slug: str, at: dt.datetime) -> actions.BreakerState:
    return actions.record_reply(engine, slug=slug, failed=False, rules=RULES, now=at)


def test_failures_in_a_row_open_the_breaker_for_the_cool_down(engine: Engine, arena: Arena) -> None:
    assert actions.open_breakers(engine, now=T0) == frozenset()
    assert [_fail(engine, "m1", T0 + i * S) for i in range(3)] == ["closed", "closed", "open"]
    assert actions.open_breakers(engine, now=T0 + 2 * S) == {"m1"}
    assert actions.open_breakers(engine, now=T0 + 121 * S) == {"m1"}, "open for the whole cool-down"
    assert actions.open_breakers(engine, now=T0 + 123 * S) == frozenset(), "then half-open: drawn again"
    _fail(engine, "m2", T0)
    assert actions.open_breakers(engine, now=T0 + 2 * S) == {"m1"}, "each model has its own breaker"


def test_a_good_reply_ends_the_streak(engine: Engine, arena: Arena) -> None:
    _fail(engine, "m1", T0)
    _fail(engine, "m1", T0 + S)
    assert _ok(engine, "m1", T0 + 2 * S) == "closed"
    assert [_fail(engine, "m1", T0 + (3 + i) * S) for i in range(3)] == ["closed", "closed", "open"]


def test_failures_spread_wider_than_the_window_do_not_open_it(engine: Engine, arena: Arena) -> None:
    states = [_fail(engine, "m1", T0 + i * 40 * S) for i in range(5)]  # the 3rd is 80 s after the 1st
    assert states == ["closed"] * 5
    assert actions.open_breakers(engine, now=T0 + 200 * S) == frozenset()


def test_half_open_gives_one_trial_that_closes_or_reopens_it(engine: Engine, arena: Arena) -> None:
    for i in range(3):
        _fail(engine, "m1", T0 + i * S)
    during = T0 + 60 * S
    assert actions.claim_trials(engine, slugs=["m1", "m2"], cooldown=RULES.cooldown, now=during) == ()
    half_open = T0 + 200 * S
    assert actions.claim_trials(engine, slugs=["m1", "m2"], cooldown=RULES.cooldown, now=half_open) == ("m1",)
    assert actions.open_breakers(engine, now=half_open) == {"m1"}, "out of the pairing while on trial"
    assert actions.claim_trials(engine, slugs=["m1"], cooldown=RULES.cooldown, now=half_open) == (), "one"

    assert _fail(engine, "m1", half_open + S) == "open", "the trial failed: a whole cool-down more"
    assert actions.open_breakers(engine, now=half_open + 120 * S) == {"m1"}
    later = half_open + 122 * S
    assert actions.claim_trials(engine, slugs=["m1"], cooldown=RULES.cooldown, now=later) == ("m1",)
    assert _ok(engine, "m1", later + S) == "closed"
    assert actions.open_breakers(engine, now=later + S) == frozenset()
    assert [_fail(engine, "m1", later + (2 + i) * S) for i in range(2)] == ["closed", "closed"], \
        "closed again: a fresh streak, not one failure from open"


def test_a_failure_while_open_keeps_it_open_longer(engine: Engine, arena: Arena) -> None:
    for i in range(3):
        _fail(engine, "m1", T0 + i * S)
    assert _fail(engine, "m1", T0 + 100 * S) == "open"  # a battle that drew it before it opened
    assert actions.open_breakers(engine, now=T0 + 200 * S) == {"m1"}
    assert actions.open_breakers(engine, now=T0 + 221 * S) == frozenset()


def test_bad_input_is_refused(engine: Engine, arena: Arena) -> None:
    with pytest.raises(NotFound):
        _fail(engine, "nobody", T0)
    with pytest.raises(InvalidInput):
        actions.record_reply(engine, slug="m1", failed=True, rules=RULES, now=T0.replace(tzinfo=None))
    with pytest.raises(InvalidInput):
        actions.BreakerRules(failures=0, window=S, cooldown=S)
    with pytest.raises(InvalidInput):
        actions.BreakerRules(failures=1, window=S, cooldown=-S)

