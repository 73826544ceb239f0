"""What the web app counts against a model's circuit breaker (``webapp.breaker``), on a real SQLite
database: a failed reply counts, a visitor's cancel and a full line do not, and ``ARENA_BREAKER_FAILURES=0``
turns the breaker off."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from sqlalchemy import Engine

from db import actions as db_actions
from inference.protocol import GenerationResult
from settings import Settings
from webapp import breaker
from wiring import database

FAILED = GenerationResult(text="", finish_reason="error", prompt_tokens=0, new_tokens=0, ttft_ms=None,
                          total_ms=1.0, error="HTTP 500 from server: on fire")
CANCELLED = GenerationResult(text="he", finish_reason="cancelled", prompt_tokens=0, new_tokens=1,
                             ttft_ms=1.0, total_ms=2.0)


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    eng = database(f"sqlite:///{tmp_path / 'arena.db'}")
    db_actions.upsert_contestant(eng, slug="m1", display_name="M1", family="test")
    return eng


def _settings(failures: int) -> Settings:
    return Settings(environment="test", breaker_failures=failures)


def test_a_cancel_and_a_full_line_do_not_count_a_failure_does(engine: Engine) -> None:
    one = _settings(1)
    breaker.record(one, engine, slug="m1", result=CANCELLED, busy=False)
    breaker.record(one, engine, slug="m1", result=FAILED, busy=True)  # ModelBusyError: the line was full
    assert breaker.resting(one, engine) == frozenset()
    breaker.record(one, engine, slug="m1", result=FAILED, busy=False)
    assert breaker.resting(one, engine) == {"m1"}


def test_no_breaker_when_the_threshold_is_zero(engine: Engine) -> None:
    off = _settings(0)
    for _ in range(5):
        breaker.record(off, engine, slug="m1", result=FAILED, busy=False)
    assert breaker.resting(off, engine) == frozenset()
    assert breaker.resting(_settings(1), engine) == frozenset(), "nothing was written either"


def test_a_breaker_write_that_fails_is_logged_not_raised(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """Both run with a turn's generations already in the ledger: an exception there would leave them."""
    with caplog.at_level(logging.ERROR, logger="webapp.breaker"):
        breaker.record(_settings(1), engine, slug="not-a-contestant", result=FAILED, busy=False)
        breaker.claim_trials(_settings(1), engine, ["m1", "x" * 500])  # a slug the database refuses
    assert [r.getMessage() for r in caplog.records] == [
        "circuit breaker of not-a-contestant: the reply was not counted",
        f"circuit breakers of m1, {'x' * 500}: the trial was not claimed",
    ]
