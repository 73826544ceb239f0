"""Identity guard, HTML-looking replies and failing generations, with two models behind a scripted
OpenAI-compatible engine (the real remote client in the real pool): replies a random model never writes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sqlalchemy import create_engine

from db import repository as db_repo
from tests.webapp.conftest import open_app
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
    battle = db_repo.get_battle(engine, battle_id=at.session_state["battle_id:anonymous"])
    assert battle.revealed_before_vote
    assert battle.vote is not None and battle.vote.revealed and not battle.vote.counted
    assert db_repo.pairwise_counts(engine).total == 0, "the vote is stored but left out of the leaderboard"
    assert db_repo.pairwise_counts(engine, exclude_revealed=False).total == 1


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
    battle = db_repo.get_battle(engine, battle_id=at.session_state["battle_id:anonymous"])
    failed = [s for s in "ab" if battle.sides[s].contestant.slug == "gemma-served"][0]
    other = "b" if failed == "a" else "a"
    assert battle.sides[failed].messages[-1].error, "the failure is stored on its reply"
    assert not battle.sides[other].messages[-1].error, "the other side carried on"
    assert any("Generation failed" in e for e in _texts(at.error))
    assert at.button(key=f"anonymous:vote_{failed}").disabled, "no vote until both sides really replied"

    engine_reply("action.add_calendar_entry('Meeting with Fred', date='2024-11-11', time='17:00')")
    at.button(key=f"anonymous:retry_{failed}").click().run()
    battle = db_repo.get_battle(engine, battle_id=at.session_state["battle_id:anonymous"])
    standing = battle.sides[failed].replies
    assert len(standing) == 1 and not standing[0].error and "Meeting with Fred" in standing[0].content
    assert any(m.superseded for m in battle.sides[failed].messages), "the failed reply is kept, superseded"
    assert not at.button(key=f"anonymous:vote_{failed}").disabled
