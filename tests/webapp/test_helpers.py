"""Identity guard and admin gate."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from pydantic import SecretStr
from sqlalchemy import Engine, select

from db.engine import make_engine, write_session
from db.models import AdminLoginFailure, Base
from settings import DEV_ADMIN_PASSWORD, Settings
from webapp.admin_gate import (
    FREE_FAILURES,
    DatabaseLoginThrottle,
    admin_available,
    check_password,
    serving_problem,
    wait_after,
)
from webapp.identity import identity_terms, reveals_identity


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("As Gemma, I cannot do that.", True),
        ("I am a gemma3 model by Google", True),
        ("action.add_calendar_entry('Meeting', date='2024-11-11')", False),
        ("I'm SmolLM2, a small assistant", True),
        ("Dilemma solved.", False),  # 'gemma' inside another word does not count
    ],
)
def test_identity_guard(text: str, expected: bool) -> None:
    gemma = identity_terms(slug="gemma3-270m", display_name="Gemma 3 270M", family="gemma3")
    smol = identity_terms(slug="smollm2-135m", display_name="SmolLM2 135M Instruct", family="llama")
    assert reveals_identity(text, gemma | smol) is expected


def test_identity_terms_skip_generic_words() -> None:
    terms = identity_terms(slug="tiny-llama-a", display_name="Tiny Llama A", family="llama")
    assert "llama" in terms and "tiny" not in terms


STRONG_PASSWORD = "a-long-admin-password-1"
STRONG_SALT = "a-long-hashing-salt-2"


def _throttle(tmp_path: Path) -> tuple[DatabaseLoginThrottle, Engine]:
    engine = make_engine(f"sqlite:///{(tmp_path / 'logins.db').as_posix()}")
    Base.metadata.create_all(engine)
    return DatabaseLoginThrottle(engine), engine


def _check(settings: Settings, attempt: str, throttle: DatabaseLoginThrottle) -> bool:
    """One attempt with the key's earlier failures forgotten (no back-off in the way)."""
    throttle.succeeded(("session:test",))
    return check_password(settings, attempt, throttle=throttle, keys=("session:test",)).allowed


def test_admin_gate(tmp_path: Path) -> None:
    throttle, _ = _throttle(tmp_path)
    dev = Settings(environment="development")
    assert _check(dev, DEV_ADMIN_PASSWORD, throttle), "development without a network server (AppTest) may"
    assert not _check(dev, "wrong", throttle)
    prod = Settings(
        environment="production", admin_password=SecretStr(STRONG_PASSWORD), hash_salt=SecretStr(STRONG_SALT)
    )
    assert _check(prod, STRONG_PASSWORD, throttle)
    assert not _check(prod, DEV_ADMIN_PASSWORD, throttle)
    # Even if a production object carries the default (built around the validator), the page stays shut.
    forced = prod.model_copy(update={"admin_password": SecretStr(DEV_ADMIN_PASSWORD)})
    assert not admin_available(forced).allowed
    assert not _check(forced, DEV_ADMIN_PASSWORD, throttle)


@pytest.mark.parametrize(
    ("password", "salt", "problem"),
    [
        ("Changethis", STRONG_SALT, "placeholder"),
        (" CHANGE this ", STRONG_SALT, "placeholder"),
        ("a", STRONG_SALT, "shorter than 16"),
        (STRONG_PASSWORD, STRONG_PASSWORD, "equals"),
        (STRONG_PASSWORD, "Change Me", "placeholder"),
    ],
)
def test_weak_secrets_fail_closed(
    monkeypatch: pytest.MonkeyPatch, password: str, salt: str, problem: str
) -> None:
    """Probe: production accepted 'Changethis', 'a' and password == salt."""
    with pytest.raises(ValueError, match=problem):
        Settings(environment="production", admin_password=SecretStr(password), hash_salt=SecretStr(salt))
    monkeypatch.delenv("ARENA_ENVIRONMENT", raising=False)
    with pytest.raises(ValueError, match=problem):  # no ARENA_ENVIRONMENT: production, not development
        Settings(admin_password=SecretStr(password), hash_salt=SecretStr(salt))
    weak = Settings(environment="development", admin_password=SecretStr(password), hash_salt=SecretStr(salt))
    assert serving_problem(weak, local=True) is None, "development on loopback may use them"
    assert problem in (serving_problem(weak, local=False) or ""), "development on a network may not"


def test_login_backs_off_per_key_after_failures(tmp_path: Path) -> None:
    """Probe: 60 wrong passwords, then the right one was accepted at once, with no delay or log."""
    throttle, engine = _throttle(tmp_path)
    prod = Settings(
        environment="production", admin_password=SecretStr(STRONG_PASSWORD), hash_salt=SecretStr(STRONG_SALT)
    )
    session, address = ("session:s1",), ("session:s2", "address:abc")
    for _ in range(FREE_FAILURES + 1):
        both = ("session:s1", "address:abc")
        assert not check_password(prod, "wrong", throttle=throttle, keys=both).allowed
    refused = check_password(prod, STRONG_PASSWORD, throttle=throttle, keys=session)
    assert not refused.allowed and "Try again in 2 seconds" in refused.reason
    assert not check_password(prod, STRONG_PASSWORD, throttle=throttle, keys=address).allowed, (
        "a new session from the same address waits too"
    )
    assert check_password(prod, STRONG_PASSWORD, throttle=throttle, keys=("session:other",)).allowed
    with write_session(engine) as db:  # 2.5 s later
        for row in db.scalars(select(AdminLoginFailure)):
            row.failed_at -= dt.timedelta(seconds=2.5)
    assert check_password(prod, STRONG_PASSWORD, throttle=throttle, keys=session).allowed
    assert [wait_after(n) for n in (1, 2, 3, 4, 5, 60)] == [0, 0, 2, 4, 8, 300]
