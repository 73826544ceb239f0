"""Replay in the database, on SQLite and PostgreSQL: which corrections become items (the export's
``replay`` view: closed, unflagged, human battles only, the publication cut-off applied), one stored
answer per correction and model whichever process sends it, and the board's counts."""

from __future__ import annotations

import datetime as dt
import json
import threading
from typing import Any

import pytest
from sqlalchemy import Engine

from db import InvalidInput, NotFound, VoteFilters, actions
from db.boards import ReplayCounts, fix_counts_by_kind, replay_counts, replay_pair_counts
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


def test_two_answers_to_one_correction_make_a_pairwise_outcome(arena: Any, engine: Engine) -> None:
    arena.contestants("m3")
    first, second = _corrected(arena), _corrected(arena)
    answers = {(first, "m1"): "fixed", (first, "m2"): "not_fixed", (first, "m3"): "fixed",
               (second, "m1"): "regression", (second, "m2"): "fixed"}
    for (correction, model), outcome in answers.items():
        assert actions.record_replay_result(engine, correction_id=correction, contestant=model,
                                            outcome=outcome, content="call()")
    counts = replay_pair_counts(engine)
    m1, m2, m3 = (counts.models.index(m) for m in ("m1", "m2", "m3"))
    assert counts.wins[m1, m2] == 1 and counts.wins[m2, m1] == 1, "each fixed one the other did not"
    assert counts.wins[m3, m2] == 1 and counts.ties[m1, m3] == counts.ties[m3, m1] == 1
    assert counts.total == 4 and int(counts.both_bad.sum()) == 0
    assert replay_pair_counts(engine, scenario="smart-home").total == 0


def test_the_replay_pairs_view_has_one_row_per_pair_of_answers(arena: Any, engine: Engine) -> None:
    from db.export import export_bytes

    arena.contestants("m3")
    correction = _corrected(arena)
    for model, outcome in (("m1", "not_fixed"), ("m2", "fixed"), ("m3", "regression")):
        actions.record_replay_result(engine, correction_id=correction, contestant=model, outcome=outcome,
                                     content="call()")
    blob = export_bytes(engine, fmt="jsonl", salt="s", view="replay_pairs")
    rows = [json.loads(line) for line in blob.data.decode().splitlines()]
    got = {(r["model_a"], r["model_b"]): r["winner"] for r in rows}
    assert got == {("m1", "m2"): "b", ("m1", "m3"): "tie", ("m2", "m3"): "a"}
    assert {r["source"] for r in rows} == {"replay"} and {r["item"] for r in rows} == {correction}
    assert blob.counts.records == 3
    paged = export_bytes(engine, fmt="jsonl", salt="s", view="replay_pairs", chunk_size=1)
    assert paged.data == blob.data, "keyset pages of one row give the same file"


def test_fix_counts_by_kind_per_source(arena: Any, engine: Engine) -> None:
    """Each correction counts once per mistake of the reply it corrects, for the judge of each source."""
    battle = arena.battle("m1", "m2", replies=False)
    for side in ("a", "b"):
        actions.append_message(engine, battle_id=battle.id, side=side, kind="request", content="Add lunch.")
    actions.append_message(engine, battle_id=battle.id, side="a", kind="reply", content="add(2023)",
                           grader_label="partial", grader_mistakes=["wrong_year", "chatty"])
    actions.append_message(engine, battle_id=battle.id, side="b", kind="reply", content="Sure",
                           grader_label="garbage", grader_mistakes=["missing_call"])
    year = actions.record_correction(engine, battle_id=battle.id, side="a", content="It is 2024.")
    actions.append_message(engine, battle_id=battle.id, side="a", kind="reply", content="add(2024)",
                           grader_label="correct", grader_mistakes=[])
    actions.set_correction_outcome(engine, correction_id=year.id, outcome="fixed", judged_by="person")
    call = actions.record_correction(engine, battle_id=battle.id, side="b", content="Write the call.")
    actions.append_message(engine, battle_id=battle.id, side="b", kind="reply", content="Sure!",
                           grader_label="garbage", grader_mistakes=["missing_call"])
    actions.abandon_battle(engine, battle_id=battle.id)
    actions.record_replay_result(engine, correction_id=call.id, contestant="m1", outcome="fixed", content="c")

    def got(source: str) -> set[tuple[str, str, int, int]]:
        return {(k.model, k.kind, k.fixed, k.judged) for k in fix_counts_by_kind(engine, source=source)}

    assert got("people") == {("m1", "wrong_year", 1, 1), ("m1", "chatty", 1, 1)}, "m2's was not judged"
    assert got("grader") == {("m1", "wrong_year", 1, 1), ("m1", "chatty", 1, 1), ("m2", "missing_call", 0, 1),
                             ("m2", "garbage", 0, 1)}, "a reply with no call is the kind garbage"
    assert got("replay") == {("m1", "missing_call", 1, 1), ("m1", "garbage", 1, 1)}
    assert got("auto") == set()
    assert fix_counts_by_kind(engine, source="grader", scenario="smart-home") == []
    with pytest.raises(ValueError, match="unknown source"):
        fix_counts_by_kind(engine, source="votes")  # type: ignore[arg-type]
