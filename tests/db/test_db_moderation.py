"""Moderation: flags restore what they took, every flag and unflag is logged, the admin's battle list.

Probe of the old code: flagging an open battle and unflagging it left it ``abandoned`` for good; a
second flag overwrote the first reason; nothing recorded who flagged, when, or why.
"""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from db import actions, boards
from db.errors import InvalidInput


def test_unflag_restores_the_prior_status_and_every_action_is_logged(arena, engine: Engine) -> None:
    live = arena.battle()
    voted = arena.battle()
    actions.record_vote(engine, battle_id=voted.id, choice="a")
    actions.flag_battle(engine, battle_id=live.id, reason="spam", admin_session="s1")
    with pytest.raises(InvalidInput):
        actions.flag_battle(engine, battle_id=live.id, reason="other reason", admin_session="s2")
    assert actions.get_battle(engine, battle_id=live.id).flag_reason == "spam", "the first reason is kept"
    restored = actions.unflag_battle(engine, battle_id=live.id, reason="mistake", admin_session="s2")
    assert restored.status == "open"
    actions.append_message(engine, battle_id=live.id, side="a", kind="request", content="still usable")
    actions.flag_battle(engine, battle_id=voted.id, reason="abuse", admin_session="s1")
    assert actions.unflag_battle(engine, battle_id=voted.id, admin_session="s1").status == "voted"
    assert boards.pairwise_counts(engine).total == 1, "the vote counts again"
    log = actions.moderation_log(engine)
    assert [(e.battle_id, e.action, e.reason, e.admin_session, e.prior_status) for e in log] == [
        (voted.id, "unflag", "", "s1", "flagged"),
        (voted.id, "flag", "abuse", "s1", "voted"),
        (live.id, "unflag", "mistake", "s2", "flagged"),
        (live.id, "flag", "spam", "s1", "open"),
    ]
    assert log[0].created_at >= log[-1].created_at


def test_recent_battles_list_ids_models_and_first_request(arena, engine: Engine) -> None:
    first = actions.open_battle(engine, mode="anonymous", scenario="calendar", contestant_a="m1",
                                contestant_b="m2", first_request="Add lunch with Ana")
    single = arena.battle("m3", None, mode="direct")
    listed = actions.recent_battles(engine, limit=10)
    assert [b.id for b in listed] == [single.id, first.id]
    by_id = {b.id: b for b in listed}
    assert by_id[first.id].first_request == "Add lunch with Ana" and by_id[first.id].messages == 2
    assert (by_id[first.id].contestant_a, by_id[first.id].contestant_b) == ("m1", "m2")
    assert by_id[single.id].contestant_b is None and by_id[single.id].first_request == "hi"
    assert len(actions.recent_battles(engine, limit=1)) == 1


def test_contestant_toggles_are_logged_and_a_no_op_writes_nothing(arena, engine: Engine) -> None:
    """Probe of the old code: enabling or disabling a contestant left no moderation row."""
    battle = arena.battle()
    actions.flag_battle(engine, battle_id=battle.id, reason="spam", admin_session="s0")
    off = actions.set_contestant_enabled(engine, slug="m2", enabled=False, reason="names itself",
                                         admin_session="s1")
    assert not off.enabled
    actions.set_contestant_enabled(engine, slug="m2", enabled=False, reason="again", admin_session="s2")
    actions.set_contestant_enabled(engine, slug="m1", enabled=True, reason="already on", admin_session="s2")
    with pytest.raises(InvalidInput):
        actions.set_contestant_enabled(engine, slug="m2", enabled=True, reason="x" * 2_001,
                                       admin_session="s3")
    assert not actions.get_contestant(engine, slug="m2").enabled, "a refused toggle changes nothing"
    assert actions.set_contestant_enabled(engine, slug="m2", enabled=True, admin_session="s3").enabled
    log = actions.moderation_log(engine)
    rows = [(e.action, e.contestant, e.battle_id, e.reason, e.admin_session, e.prior_status) for e in log]
    assert rows == [
        ("enable", "m2", None, "", "s3", None),
        ("disable", "m2", None, "names itself", "s1", None),
        ("flag", None, battle.id, "spam", "s0", "open"),
    ]
    assert log[0].created_at >= log[1].created_at >= log[2].created_at
