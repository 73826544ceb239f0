"""A person's verdict (Fixed / Not fixed) is taken only on an open battle, and only from its owner
(issue 39: a stale tab stored a verdict after the vote had shown the names, and on a flagged battle)."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from db import repository as repo
from db.errors import BattleClosed, InvalidInput


def _corrected(arena, engine: Engine, owner: int):  # noqa: ANN001, ANN202
    battle = arena.battle(visitor_id=owner)
    corr = repo.record_correction(engine, battle_id=battle.id, side="a", content="Wrong year")
    repo.append_message(engine, battle_id=battle.id, side="a", kind="reply", content="fixed now")
    return battle, corr


def _outcome(engine: Engine, battle_id: str) -> str:
    return repo.get_battle(engine, battle_id=battle_id).sides["a"].corrections[0].outcome


@pytest.mark.parametrize("close", ["vote", "abandon", "flag"])
def test_no_person_verdict_once_the_battle_is_closed(arena, engine: Engine, close: str) -> None:
    me = repo.get_or_create_visitor(engine, anon_id="me").id
    battle, corr = _corrected(arena, engine, me)
    if close == "vote":
        repo.record_vote(engine, battle_id=battle.id, choice="a", visitor_id=me)
    elif close == "abandon":
        repo.abandon_battle(engine, battle_id=battle.id, visitor_id=me)
    else:
        repo.flag_battle(engine, battle_id=battle.id, reason="abuse")
    with pytest.raises(BattleClosed):
        repo.set_correction_outcome(engine, correction_id=corr.id, outcome="fixed", judged_by="person",
                                    visitor_id=me)
    with pytest.raises(BattleClosed):  # the owner check is not what refuses it
        repo.set_correction_outcome(engine, correction_id=corr.id, outcome="fixed", judged_by="person")
    assert _outcome(engine, battle.id) == "unknown"


def test_only_the_owner_judges(arena, engine: Engine) -> None:
    me = repo.get_or_create_visitor(engine, anon_id="me").id
    stranger = repo.get_or_create_visitor(engine, anon_id="stranger").id
    battle, corr = _corrected(arena, engine, me)
    with pytest.raises(InvalidInput, match="another visitor"):
        repo.set_correction_outcome(engine, correction_id=corr.id, outcome="fixed", judged_by="person",
                                    visitor_id=stranger)
    assert _outcome(engine, battle.id) == "unknown"
    repo.set_correction_outcome(engine, correction_id=corr.id, outcome="not_fixed", judged_by="person",
                                visitor_id=me)
    assert _outcome(engine, battle.id) == "not_fixed"


def test_the_grader_may_still_label_a_closed_battle(arena, engine: Engine) -> None:
    """The grader's outcome is no visitor's action: re-grading stored battles stays possible."""
    me = repo.get_or_create_visitor(engine, anon_id="me").id
    battle, corr = _corrected(arena, engine, me)
    repo.abandon_battle(engine, battle_id=battle.id, visitor_id=me)
    repo.set_correction_outcome(engine, correction_id=corr.id, outcome="fixed", judged_by="grader")
    assert _outcome(engine, battle.id) == "fixed"
