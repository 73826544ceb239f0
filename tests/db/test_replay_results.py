"""Replay in the database, on SQLite and PostgreSQL: which corrections become items (the export's
``replay`` view: closed, unflagged, human battles only, the publication cut-off applied), one stored
answer per correction and model whichever process sends it, and the board's counts."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest
from sqlalchemy import Engine

from db import InvalidInput, NotFound, VoteFilters, actions
from db.boards import ReplayCounts, replay_counts
from db.export import replay_items


def _corrected(arena: Any, a: str = "m1", b: str = "m2", *, mode: str = "anonymous",
               close: bool = True) -> int:
    """A battle whose side a is corrected once (and answers); closed by a vote unless ``close`` is off.
    Returns the correction's id."""
    battle = arena.battle(a, b if mode != "direct" else None, mode=mode)
    correction = actions.record_correction(arena.engine, battle_id=battle.id, side="a", content="Wrong year.")
    actions.append_message(arena.engine, battle_id=battle.id, side="a", kind="reply", content="fixed")
    if close:
        actions.abandon_battle(arena.engine, battle_id=battle.id)
    return correction.id


def test_items_come_only_from_battles_that_count(arena: Any, engine: Engine) -> None:
    kept = _corrected(arena)
    direct = _corrected(arena, mode="direct")
    flagged = _corrected(arena)
    open_one = _corrected(arena, close=False)
    auto = arena.battle("m1", None, mode="auto")
    actions.record_correction(engine, battle_id=auto.id, side="a", content="The year is 2024.")
    actions.abandon_battle(engine, battle_id=auto.id)
    battle_of = {r["id"]: r["battle_id"] for r in replay_items(engine, filters=VoteFilters(modes=None))}
    actions.flag_battle(engine, battle_id=battle_of[flagged], reason="spam")

    items = replay_items(engine, filters=VoteFilters(modes=None))
    assert sorted(r["id"] for r in items) == sorted([kept, direct]), "flagged, open and auto left out"
    assert open_one not in battle_of
    (item,) = [r for r in items if r["id"] == kept]
    assert [m["kind"] for m in item["history"]] == ["request", "reply", "correction"]
    assert item["faulty_reply"] == "ok" and item["correction"] == "Wrong year." and item["model"] == "m1"
    assert item["person_verdict"] is None and item["grader_fixed"] is None and item["dialogue"] is None
    later = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)
    assert len(replay_items(engine, filters=VoteFilters(modes=None, closed_before=later))) == 2
    long_ago = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
    assert replay_items(engine, filters=VoteFilters(modes=None, closed_before=long_ago)) == []


def test_one_answer_per_correction_and_model_even_from_racing_writers(arena: Any, engine: Engine) -> None:
    correction = _corrected(arena)
    arena.contestants("m3")
    results: list[bool] = []
    barrier = threading.Barrier(4)

    def answer() -> None:
        barrier.wait()
        results.append(actions.record_replay_result(
            engine, correction_id=correction, contestant="m3", outcome="fixed", content="call()",
            grader_label="correct"))

    threads = [threading.Thread(target=answer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False, False, False, True]
    assert actions.replayed_corrections(engine, contestant="m3") == {correction}
    assert actions.record_replay_result(engine, correction_id=correction, contestant="m1",
                                        outcome="regression", content="x", grader_label="partial")
    assert replay_counts(engine) == [ReplayCounts(model="m1", own=True, regression=1),
                                     ReplayCounts(model="m3", own=False, fixed=1)]
    assert replay_counts(engine, scenario="shopping-list") == []


@pytest.mark.parametrize(("change", "error"), [
    ({"outcome": "solved"}, InvalidInput), ({"grader_label": "great"}, InvalidInput),
    ({"correction_id": 10_000}, NotFound), ({"contestant": "nobody"}, NotFound),
])
def test_bad_answers_are_refused_and_store_nothing(arena: Any, engine: Engine, change: dict[str, Any],
                                                   error: type[Exception]) -> None:
    correction = _corrected(arena)
    fields: dict[str, Any] = {"correction_id": correction, "contestant": "m2", "outcome": "fixed",
                              "content": "call()", "grader_label": "correct", **change}
    with pytest.raises(error):
        actions.record_replay_result(engine, **fields)
    assert replay_counts(engine) == []
