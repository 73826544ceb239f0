"""No dead ends: a chat can start over, a battle can be skipped, the turn limit says what to do, and
idle battles expire on a timer.

Probes of the old app: Chat had no "New chat" and after 20 turns asked for a vote chat mode cannot
take; the Arena could not skip a battle; open battles never expired (``abandon_stale_battles`` was
never called).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

from sqlalchemy import create_engine, update

from db import actions as db_actions
from db import boards as db_boards
from db.models import Battle
from tests.webapp.conftest import open_app
from tests.webapp.test_arena_app import TURN_1, _send, _texts
from tests.webapp.test_pages_app import _send as _send_to


def test_chat_has_new_chat_and_its_turn_limit_asks_for_no_vote(arena_env: Callable[..., str]) -> None:
    url = arena_env(max_turns_per_battle="1")
    at = open_app("pages/chat.py")
    _send_to(at, "direct", TURN_1)
    first = at.session_state["battle_id:direct"]
    _send_to(at, "direct", "one more")
    limit = [e for e in _texts(at.error) if "limit of 1 turns" in e]
    assert limit and "New chat" in limit[0] and "Vote" not in limit[0]
    at.button(key="direct:skip").click().run()
    assert "battle_id:direct" not in at.session_state
    _send_to(at, "direct", TURN_1)
    assert at.session_state["battle_id:direct"] != first
    engine = create_engine(url)
    old = db_actions.get_battle(engine, battle_id=first)
    assert old.status == "abandoned" and old.vote is None and old.sides["a"].messages, "kept, closed"


def test_skip_this_battle_is_abandoned_never_a_vote(arena_env: Callable[..., str]) -> None:
    url = arena_env()
    at = open_app("pages/arena.py")
    _send(at, TURN_1)
    battle_id = at.session_state["battle_id:anonymous"]
    assert at.button(key="anonymous:skip").label == "Skip this battle"
    at.button(key="anonymous:skip").click().run()
    assert any("recorded as abandoned" in i for i in _texts(at.info))
    assert "battle_id:anonymous" not in at.session_state
    assert not any(b.key and "vote" in b.key for b in at.button), "a fresh battle: nothing to vote on yet"
    engine = create_engine(url)
    skipped = db_actions.get_battle(engine, battle_id=battle_id)
    assert skipped.status == "abandoned" and skipped.vote is None
    assert db_boards.pairwise_counts(engine, exclude_flagged=False, exclude_revealed=False).total == 0


def test_idle_battles_expire_on_a_timer(arena_env: Callable[..., str]) -> None:
    url = arena_env(stale_battle_minutes="5")
    at = open_app("pages/arena.py")
    _send(at, TURN_1)
    battle_id = at.session_state["battle_id:anonymous"]
    engine = create_engine(url)
    with engine.begin() as conn:  # nobody touched it for ten minutes
        conn.execute(update(Battle).where(Battle.id == battle_id).values(
            updated_at=dt.datetime.now(dt.UTC) - dt.timedelta(minutes=10)))
    from webapp import resources

    resources.stale_sweeper.clear()  # a fresh timer sweeps at once (the old one sleeps its minute)
    open_app("pages/arena.py")  # any visitor page starts the timer
    deadline = time.monotonic() + 30
    while db_actions.get_battle(engine, battle_id=battle_id).status == "open" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert db_actions.get_battle(engine, battle_id=battle_id).status == "abandoned"
