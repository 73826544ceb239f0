"""Identity guard, HTML-looking replies and failing generations, with two models behind a scripted
OpenAI-compatible engine (the real remote client in the real pool): replies a random model never writes."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from db import actions as db_actions
from db import boards as db_boards
from tests.webapp.conftest import ERROR_PREFIX, open_app
from tests.webapp.test_arena_app import TURN_1, _send, _texts

ARENA = "pages/arena.py"


def test_a_model_naming_itself_makes_the_vote_uncounted(
    arena_env: Callable[..., str], mixed_catalogue: Path, engine_reply: Callable[[str | None], None]
) -> None:
    engine_reply("As Gemma, I would write action.add_calendar_entry('Meeting with Fred')")
    url = arena_env(catalogue=mixed_catalogue)
    at = open_app(ARENA)
    _send(at, TURN_1)
    assert any("no longer anonymous" in w for w in _texts(at.warning)), "the visitor is told why"
    at.button(key="anonymous:vote_a").click().run()
    assert any("not counted" in w for w in _texts(at.warning))
    engine = create_engine(url)
    battle = db_actions.get_battle(engine, battle_id=at.session_state["battle_id:anonymous"])
    assert battle.revealed_before_vote
    assert battle.vote is not None and battle.vote.revealed and not battle.vote.counted
    assert db_boards.pairwise_counts(engine).total == 0, "the vote is stored but left out of the leaderboard"
    assert db_boards.pairwise_counts(engine, exclude_revealed=False).total == 1


def test_reply_that_looks_like_html_is_shown_as_text(
    arena_env: Callable[..., str], mixed_catalogue: Path, engine_reply: Callable[[str | None], None]
) -> None:
    engine_reply("<script>alert('x')</script> <b>bold</b>")
    arena_env(catalogue=mixed_catalogue)
    at = open_app(ARENA)
    _send(at, "hello")
    assert any("<script>alert('x')</script>" in c for c in _texts(at.code)), "verbatim, in a code block"
    assert not any("<script>" in m for m in _texts(at.markdown)), "never as Markdown/HTML"


def test_a_failed_generation_errors_on_its_side_only_and_retry_works(
    arena_env: Callable[..., str], mixed_catalogue: Path, engine_reply: Callable[[str | None], None]
) -> None:
    engine_reply(None)  # the engine answers HTTP 500
    url = arena_env(catalogue=mixed_catalogue)
    at = open_app(ARENA)
    _send(at, TURN_1)
    engine = create_engine(url)
    battle = db_actions.get_battle(engine, battle_id=at.session_state["battle_id:anonymous"])
    failed = [s for s in "ab" if battle.sides[s].contestant.slug == "gemma-served"][0]
    other = "b" if failed == "a" else "a"
    assert battle.sides[failed].messages[-1].error, "the failure is stored on its reply"
    assert not battle.sides[other].messages[-1].error, "the other side carried on"
    assert any("could not reply" in e for e in _texts(at.error))
    assert at.button(key=f"anonymous:vote_{failed}").disabled, "no vote until both sides really replied"

    engine_reply("action.add_calendar_entry('Meeting with Fred', date='2024-11-11', time='17:00')")
    at.button(key=f"anonymous:retry_{failed}").click().run()
    battle = db_actions.get_battle(engine, battle_id=at.session_state["battle_id:anonymous"])
    standing = battle.sides[failed].replies
    assert len(standing) == 1 and not standing[0].error and "Meeting with Fred" in standing[0].content
    assert any(m.superseded for m in battle.sides[failed].messages), "the failed reply is kept, superseded"
    assert not at.button(key=f"anonymous:vote_{failed}").disabled


SECRETS = ("gemma", "api.secret.example", "org-abc123")


def _shown(at) -> str:  # noqa: ANN001
    """Everything the page shows as text."""
    kinds = (at.error, at.warning, at.text, at.code, at.markdown, at.caption, at.info, at.success)
    return " ".join(text.lower() for kind in kinds for text in _texts(kind))


def test_an_engine_error_reveals_nothing_and_counts_as_naming_the_model(
    arena_env: Callable[..., str], mixed_catalogue: Path, engine_reply: Callable[[str | None], None],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The probe: a remote engine's error text (the model's name, its endpoint, an org id) reached the
    visitor word for word, the battle stayed anonymous and the text was stored. Now the visitor reads a
    generic message with an error id, the detail goes to the server log under that id, the battle is
    marked revealed (the text named the model) and only the category is stored."""
    engine_reply(ERROR_PREFIX + "model Gemma-2-9B at https://api.secret.example/v1 for org-abc123 is down")
    url = arena_env(catalogue=mixed_catalogue)
    at = open_app(ARENA, visitor="0" * 31 + "9")
    with caplog.at_level(logging.WARNING, logger="webapp.flows.send_turn"):
        _send(at, TURN_1)
    shown = _shown(at)
    assert not [word for word in SECRETS if word in shown], shown
    (error_id,) = set(re.findall(r"error ([0-9a-f]{8})", shown))
    assert any(error_id in r.getMessage() and "org-abc123" in r.getMessage() for r in caplog.records)
    engine = create_engine(url)
    battle = db_actions.get_battle(engine, battle_id=at.session_state["battle_id:anonymous"])
    failed = [s for s in "ab" if battle.sides[s].contestant.slug == "gemma-served"][0]
    stored = battle.sides[failed].messages[-1].error or ""
    assert error_id in stored and not [word for word in SECRETS if word in stored.lower()], stored
    assert battle.revealed_before_vote, "the error named the model: the vote must not count"
    reloaded = open_app(ARENA, visitor="0" * 31 + "9")  # the stored error, drawn again after a reload
    assert not [word for word in SECRETS if word in _shown(reloaded)]
