"""Secrets fail closed and the admin page is accountable (AppTest on the real app).

Probes of the old app: with no ARENA_ENVIRONMENT the app ran in development and the Admin page opened
with the placeholder password; 60 wrong passwords were followed by an instant login with no log; a flag
could not be undone and left no record of who, when or why; flagging needed a pasted battle id.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import create_engine

from db import repository as db_repo
from settings import DEV_ADMIN_PASSWORD, Settings
from tests.webapp.conftest import open_app
from tests.webapp.test_arena_app import _texts
from tests.webapp.test_pages_app import _anonymous_battle, _submit
from webapp.admin_gate import LoginThrottle, check_password, wait_words

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
    assert db_repo.get_battle(engine, battle_id=battle_id).status == "flagged"
    at.selectbox(key="admin_flag_id").set_value(battle_id)
    at.text_input(key="admin_flag_reason").input("not spam after all")
    _submit(at, "Unflag")
    assert db_repo.get_battle(engine, battle_id=battle_id).status == "voted", "the prior status is back"
    log = _frame(at, "admin session")
    assert list(log["action"]) == ["unflag", "flag"] and list(log["reason"]) == ["not spam after all", "spam"]
    sessions = set(log["admin session"])
    assert len(sessions) == 1 and "" not in sessions, "both carry this login's session"


# --- the global failure budget, and never "0 seconds" ---------------------------------------------------


def _strong(**values: Any) -> Settings:
    return Settings(environment="production", admin_password=SecretStr(PASSWORD),
                    hash_salt=SecretStr("a-long-hashing-salt-2"), **values)


def test_many_sessions_and_addresses_together_meet_the_global_budget() -> None:
    """The probe: the back-off was per session and per address only, so an attacker with many sessions
    and addresses (two free tries each) guessed without ever waiting."""
    now = [1000.0]
    throttle = LoginThrottle(clock=lambda: now[0])
    settings = _strong(admin_failures_per_hour=5)
    for n in range(5):  # five attackers, one guess each: no key of theirs backs off
        keys = (f"session:s{n}", f"address:a{n}")
        assert check_password(settings, "wrong", throttle=throttle, keys=keys).reason == "Wrong password."
        now[0] += 1.0
    fresh = ("session:new", "address:new")
    refused = check_password(settings, PASSWORD, throttle=throttle, keys=fresh)
    assert not refused.allowed and "Too many failed attempts" in refused.reason, "everyone waits"
    now[0] = 1000.0 + 3600.0  # the oldest failure has left the hour
    assert check_password(settings, PASSWORD, throttle=throttle, keys=fresh).allowed


def test_the_wait_is_rounded_up_and_never_zero_seconds() -> None:
    """The probe: a back-off with under half a second left said "Try again in 0 seconds."."""
    start = 1000.0
    now = [start]
    throttle = LoginThrottle(clock=lambda: now[0])
    settings = _strong()
    keys = ("session:s",)
    for _ in range(3):  # two free failures, then a 2 s back-off
        check_password(settings, "wrong", throttle=throttle, keys=keys)
    reasons = []
    for step in range(40):  # every moment of the 2 s wait
        now[0] = start + step * 0.05
        reasons.append(check_password(settings, PASSWORD, throttle=throttle, keys=keys).reason)
    assert all(re.search(r"Try again in [12] seconds?\.$", r) for r in reasons), set(reasons)
    assert any(r.endswith("Try again in 1 second.") for r in reasons)
    assert not any(re.search(r"\b0 seconds", r) for r in reasons)
    words = [wait_words(s) for s in (0.0, 0.001, 1.0, 2.01)]
    assert words == ["1 second", "1 second", "1 second", "3 seconds"]


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
