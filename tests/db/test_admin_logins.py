"""Failed admin logins live in the database, so the back-off holds across every server process.

Probe of the old code: the back-off (per session, per address, and the global budget of
``ARENA_ADMIN_FAILURES_PER_HOUR``) was kept in process memory, so with several replicas on one database an
attacker got one back-off schedule and one global budget per replica; a second process let the right
password in at once after three failures in the first.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator

import pytest
from pydantic import SecretStr
from sqlalchemy import Engine, func, select

from db import actions
from db.engine import make_engine, write_session
from db.errors import InvalidInput
from db.models import AdminLoginFailure, Base, utcnow
from settings import Settings
from webapp.admin_gate import DatabaseLoginThrottle, check_password

PASSWORD = "a-long-admin-password-1"
HOUR = dt.timedelta(hours=1)


def _age(engine: Engine, delta: dt.timedelta) -> None:
    """Move every stored failure back by ``delta``, as if it had happened that long ago."""
    with write_session(engine) as session:
        for row in session.scalars(select(AdminLoginFailure)):
            row.failed_at -= delta


def _rows(engine: Engine) -> int:
    with write_session(engine) as session:
        return int(session.scalar(select(func.count()).select_from(AdminLoginFailure)) or 0)


def _state(engine: Engine, *keys: str, window: dt.timedelta = HOUR) -> actions.AdminFailureState:
    return actions.admin_failure_state(engine, keys=keys, since_global=utcnow() - window)


def test_a_failure_is_a_row_per_key_and_one_global_at_one_time(engine: Engine) -> None:
    first = actions.record_admin_failure(engine, keys=("session:a", "address:x", "session:a"))
    second = actions.record_admin_failure(engine, keys=("session:b", "address:x"))
    state = _state(engine, "session:a", "session:b", "address:x", "session:never")
    assert dict(state.keys) == {
        "session:a": (1, first),
        "session:b": (1, second),
        "address:x": (2, second),
        "session:never": (0, None),
    }
    assert (state.global_failures, state.global_oldest) == (2, first)
    assert _rows(engine) == 2 + 2 + 2, "a repeated key is one row; each failure adds one global row"
    assert first.tzinfo is not None and state.keys["address:x"].last == second


@pytest.mark.parametrize(
    "keys", [("session:a", "x" * 81), ("session:a", "global"), ("session:a", ""), "session:a"]
)
def test_bad_keys_write_nothing(engine: Engine, keys: tuple[str, ...]) -> None:
    with pytest.raises(InvalidInput):
        actions.record_admin_failure(engine, keys=keys)
    assert _rows(engine) == 0, "neither the good key nor the global row was written"


def test_a_success_forgets_its_keys_but_not_the_global_budget(engine: Engine) -> None:
    for _ in range(3):
        actions.record_admin_failure(engine, keys=("session:a", "address:x"))
    actions.record_admin_failure(engine, keys=("session:b",))
    assert actions.clear_admin_failures(engine, keys=("session:a", "address:x")) == 6
    state = _state(engine, "session:a", "address:x", "session:b")
    assert dict(state.keys) == {"session:a": (0, None), "address:x": (0, None),
                                "session:b": (1, state.keys["session:b"].last)}
    assert state.global_failures == 4, "everyone's budget keeps every failure"


def test_failures_older_than_a_day_no_longer_count_for_a_key_and_are_pruned(engine: Engine) -> None:
    for _ in range(5):
        actions.record_admin_failure(engine, keys=("address:x",))
    _age(engine, dt.timedelta(hours=25))
    assert _state(engine, "address:x").keys["address:x"] == (0, None), "a day later the back-off starts over"
    latest = actions.record_admin_failure(engine, keys=("address:x",))
    assert _state(engine, "address:x").keys["address:x"] == (1, latest)
    assert _rows(engine) == 2, "recording pruned the day-old rows"


def test_the_global_count_starts_at_since_global(engine: Engine) -> None:
    actions.record_admin_failure(engine, keys=("session:a",))
    actions.record_admin_failure(engine, keys=("session:b",))
    _age(engine, 2 * HOUR)
    latest = actions.record_admin_failure(engine, keys=("session:c",))
    recent = _state(engine)
    assert (recent.global_failures, recent.global_oldest) == (1, latest)
    assert _state(engine, window=3 * HOUR).global_failures == 3
    assert _state(engine, "session:a").keys["session:a"].failures == 1, "the key's own memory is a day"
    with pytest.raises(InvalidInput):
        actions.admin_failure_state(engine, keys=(), since_global=dt.datetime(2026, 1, 1))  # naive


# --- the proof: two processes (two engines, two throttles) on one database share the back-off -----------


@pytest.fixture
def two_engines(db_url: str) -> Iterator[tuple[Engine, Engine]]:
    """Two independent engines (connection pools) on one database, as two replicas have."""
    first, second = make_engine(db_url), make_engine(db_url)
    Base.metadata.create_all(first)
    yield first, second
    first.dispose()
    second.dispose()


def _settings(budget: int = 50) -> Settings:
    return Settings(environment="production", admin_password=SecretStr(PASSWORD),
                    hash_salt=SecretStr("a-long-hashing-salt-2"), admin_failures_per_hour=budget)


def test_failures_through_one_replica_make_another_back_off(two_engines: tuple[Engine, Engine]) -> None:
    one, other = (DatabaseLoginThrottle(e) for e in two_engines)
    settings = _settings()
    keys = ("session:s1", "address:a1")
    for _ in range(3):  # two free failures, then a 2 s back-off
        assert check_password(settings, "wrong", throttle=one, keys=keys).reason == "Wrong password."
    refused = check_password(settings, PASSWORD, throttle=other, keys=keys)
    assert not refused.allowed and re.search(r"Try again in [12] seconds?\.$", refused.reason), refused
    same_address = ("session:fresh", "address:a1")
    assert not check_password(settings, PASSWORD, throttle=other, keys=same_address).allowed
    assert other.wait_s(keys) > 0 and one.wait_s(keys) > 0
    _age(two_engines[0], dt.timedelta(seconds=3))
    assert check_password(settings, PASSWORD, throttle=other, keys=keys).allowed
    assert one.wait_s(keys) == 0.0, "the success on one replica cleared the keys for all"
    assert one.failed(keys) == 1, "the count started over"


def test_the_global_budget_spans_every_replica(two_engines: tuple[Engine, Engine]) -> None:
    one, other = (DatabaseLoginThrottle(e) for e in two_engines)
    settings = _settings(budget=4)
    for n in range(4):  # four attackers, one guess each, alternating replicas: no key backs off
        throttle = one if n % 2 else other
        keys = (f"session:s{n}", f"address:a{n}")
        assert check_password(settings, "wrong", throttle=throttle, keys=keys).reason == "Wrong password."
    assert one.failures_last_hour() == other.failures_last_hour() == 4
    fresh = ("session:new", "address:new")
    for throttle in (one, other):
        refused = check_password(settings, PASSWORD, throttle=throttle, keys=fresh)
        assert not refused.allowed and "Too many failed attempts" in refused.reason, "everyone waits"
    _age(two_engines[1], HOUR)  # the failures have left the hour
    assert check_password(settings, PASSWORD, throttle=one, keys=fresh).allowed
