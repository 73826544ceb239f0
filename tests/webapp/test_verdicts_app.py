"""A stale tab's *Fixed ✓* after the vote (names already shown in the other tab) is refused in words and
stores nothing (issue 39)."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import create_engine

from db import actions as db_actions
from tests.webapp.conftest import open_app
from tests.webapp.test_arena_app import CORRECTION, TURN_1, _send, _texts

ARENA = "pages/arena.py"


def test_a_stale_tab_cannot_judge_after_the_vote(arena_env: Callable[..., str]) -> None:
    url = arena_env()
    visitor = "0" * 31 + "7"
    tab = open_app(ARENA, visitor=visitor)
    _send(tab, TURN_1)
    _send(tab, CORRECTION, route="Model A", correction=True)
    stale = open_app(ARENA, visitor=visitor)  # the same visitor's second tab resumes the battle
    assert stale.button(key="anonymous:fixed_a")
    tab.button(key="anonymous:vote_a").click().run()
    assert "Thanks! Your vote is recorded." in _texts(tab.success)

    stale.button(key="anonymous:fixed_a").click().run()
    assert any("closed" in e for e in _texts(stale.error)), _texts(stale.error)
    assert not any("Recorded" in s for s in _texts(stale.success))
    battle_id = tab.session_state["battle_id:anonymous"]
    battle = db_actions.get_battle(create_engine(url), battle_id=battle_id)
    assert battle.sides["a"].corrections[0].outcome == "unknown"
