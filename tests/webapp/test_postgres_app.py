"""The Arena on PostgreSQL: the same battle, vote and correction, written to a real server."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import create_engine

from db import actions as db_actions
from db import boards as db_boards
from tests.webapp.conftest import open_app
from tests.webapp.test_arena_app import CORRECTION, TURN_1, _send

pytestmark = pytest.mark.postgres


@pytest.fixture
def schema_url(pg_schema_url: str) -> str:
    """A throw-away schema on the test server (the shared ``pg_schema_url`` fixture)."""
    return pg_schema_url


def test_battle_on_postgres(arena_env: Callable[..., str], schema_url: str) -> None:
    arena_env(database_url=schema_url)
    at = open_app("pages/arena.py")
    _send(at, TURN_1)
    _send(at, CORRECTION, route="Model B", correction=True)
    at.button(key="anonymous:notfixed_b").click().run()
    at.button(key="anonymous:vote_both_bad").click().run()
    assert not at.exception
    engine = create_engine(schema_url)
    battle = db_actions.get_battle(engine, battle_id=at.session_state["battle_id:anonymous"])
    assert battle.vote is not None and battle.vote.choice == "both_bad"
    assert battle.sides["b"].corrections[0].outcome == "not_fixed"
    assert db_boards.pairwise_counts(engine, corrections_only=True).total == 1
    engine.dispose()
