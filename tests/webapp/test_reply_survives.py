"""A reply belongs to the battle, not to the browser tab: a tab closed mid-stream stops nothing, and the
visitor who comes back finds the reply (still streaming, then stored); the turn's slot is held until then."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from db import actions as db_actions
from tests.webapp.conftest import ScriptedEngine, open_app
from tests.webapp.test_arena_app import ARENA, TURN_1, _battle, _texts, play_the_study

LONG = ('action.add_calendar_entry("Meeting with Fred", date="2024-11-11", time="17:00", duration=30) '
        "and that is all I have to say about this meeting for now")


def test_a_tab_closed_mid_stream_finds_the_replies_on_its_return(
    arena_env: Callable[..., str], mixed_catalogue: Path, engine_server: ScriptedEngine
) -> None:
    with engine_server.scripted({"gemma": LONG, "plain": LONG}, word_delay_s=0.15):  # about 3 s a reply
        url = arena_env(mixed_catalogue)
        first = open_app(ARENA)
        play_the_study(first)
        first.chat_input(key="anonymous:input").set_value(TURN_1)
        with pytest.raises(RuntimeError, match="timed out"):
            first.run(timeout=1.0)  # the tab is closed while both sides stream
        engine = create_engine(url)
        visitor = first.session_state["visitor_id"]
        view = db_actions.get_or_create_visitor(engine, anon_id=visitor)
        assert db_actions.generations_in_flight(engine, visitor_id=view.id) == 2, "still generating"

        back = open_app(ARENA, visitor=visitor)  # follows the replies still streaming, then shows them
        battle = _battle(url, back)
        for side in "ab":
            (reply,) = battle.sides[side].replies
            assert reply.content == LONG and reply.finish_reason == "stop", reply
            assert reply.grader_label is not None, "stored and graded like any reply"
        assert _texts(back.code).count(LONG) == 2, "the page shows both replies"
        assert db_actions.generations_in_flight(engine, visitor_id=view.id) == 0, "the slot is free again"
