"""Secrets fail closed and the admin page is accountable (AppTest on the real app).

Probes of the old app: with no ARENA_ENVIRONMENT the app ran in development and the Admin page opened
with the placeholder password; 60 wrong passwords were followed by an instant login with no log; a flag
could not be undone and left no record of who, when or why; flagging needed a pasted battle id.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import Engine, create_engine, select

from db import actions as db_actions
from db.actions import AdminFailureState, KeyFailures
from db.engine import make_engine, write_session
from db.migrate import REPO_ROOT
from db.models import AdminLoginFailure, Base
from settings import DEV_ADMIN_PASSWORD, Settings
from tests.webapp.conftest import open_app
from tests.webapp.test_arena_app import _texts
from tests.webapp.test_pages_app import _anonymous_battle, _submit
from webapp import admin_view
from webapp.admin_gate import (
    MAX_WAIT_S,
    DatabaseLoginThrottle,
    check_password,
    global_wait_s,
    key_wait_s,
    throttle_wait_s,
    wait_after,
    wait_words,
)

PASSWORD = "a-long-admin-password-1"


def _frame(at, column: str):  # noqa: ANN001, ANN202
    """The page's table that has ``column``."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def _login(at, password: str) -> None:  # noqa: ANN001
    at.text_input(key="admin_password").input(password)
    _submit(at, "Log in")


def test_without_an_environment_placeholders_open_nothing(
    arena_env: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    arena_env()
    monkeypatch.delenv("ARENA_ENVIRONMENT")
    monkeypatch.delenv("ARENA_ADMIN_PASSWORD", raising=False)
    at = open_app()
    assert any("not configured" in e and "placeholder" in e for e in _texts(at.error))
    assert not at.text_input and not at.chat_input, "no page is served"
    assert DEV_ADMIN_PASSWORD not in " ".join(_texts(at.error)), "the message names no secret"


def test_failed_logins_back_off_and_are_logged(
    arena_env: Callable[..., str], caplog: pytest.LogCaptureFixture
) -> None:
    arena_env(admin_password=PASSWORD)
    at = open_app("pages/admin.py")
    with caplog.at_level(logging.INFO, logger="webapp.admin_gate"):
        for _ in range(3):
            _login(at, "wrong")
            assert not at.toggle
        _login(at, PASSWORD)
    assert any("Too many failed attempts" in e for e in _texts(at.error)), "the right one waits too"
    assert not at.toggle
    failures = [r for r in caplog.records if "admin login failed" in r.getMessage()]
    assert len(failures) == 3 and "session:" in failures[-1].getMessage()
    assert any("refused while backing off" in r.getMessage() for r in caplog.records)


def test_after_the_wait_it_names_the_right_password_logs_in(arena_env: Callable[..., str]) -> None:
    """The newcomer's probe: the page said "Try again in 0 seconds." and then refused the right password."""
    url = arena_env(admin_password=PASSWORD)
    at = open_app("pages/admin.py")
    for _ in range(3):  # two free failures, then a back-off of 2 s
        _login(at, "wrong")
    _login(at, PASSWORD)
    told = next(e for e in _texts(at.error) if "Try again in" in e)
    wait = re.search(r"Try again in (\d+) seconds?\.$", told)
    assert wait is not None and int(wait.group(1)) >= 1, told
    assert not at.toggle, "the right password waits too"
    _age_failures(make_engine(url), dt.timedelta(seconds=int(wait.group(1))))  # the told wait has passed
    _login(at, PASSWORD)
    assert not any("Try again" in e or "Wrong" in e for e in _texts(at.error)), _texts(at.error)
    assert at.toggle, "logged in: the contestants' toggles are shown"


def test_flag_from_the_list_then_unflag_restores_and_both_are_logged(arena_env: Callable[..., str]) -> None:
    url = arena_env(admin_password=PASSWORD)
    battle_id = _anonymous_battle("a")
    at = open_app("pages/admin.py")
    _login(at, PASSWORD)
    listed = _frame(at, "first request")
    assert battle_id in list(listed["battle"]) and listed["first request"].iloc[0]
    at.selectbox(key="admin_flag_id").set_value(battle_id)
    at.text_input(key="admin_flag_reason").input("spam")
    _submit(at, "Flag")
    engine = create_engine(url)
    assert db_actions.get_battle(engine, battle_id=battle_id).status == "flagged"
    at.selectbox(key="admin_flag_id").set_value(battle_id)
    at.text_input(key="admin_flag_reason").input("not spam after all")
    _submit(at, "Unflag")
    assert db_actions.get_battle(engine, battle_id=battle_id).status == "voted", "the prior status is back"
    log = _frame(at, "admin session")
    assert list(log["action"]) == ["unflag", "flag"] and list(log["reason"]) == ["not spam after all", "spam"]
    sessions = set(log["admin session"])
    assert len(sessions) == 1 and "" not in sessions, "both carry this login's session"


# --- the global failure budget, and never "0 seconds" ---------------------------------------------------


def _strong(**values: Any) -> Settings:
    return Settings(environment="production", admin_password=SecretStr(PASSWORD),
                    hash_salt=SecretStr("a-long-hashing-salt-2"), **values)


def _throttle(tmp_path: Path) -> tuple[DatabaseLoginThrottle, Engine]:
    engine = make_engine(f"sqlite:///{(tmp_path / 'logins.db').as_posix()}")
    Base.metadata.create_all(engine)
    return DatabaseLoginThrottle(engine), engine


def _age_failures(engine: Engine, delta: dt.timedelta) -> None:
    """Every stored login failure as if it had happened ``delta`` earlier."""
    with write_session(engine) as session:
        for row in session.scalars(select(AdminLoginFailure)):
            row.failed_at -= delta


def test_many_sessions_and_addresses_together_meet_the_global_budget(tmp_path: Path) -> None:
    """The probe: the back-off was per session and per address only, so an attacker with many sessions
    and addresses (two free tries each) guessed without ever waiting."""
    throttle, engine = _throttle(tmp_path)
    settings = _strong(admin_failures_per_hour=5)
    for n in range(5):  # five attackers, one guess each: no key of theirs backs off
        keys = (f"session:s{n}", f"address:a{n}")
        assert check_password(settings, "wrong", throttle=throttle, keys=keys).reason == "Wrong password."
    fresh = ("session:new", "address:new")
    refused = check_password(settings, PASSWORD, throttle=throttle, keys=fresh)
    assert not refused.allowed and "Too many failed attempts" in refused.reason, "everyone waits"
    _age_failures(engine, dt.timedelta(seconds=3600))  # the oldest failure has left the hour
    assert check_password(settings, PASSWORD, throttle=throttle, keys=fresh).allowed


def test_the_wait_is_rounded_up_and_never_zero_seconds(tmp_path: Path) -> None:
    """The probe: a back-off with under half a second left said "Try again in 0 seconds."."""
    throttle, _ = _throttle(tmp_path)
    settings = _strong()
    keys = ("session:s",)
    for _ in range(3):  # two free failures, then a 2 s back-off
        check_password(settings, "wrong", throttle=throttle, keys=keys)
    refused = check_password(settings, PASSWORD, throttle=throttle, keys=keys).reason
    assert re.search(r"Try again in [12] seconds?\.$", refused), refused
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    state = AdminFailureState(keys={"session:s": KeyFailures(3, start)}, global_failures=3,
                              global_oldest=start)
    waits = [  # every moment of the 2 s wait, by the same rule the throttle applies
        throttle_wait_s(state, start + dt.timedelta(seconds=step * 0.05), failures_per_hour=50)
        for step in range(40)
    ]
    words = {wait_words(w) for w in waits}
    assert words == {"1 second", "2 seconds"}, words
    assert throttle_wait_s(state, start + dt.timedelta(seconds=2), failures_per_hour=50) == 0.0
    words_of = [wait_words(s) for s in (0.0, 0.001, 1.0, 2.01)]
    assert words_of == ["1 second", "1 second", "1 second", "3 seconds"]


def test_the_back_off_rules() -> None:
    """Per key: two free failures, then 2, 4, 8 … s up to five minutes from the latest failure; for
    everyone: once the hour holds the budget, until the oldest failure leaves the hour."""
    assert [wait_after(n) for n in (0, 1, 2, 3, 4, 5, 60)] == [0, 0, 0, 2, 4, 8, MAX_WAIT_S]
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    ago = [now - dt.timedelta(seconds=s) for s in (0, 1, 600, 3599)]
    assert key_wait_s(KeyFailures(4, ago[1]), now) == 3.0
    assert key_wait_s(KeyFailures(60, ago[2]), now) == 0.0, "five minutes at most"
    assert key_wait_s(KeyFailures(0, None), now) == 0.0
    full = AdminFailureState(keys={}, global_failures=5, global_oldest=ago[3])
    assert global_wait_s(full, now, budget=5) == 1.0
    assert global_wait_s(full, now, budget=6) == 0.0
    assert throttle_wait_s(full, now, failures_per_hour=None) == 0.0, "no budget given, none applied"


def test_failures_in_another_process_make_this_one_back_off(tmp_path: Path) -> None:
    """The probe: the back-off lived in process memory, so after three wrong passwords (and a budget
    used up) in one server process, another process on the same database let the right one in."""
    url = f"sqlite:///{(tmp_path / 'shared.db').as_posix()}"
    script = (
        "import sys\n"
        "from pydantic import SecretStr\n"
        "from settings import Settings\n"
        "from webapp.admin_gate import check_password\n"
        "from webapp.admin_view import _throttle\n"
        "s = Settings(environment='production', admin_password=SecretStr(sys.argv[2]),\n"
        "             hash_salt=SecretStr('a-long-hashing-salt-2'))\n"
        "for keys in [('session:s1', 'address:a1')] * 3 + [('session:s2', 'address:a2')]:\n"
        "    assert check_password(s, 'wrong', throttle=_throttle(sys.argv[1]), keys=keys).reason\n"
    )
    done = subprocess.run([sys.executable, "-c", script, url, PASSWORD], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    here = admin_view._throttle(url)
    refused = check_password(_strong(), PASSWORD, throttle=here, keys=("session:s1", "address:a1"))
    assert not refused.allowed and "Try again in" in refused.reason, "the other process's failures count"
    budget = _strong(admin_failures_per_hour=4)
    spent = check_password(budget, PASSWORD, throttle=here, keys=("session:new", "address:new"))
    assert not spent.allowed and "Too many failed attempts" in spent.reason, "one budget for all processes"


def test_the_global_budget_on_the_admin_page(arena_env: Callable[..., str], mixed_catalogue: Path) -> None:
    """Two tabs guess once each (no back-off of their own); a third tab's right password waits."""
    arena_env(mixed_catalogue, admin_password=PASSWORD, admin_failures_per_hour="2")
    for _ in range(2):
        tab = open_app("pages/admin.py")
        _login(tab, "wrong")
        assert "Wrong password." in _texts(tab.error)
    third = open_app("pages/admin.py")
    _login(third, PASSWORD)
    assert any("Too many failed attempts" in e for e in _texts(third.error)), _texts(third.error)
    assert not third.toggle


# --- contestant toggles are moderation events ------------------------------------------------------------


def test_a_contestant_toggle_leaves_a_row_in_the_moderation_log(
    arena_env: Callable[..., str], caplog: pytest.LogCaptureFixture
) -> None:
    """Probe of the old page: switching a contestant off left no moderation row and no log line."""
    url = arena_env(admin_password=PASSWORD)
    at = open_app("pages/admin.py")
    _login(at, PASSWORD)
    with caplog.at_level(logging.INFO, logger="webapp.gateway_data"):
        at.toggle(key="admin_enable_tiny-llama").set_value(False).run()
    assert not at.exception, [e.value for e in at.exception]
    engine = create_engine(url)
    assert not db_actions.get_contestant(engine, slug="tiny-llama").enabled
    session = str(at.session_state["admin_session"])
    (event,) = db_actions.moderation_log(engine)
    assert (event.action, event.contestant, event.battle_id, event.admin_session) == \
        ("disable", "tiny-llama", None, session)
    assert any("tiny-llama" in r.getMessage() and session in r.getMessage() for r in caplog.records)
    at.toggle(key="admin_enable_tiny-llama").set_value(True).run()
    log = _frame(at, "contestant")
    assert list(log["action"]) == ["enable", "disable"] and set(log["contestant"]) == {"tiny-llama"}
    assert set(log["admin session"]) == {session}
