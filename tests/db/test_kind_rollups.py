"""The per-kind roll-ups (``side_kinds``, ``replay_tallies``) kept on write, on SQLite and PostgreSQL:
after a random history of writes through ``db.actions`` (replies graded and re-graded, corrections
judged and re-judged, battles flagged, unflagged and closed, replay answers), the board's per-kind
figures equal an independent count made here from the raw rows, and a full refill gives the same."""

from __future__ import annotations

import itertools
import json
import random
import threading
from collections import Counter
from typing import Any

from sqlalchemy import Engine, text

from db import actions
from db.boards import fix_counts_by_kind, replay_pair_counts
from db.boards.replay import refill_replay_tallies
from db.boards.reply_stats import refill_side_stats

MISTAKES = ("wrong_year", "wrong_time", "chatty", "wrong_function")
Key = tuple[str, str]  # (model, kind)


def _history(arena: Any, rng: random.Random) -> None:
    """Battles of every mode with graded replies and corrections, some judged, some changed later."""
    engine = arena.engine
    for n in range(14):
        mode = ("anonymous", "direct", "auto")[n % 3]
        battle = arena.battle(rng.choice(["m1", "m2"]), "m3" if mode != "direct" else None, mode=mode,
                              scenario=rng.choice(["calendar", "smart-home"]), replies=False)
        for side in battle.sides:
            actions.append_message(engine, battle_id=battle.id, side=side, kind="request", content="Add it.")
            for turn in range(rng.randint(1, 3)):
                if turn:
                    correction = actions.record_correction(engine, battle_id=battle.id, side=side,
                                                           content="No, fix it.")
                label = rng.choice(["correct", "partial", "garbage", None])
                mistakes = [] if label == "correct" else rng.sample(MISTAKES, rng.randint(0, 2))
                reply = actions.append_message(engine, battle_id=battle.id, side=side, kind="reply",
                                               content="call()", grader_label=label,
                                               grader_mistakes=mistakes if label else None)
                if turn and rng.random() < 0.7:
                    actions.set_correction_outcome(engine, correction_id=correction.id,
                                                   outcome=rng.choice(["fixed", "not_fixed"]),
                                                   judged_by=rng.choice(["person", "grader"]))
                if rng.random() < 0.3:  # the grader changes its mind later
                    actions.set_grader_label(engine, message_id=reply.id, label="partial",
                                             mistakes=["wrong_time"])
        if rng.random() < 0.85:
            actions.abandon_battle(engine, battle_id=battle.id)
        if rng.random() < 0.3:
            actions.flag_battle(engine, battle_id=battle.id, reason="spam")
            if rng.random() < 0.5:
                actions.unflag_battle(engine, battle_id=battle.id)


def _replay(engine: Engine, rng: random.Random) -> None:
    with engine.connect() as conn:
        ids = [row[0] for row in conn.execute(text("SELECT id FROM corrections ORDER BY id"))]
    for correction_id in ids:
        for model in rng.sample(["m1", "m2", "m3"], rng.randint(0, 3)):
            outcome = rng.choice(["fixed", "not_fixed", "regression"])
            actions.record_replay_result(engine, correction_id=correction_id, contestant=model,
                                         outcome=outcome, content="c")


_ROWS = text("""
SELECT ct.slug, b.mode, b.status, b.closed_at, f.grader_label, f.grader_mistakes, c.outcome, c.judged_by,
       nx.grader_label
FROM corrections c JOIN conversations cv ON cv.id = c.conversation_id
JOIN contestants ct ON ct.id = cv.contestant_id JOIN battles b ON b.id = c.battle_id
JOIN messages f ON f.id = c.faulty_message_id LEFT JOIN messages nx ON nx.id = c.next_reply_message_id
""")


def _kinds(label: str | None, mistakes: Any) -> set[str]:
    listed = set((mistakes if isinstance(mistakes, list) else json.loads(mistakes or "null")) or [])
    return listed | ({"garbage"} if label == "garbage" else set())


def _expected(engine: Engine, source: str) -> dict[Key, tuple[int, int]]:
    """(fixed, judged) per (model, kind) of public battles, counted from the raw rows."""
    fixed: Counter[Key] = Counter()
    judged: Counter[Key] = Counter()
    with engine.connect() as conn:
        rows = conn.execute(_ROWS).all()
    for slug, mode, status, closed_at, label, mistakes, outcome, judged_by, next_label in rows:
        if status == "flagged" or closed_at is None or (mode == "auto") != (source == "auto"):
            continue
        verdict: bool | None = None
        if source == "grader":
            verdict = None if next_label is None else next_label == "correct"
        elif outcome in ("fixed", "not_fixed") and (source == "auto" or judged_by == "person"):
            verdict = outcome == "fixed"
        if verdict is None:
            continue
        for kind in _kinds(label, mistakes):
            judged[slug, kind] += 1
            fixed[slug, kind] += verdict
    return {key: (fixed[key], n) for key, n in judged.items()}


def _expected_replay(engine: Engine) -> dict[Key, tuple[int, int]]:
    query = text("""SELECT ct.slug, f.grader_label, f.grader_mistakes, r.outcome FROM replay_results r
                    JOIN contestants ct ON ct.id = r.contestant_id
                    JOIN corrections c ON c.id = r.correction_id
                    JOIN messages f ON f.id = c.faulty_message_id""")
    fixed: Counter[Key] = Counter()
    answered: Counter[Key] = Counter()
    with engine.connect() as conn:
        for slug, label, mistakes, outcome in conn.execute(query):
            for kind in _kinds(label, mistakes):
                answered[slug, kind] += 1
                fixed[slug, kind] += outcome == "fixed"
    return {key: (fixed[key], n) for key, n in answered.items()}


def _pairs(engine: Engine) -> dict[tuple[str, str], tuple[int, int]]:
    """(wins of the first, ties) per ordered pair of models, from replay's pairwise board."""
    counts = replay_pair_counts(engine)
    return {(a, b): (int(counts.wins[i, j]), int(counts.ties[i, j]))
            for (i, a), (j, b) in itertools.permutations(enumerate(counts.models), 2)}


def _expected_pairs(engine: Engine) -> dict[tuple[str, str], tuple[int, int]]:
    query = text("""SELECT r.correction_id, ct.slug, r.outcome FROM replay_results r
                    JOIN contestants ct ON ct.id = r.contestant_id""")
    answers: dict[int, dict[str, bool]] = {}
    with engine.connect() as conn:
        for correction_id, slug, outcome in conn.execute(query):
            answers.setdefault(correction_id, {})[slug] = outcome == "fixed"
    wins: Counter[tuple[str, str]] = Counter()
    ties: Counter[tuple[str, str]] = Counter()
    for by_model in answers.values():
        for a, b in itertools.permutations(by_model, 2):
            wins[a, b] += by_model[a] and not by_model[b]
            ties[a, b] += by_model[a] == by_model[b]
    models = ("m1", "m2", "m3")
    return {(a, b): (wins[a, b], ties[a, b]) for a, b in itertools.permutations(models, 2)}


def _board(engine: Engine, source: str) -> dict[Key, tuple[int, int]]:
    return {(k.model, k.kind): (k.fixed, k.judged) for k in fix_counts_by_kind(engine, source=source)}


def test_the_roll_ups_agree_with_a_count_of_the_raw_rows(arena: Any, engine: Engine) -> None:
    rng = random.Random(44)
    _history(arena, rng)
    _replay(engine, rng)
    boards = {source: _board(engine, source) for source in ("people", "grader", "auto", "replay")}
    for source in ("people", "grader", "auto"):
        assert boards[source] == _expected(engine, source), source
    assert boards["replay"] == _expected_replay(engine)
    pairs = _pairs(engine)
    assert pairs == _expected_pairs(engine) and sum(w + t for w, t in pairs.values()) > 0
    assert all(boards.values()), "the random history gives every source something to count"
    with engine.begin() as conn:  # a refill from the stored rows gives what the writes kept
        refill_side_stats(conn)
        refill_replay_tallies(conn)
    assert {source: _board(engine, source) for source in boards} == boards
    assert _pairs(engine) == pairs


def test_answers_stored_at_once_by_three_models_make_every_pair(arena: Any, engine: Engine) -> None:
    """Three writers answer one correction at the same moment: each pair's outcome is counted once."""
    battle = arena.battle("m1", "m2")
    correction = actions.record_correction(engine, battle_id=battle.id, side="a", content="2024.")
    barrier = threading.Barrier(3)

    def answer(model: str, outcome: str) -> None:
        barrier.wait()
        actions.record_replay_result(engine, correction_id=correction.id, contestant=model, outcome=outcome,
                                     content="c")

    threads = [threading.Thread(target=answer, args=pick)
               for pick in (("m1", "fixed"), ("m2", "not_fixed"), ("m3", "fixed"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert _pairs(engine) == _expected_pairs(engine)
    assert _pairs(engine)["m1", "m2"] == (1, 0) and _pairs(engine)["m1", "m3"] == (0, 1)


def test_a_second_answer_to_a_correction_is_not_counted_twice(arena: Any, engine: Engine) -> None:
    battle = arena.battle("m1", "m2", replies=False)
    actions.append_message(engine, battle_id=battle.id, side="a", kind="request", content="Add it.")
    actions.append_message(engine, battle_id=battle.id, side="a", kind="reply", content="x",
                           grader_label="partial", grader_mistakes=["wrong_year"])
    correction = actions.record_correction(engine, battle_id=battle.id, side="a", content="2024.")
    for outcome in ("fixed", "not_fixed"):
        actions.record_replay_result(engine, correction_id=correction.id, contestant="m3", outcome=outcome,
                                     content="c")
    assert _board(engine, "replay") == {("m3", "wrong_year"): (1, 1)}
