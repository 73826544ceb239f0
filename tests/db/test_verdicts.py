"""A person's verdict (Fixed / Not fixed) is taken only on an open battle, and only from its owner
(issue 39: a stale tab stored a verdict after the vote had shown the names, and on a flagged battle)."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from db import actions
from db.errors import BattleClosed, InvalidInput


def _corrected(arena, engine: Engine, owner: int):  # noqa: ANN001, ANN202
    battle = arena.battle(visitor_id=owner)
    corr = actions.record_correction(engine, battle_id=battle.id, side="a", content="Wrong year")
    actions.append_message(engine, battle_id=battle.id, side="a", kind="reply", content="fixed now")
    return battle, corr


def _outcome(engine: Engine, battle_id: str) -> str:
    return actions.get_battle(engine, battle_id=battle_id).sides["a"].corrections[0].outcome


@pytest.mark.parametrize("close", ["vote", "abandon", "flag"])
def test_no_person_verdict_once_the_battle_is_closed(arena, engine: Engine, close: str) -> None:
    me = actions.get_or_create_visitor(engine, anon_id="me").id
    battle, corr = _corrected(arena, engine, me)
    if close == "vote":
        actions.record_vote(engine, battle_id=battle.id, choice="a", visitor_id=me)
    elif close == "abandon":
        actions.abandon_battle(engine, battle_id=battle.id, visitor_id=me)
    else:
        actions.flag_battle(engine, battle_id=battle.id, reason="abuse")
    with pytest.raises(BattleClosed):
        actions.set_correction_outcome(engine, correction_id=corr.id, outcome="fixed", judged_by="person",
                                       visitor_id=me)
    with pytest.raises(BattleClosed):  # the owner check is not what refuses it
        actions.set_correction_outcome(engine, correction_id=corr.id, outcome="fixed", judged_by="person")
    assert _outcome(engine, battle.id) == "unknown"


def test_only_the_owner_judges(arena, engine: Engine) -> None:
    me = actions.get_or_create_visitor(engine, anon_id="me").id
    stranger = actions.get_or_create_visitor(engine, anon_id="stranger").id
    battle, corr = _corrected(arena, engine, me)
    with pytest.raises(InvalidInput, match="another visitor"):
        actions.set_correction_outcome(engine, correction_id=corr.id, outcome="fixed", judged_by="person",
                                       visitor_id=stranger)
    assert _outcome(engine, battle.id) == "unknown"
    actions.set_correction_outcome(engine, correction_id=corr.id, outcome="not_fixed", judged_by="person",
                                   visitor_id=me)
    assert _outcome(engine, battle.id) == "not_fixed"


def test_the_grader_may_still_label_a_closed_battle(arena, engine: Engine) -> None:
    """The grader's outcome is no visitor's action: re-grading stored battles stays possible."""
    me = actions.get_or_create_visitor(engine, anon_id="me").id
    battle, corr = _corrected(arena, engine, me)
    actions.abandon_battle(engine, battle_id=battle.id, visitor_id=me)
    actions.set_correction_outcome(engine, correction_id=corr.id, outcome="fixed", judged_by="grader")
    assert _outcome(engine, battle.id) == "fixed"
