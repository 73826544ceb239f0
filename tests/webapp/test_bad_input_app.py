"""Bad input on the pages: typed refusals, nothing lost, no traceback and no Markdown from an engine.

Probes of the old app: a NUL in a model reply lost the other side's finished reply too; a visitor's NUL
on PostgreSQL showed the driver's traceback (with its SQL) and left an empty battle behind; an engine's
error text was rendered as Markdown by ``st.error`` (a remote image loaded in the visitor's browser).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select
from streamlit.testing.v1 import AppTest

from db import actions as db_actions
from db.models import Battle
from inference.protocol import GenerationResult
from tests.webapp.conftest import ERROR_PREFIX, REPO, open_app
from tests.webapp.test_arena_app import TURN_1, _send, _texts

ARENA = "pages/arena.py"


def _battle(url: str, at: AppTest):  # noqa: ANN202
    return db_actions.get_battle(create_engine(url), battle_id=at.session_state["battle_id:anonymous"])


def test_a_nul_in_a_reply_becomes_a_replacement_character_and_both_replies_are_kept(
    arena_env: Callable[..., str], mixed_catalogue: Path, engine_reply: Callable[[str | None], None]
) -> None:
    engine_reply("Hello\x00there")
    url = arena_env(catalogue=mixed_catalogue)
    at = open_app(ARENA)
    _send(at, TURN_1)
    battle = _battle(url, at)
    replies = {s: battle.sides[s].replies for s in "ab"}
    assert all(len(r) == 1 for r in replies.values()), "both sides' replies are stored"
    contents = sorted(r[0].content for r in replies.values())
    assert contents == ["Hello there.", "Hello\ufffdthere"]
    assert not at.error


def test_an_unstorable_reply_is_reported_on_its_side_without_raising(
    arena_env: Callable[..., str], mixed_catalogue: Path
) -> None:
    """The storage step itself refuses (the battle was closed meanwhile): a sentence, not an exception."""
    from webapp import context
    from webapp.flows import open_battle, send_turn

    url = arena_env(catalogue=mixed_catalogue)
    at = open_app(ARENA)
    _send(at, TURN_1)
    at.button(key="anonymous:vote_tie").click().run()
    ctx = context.reader()
    battle = open_battle.load_battle(ctx, battle_id=at.session_state["battle_id:anonymous"])
    result = GenerationResult(
        text="late", finish_reason="stop", prompt_tokens=1, new_tokens=1, ttft_ms=1.0, total_ms=2.0
    )
    problem = send_turn.add_reply(ctx, battle=battle, side="a", result=result, retry=False)
    assert problem is not None and "could not be stored" in problem
    assert len(_battle(url, at).sides["a"].replies) == 1


def test_engine_error_text_never_reaches_the_page(
    arena_env: Callable[..., str], mixed_catalogue: Path, engine_reply: Callable[[str | None], None]
) -> None:
    payload = "![x](http://127.0.0.1:9/pixel.png) **loud**"
    engine_reply(ERROR_PREFIX + payload)
    arena_env(catalogue=mixed_catalogue)
    at = open_app(ARENA)
    _send(at, TURN_1)
    assert any("could not reply" in e for e in _texts(at.error))
    shown = _texts(at.error) + _texts(at.markdown) + _texts(at.text)
    assert not any("![x]" in t or "http://" in t or "loud" in t for t in shown), "the engine's words stay off"
    assert any(t.startswith("refused (error ") for t in _texts(at.text)), "a category and an id instead"


@pytest.mark.postgres
def test_a_visitor_nul_on_postgres_is_refused_in_words_and_leaves_no_battle(
    arena_env: Callable[..., str], mixed_catalogue: Path, pg_schema_url: str
) -> None:
    arena_env(catalogue=mixed_catalogue, database_url=pg_schema_url)
    at = open_app(ARENA)
    _send(at, "hello\x00world")
    assert any("not recorded" in e for e in _texts(at.error))
    engine = create_engine(pg_schema_url)
    with engine.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(Battle)) == 0, "no empty battle is committed"
    engine.dispose()


def test_visitors_never_see_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """The project's Streamlit config (read from the repository root) hides uncaught exceptions' details."""
    monkeypatch.chdir(REPO)
    from streamlit import config

    config.get_config_options(force_reparse=True)
    try:
        at = AppTest.from_string("raise RuntimeError('SELECT secret FROM visitors')").run()
    finally:
        config.get_config_options(force_reparse=True)
    assert config.get_option("client.showErrorDetails") == "none"
    shown = [(e.message, list(e.stack_trace)) for e in at.exception]
    assert shown and all("SELECT" not in message and not trace for message, trace in shown), shown
