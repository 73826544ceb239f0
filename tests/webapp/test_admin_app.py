"""Secrets fail closed and the admin page is accountable (AppTest on the real app).

Probes of the old app: with no ARENA_ENVIRONMENT the app ran in development and the Admin page opened
with the placeholder password; 60 wrong passwords were followed by an instant login with no log; a flag
could not be undone and left no record of who, when or why; flagging needed a pasted battle id.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from sqlalchemy import create_engine

from db import repository as db_repo
from settings import DEV_ADMIN_PASSWORD
from tests.webapp.conftest import open_app
from tests.webapp.test_arena_app import _texts
from tests.webapp.test_pages_app import _anonymous_battle, _submit

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
