"""Leaderboard counts from SQL GROUP BY, checked against an independent count of what was recorded."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter

import numpy as np
import pytest
from sqlalchemy import Engine, update

from db import actions, boards
from db.errors import BattleClosed, InvalidInput
from db.models import Vote, utcnow

MODELS = ("m1", "m2", "m3")


def _expected(records: list[tuple[str, str, str]], models: tuple[str, ...]) -> tuple[np.ndarray, ...]:
    """Dense arrays built the slow, obvious way from (model_a, model_b, choice) records."""
    idx = {m: i for i, m in enumerate(models)}
    n = len(models)
    wins, ties, bad = (np.zeros((n, n), dtype=np.int64) for _ in range(3))
    for a, b, choice in records:
        i, j = idx[a], idx[b]
        if choice == "a":
            wins[i, j] += 1
        elif choice == "b":
            wins[j, i] += 1
        else:
            target = ties if choice == "tie" else bad
            target[i, j] += 1
            target[j, i] += 1
    return wins, ties, bad


def test_pairwise_counts_match_an_independent_count(arena, engine: Engine) -> None:
    rng = random.Random(5)
    records = []
    for _ in range(24):
        a, b = rng.sample(MODELS, 2)
        choice = rng.choice(["a", "b", "tie", "both_bad"])
        battle = arena.battle(a, b)
        actions.record_vote(engine, battle_id=battle.id, choice=choice)
        records.append((a, b, choice))
    counts = boards.pairwise_counts(engine)
    assert counts.models == MODELS
    wins, ties, bad = _expected(records, MODELS)
    np.testing.assert_array_equal(counts.wins, wins)
    np.testing.assert_array_equal(counts.ties, ties)
    np.testing.assert_array_equal(counts.both_bad, bad)
    assert counts.total == 24 and counts.wins.dtype == np.int64
    assert np.array_equal(counts.ties, counts.ties.T) and not np.diag(counts.wins).any()
    # A chosen model order reorders the arrays; unknown slugs get zero rows; absent models are dropped.
    reordered = boards.pairwise_counts(engine, models=["m3", "m1", "ghost"])
    assert reordered.models == ("m3", "m1", "ghost")
    assert reordered.wins[0, 1] == wins[2, 0] and reordered.wins[1, 0] == wins[0, 2]
    assert not reordered.wins[2].any() and not reordered.wins[:, 2].any()
    with pytest.raises(ValueError):
        boards.pairwise_counts(engine, models=["m1", "m1"])


def test_pairwise_filters(arena, engine: Engine) -> None:
    def vote(a: str, b: str, choice: str, **kwargs: object) -> str:
        battle = arena.battle(a, b, **kwargs)  # type: ignore[arg-type]
        actions.record_vote(engine, battle_id=battle.id, choice=choice)
        return battle.id

    vote("m1", "m2", "a")  # anonymous calendar
    vote("m1", "m2", "b", scenario="free")  # other scenario
    vote("m2", "m3", "a", mode="named")  # named: out of the default leaderboard
    corrected = arena.battle("m1", "m3")
    actions.record_correction(engine, battle_id=corrected.id, side="a", content="Time in 24h format")
    actions.record_vote(engine, battle_id=corrected.id, choice="tie")
    old = vote("m3", "m1", "both_bad")
    past = utcnow() - dt.timedelta(days=3)
    with engine.begin() as conn:  # back-date one vote to test the date window
        conn.execute(update(Vote).where(Vote.battle_id == old).values(created_at=past))

    assert boards.pairwise_counts(engine).total == 4
    assert boards.pairwise_counts(engine, modes=None).total == 5
    assert boards.pairwise_counts(engine, modes=["named"]).wins[1, 2] == 1
    assert boards.pairwise_counts(engine, scenario="free").wins[1, 0] == 1
    assert boards.pairwise_counts(engine, scenario="calendar").total == 3
    only_corrected = boards.pairwise_counts(engine, corrections_only=True)
    assert only_corrected.total == 1 and only_corrected.ties[0, 2] == 1
    recent = boards.pairwise_counts(engine, since=utcnow() - dt.timedelta(days=1))
    assert recent.total == 3 and recent.both_bad.sum() == 0
    older = boards.pairwise_counts(engine, until=utcnow() - dt.timedelta(days=1))
    assert older.total == 1 and older.both_bad[0, 2] == older.both_bad[2, 0] == 1
    with pytest.raises(InvalidInput):
        boards.pairwise_counts(engine, since=dt.datetime(2026, 1, 1))
    with pytest.raises(InvalidInput):
        boards.pairwise_counts(engine, modes=["ranked"])


def test_corrections_only_is_fixed_at_vote_time(arena, engine: Engine) -> None:
    battle = arena.battle()
    actions.record_vote(engine, battle_id=battle.id, choice="a")
    assert boards.pairwise_counts(engine, corrections_only=True).total == 0
    with pytest.raises(BattleClosed):  # no correction can arrive later and change the vote's class
        actions.record_correction(engine, battle_id=battle.id, side="a", content="too late")


def test_fix_counts(arena, engine: Engine) -> None:
    outcomes = [("m1", "a", "fixed"), ("m1", "a", "not_fixed"), ("m2", "b", "fixed"), ("m1", "a", "unknown")]
    for model_outcome in outcomes:
        _, side, outcome = model_outcome
        battle = arena.battle("m1", "m2")
        corr = actions.record_correction(engine, battle_id=battle.id, side=side, content="Wrong next day")
        actions.append_message(engine, battle_id=battle.id, side=side, kind="reply", content="again")
        actions.set_correction_outcome(engine, correction_id=corr.id, outcome=outcome, judged_by="person")
    flagged = arena.battle("m3", "m1")
    corr = actions.record_correction(engine, battle_id=flagged.id, side="a", content="x")
    actions.append_message(engine, battle_id=flagged.id, side="a", kind="reply", content="y")
    actions.set_correction_outcome(engine, correction_id=corr.id, outcome="fixed", judged_by="grader")
    assert arena.close_all() == 5  # skipped: a battle counts once closed
    actions.flag_battle(engine, battle_id=flagged.id, reason="test")

    fixes = boards.fix_counts(engine)
    assert fixes.models == MODELS
    assert fixes.successes.tolist() == [1, 1, 0] and fixes.trials.tolist() == [2, 1, 0]
    assert boards.fix_counts(engine, exclude_flagged=False).successes.tolist() == [1, 1, 1]
    assert boards.fix_counts(engine, scenario="other").trials.sum() == 0


def test_first_try_counts(arena, engine: Engine) -> None:
    labels = {"m1": ["correct", "garbage"], "m2": ["correct", "correct"], "m3": []}
    for a_label, b_label in zip(labels["m1"], labels["m2"], strict=True):
        battle = arena.battle("m1", "m2", replies=False)
        for side, label in (("a", a_label), ("b", b_label)):
            actions.append_message(engine, battle_id=battle.id, side=side, kind="request", content="q")
            actions.append_message(engine, battle_id=battle.id, side=side, kind="reply", content="r",
                                   grader_label=label)
            # later replies are not first tries, whatever their label
            actions.append_message(engine, battle_id=battle.id, side=side, kind="reply", content="r2",
                                   grader_label="correct")
    unlabelled = arena.battle("m3", "m1")  # replies without grader labels do not count as graded
    assert unlabelled.sides["a"].replies[0].first_try
    assert arena.close_all() == 3
    counts = boards.first_try_counts(engine)
    assert counts.successes.tolist() == [1, 2, 0] and counts.trials.tolist() == [2, 2, 0]
    auto = boards.first_try_counts(engine, modes=["auto"])
    assert auto.trials.sum() == 0
    tally = Counter({m: len(v) for m, v in labels.items()})
    assert counts.trials.tolist() == [tally[m] for m in MODELS]
