"""Group commit (db/group_commit.py) on SQLite and PostgreSQL: threads of one process share transactions,
yet every vote is decided on its own, a failed commit fails every caller in it, and a confirmed vote is
on disk even when the process is SIGKILLed right after."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event, func, select

from db import actions
from db.actions.group_commit import GroupCommitter, configure_group_commit, group_committer
from db.engine import make_engine
from db.errors import NotFound, VoteRefused
from db.models import Battle, Contestant, Vote, utcnow
from db.seed import prepare_vote_battles, seed_contestants

WORKER = Path(__file__).with_name("vote_worker.py")


def _battles(engine: Engine, count: int) -> list[str]:
    return prepare_vote_battles(engine, seed_contestants(engine, 4, prefix="g"), count)


def _votes(engine: Engine) -> dict[str, str]:
    with engine.connect() as conn:
        return {b: c for b, c in conn.execute(select(Vote.battle_id, Vote.choice))}


def _assert_consistent(engine: Engine) -> None:
    with engine.connect() as conn:
        voted = set(conn.scalars(select(Battle.id).where(Battle.status == "voted")))
        per_battle = conn.execute(select(Vote.battle_id, func.count()).group_by(Vote.battle_id)).all()
    assert all(n == 1 for _, n in per_battle)
    assert {b for b, _ in per_battle} == voted


def _in_threads(targets: list[Callable[[], Any]]) -> list[Any]:
    """Run each target in its own thread, released together; their results (or exceptions) in order."""
    barrier = threading.Barrier(len(targets))
    results: list[Any] = [None] * len(targets)

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = targets[i]()
        except BaseException as exc:  # noqa: BLE001 - returned to the test
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(targets))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a caller never returned"
    return results


def _committer(engine: Engine, **kwargs: Any) -> GroupCommitter:
    committer = configure_group_commit(engine, **kwargs)
    assert committer is not None
    return committer


def test_group_commit_is_the_default_and_can_be_turned_off(engine: Engine) -> None:
    assert group_committer(engine) is not None
    configure_group_commit(engine, enabled=False)
    assert group_committer(engine) is None
    ids = _battles(engine, 2)
    assert actions.record_vote(engine, battle_id=ids[0], choice="a").choice == "a"  # the plain path works
    with pytest.raises(VoteRefused) as refused:
        actions.record_vote(engine, battle_id=ids[0], choice="b")
    assert refused.value.reason == "already_voted"


def test_eight_threads_on_distinct_battles_share_commits_and_lose_nothing(engine: Engine) -> None:
    committer = _committer(engine, max_delay_s=0.005)
    ids = _battles(engine, 8 * 12)
    choices = {b: "ab"[i % 2] for i, b in enumerate(ids)}

    def voter(mine: list[str]) -> Callable[[], list[str]]:
        return lambda: [actions.record_vote(engine, battle_id=b, choice=choices[b]).battle_id for b in mine]

    results = _in_threads([voter(ids[w::8]) for w in range(8)])
    assert not [r for r in results if isinstance(r, BaseException)], results
    assert sorted(b for r in results for b in r) == sorted(ids)
    assert _votes(engine) == choices
    stats = committer.stats()
    assert stats.actions == len(ids)
    assert stats.largest > 1 and stats.batches < len(ids), stats  # votes really shared transactions
    _assert_consistent(engine)


def test_racing_callers_one_winner_and_each_refusal_typed(engine: Engine, arena: Any) -> None:
    """Eight threads race on the same battles, mixed with refusals of every kind in the same batches."""
    _committer(engine, max_delay_s=0.005)
    ids = _battles(engine, 6)
    flagged = arena.battle()
    actions.flag_battle(engine, battle_id=flagged.id, reason="spam")
    unready = arena.battle(replies=False)
    revealed = arena.battle()
    actions.mark_revealed(engine, battle_id=revealed.id)
    expected_error = {flagged.id: "closed", unready.id: "not_ready", revealed.id: "revealed",
                      "no-such-battle": "missing"}

    def voter(seed: int) -> Callable[[], list[tuple[str, str]]]:
        def run() -> list[tuple[str, str]]:
            outcomes = []
            order = ids + list(expected_error)
            order = order[seed % len(order):] + order[: seed % len(order)]
            for battle_id in order:
                try:
                    actions.record_vote(engine, battle_id=battle_id, choice="ab"[seed % 2])
                except VoteRefused as refused:
                    outcomes.append((battle_id, refused.reason))
                except NotFound:
                    outcomes.append((battle_id, "missing"))
                else:
                    outcomes.append((battle_id, "won:" + "ab"[seed % 2]))
            return outcomes

        return run

    results = _in_threads([voter(seed) for seed in range(8)])
    assert not [r for r in results if isinstance(r, BaseException)], results
    outcomes = [o for r in results for o in r]
    winners = {b: o[4:] for b, o in outcomes if o.startswith("won:")}
    assert sorted(winners) == sorted(ids)  # exactly one winner per battle
    assert Counter(o for b, o in outcomes if b in ids and not o.startswith("won:")) == Counter(
        {"already_voted": 7 * len(ids)})
    for battle_id, reason in expected_error.items():
        assert [o for b, o in outcomes if b == battle_id] == [reason] * 8
    assert _votes(engine) == winners  # the stored vote is the confirmed one
    _assert_consistent(engine)


class DiskFull(Exception):
    """What the injected commit failure raises."""


def test_a_failed_commit_fails_every_caller_of_its_batch(engine: Engine) -> None:
    """The first group commit fails at COMMIT: all eight callers in it get the error, nothing is stored."""
    committer = _committer(engine, max_batch=8, max_delay_s=0.1)
    ids = _battles(engine, 8)
    failures = {"left": 1}

    def fail_once(_conn: Any) -> None:
        if threading.current_thread().name == "db-group-commit" and failures["left"]:
            failures["left"] -= 1
            raise DiskFull("no space left on device")

    event.listen(engine, "commit", fail_once)
    try:
        results = _in_threads([lambda b=b: actions.record_vote(engine, battle_id=b, choice="a") for b in ids])
    finally:
        event.remove(engine, "commit", fail_once)
    assert all(isinstance(r, DiskFull) for r in results), results
    assert _votes(engine) == {}
    assert committer.stats().batches == 0
    # Nothing confirmed, nothing half-written: the same votes go through afterwards, one batch or more.
    again = _in_threads([lambda b=b: actions.record_vote(engine, battle_id=b, choice="b") for b in ids])
    assert sorted(v.battle_id for v in again) == sorted(ids)
    assert _votes(engine) == dict.fromkeys(ids, "b")
    _assert_consistent(engine)


def test_a_failing_statement_costs_only_its_own_vote(engine: Engine) -> None:
    """A database error inside the set (here the unique key on ``votes.battle_id``: a vote row the battle's
    status does not know about) makes the batch redo each vote in its own savepoint; the others commit."""
    committer = _committer(engine, max_batch=8, max_delay_s=0.1)
    ids = _battles(engine, 8)
    victim = ids[3]
    with engine.begin() as conn:  # a vote row that the battle's status does not know about
        model = conn.scalar(select(func.min(Contestant.id)))
        conn.execute(Vote.__table__.insert().values(
            battle_id=victim, choice="tie", model_a_id=model, model_b_id=model, mode="anonymous",
            scenario="bench", revealed=False, flagged=False, with_corrections=False, created_at=utcnow()))
    results = _in_threads([lambda b=b: actions.record_vote(engine, battle_id=b, choice="a") for b in ids])
    by_battle = dict(zip(ids, results, strict=True))
    refused = by_battle.pop(victim)
    assert isinstance(refused, VoteRefused) and refused.reason == "already_voted", refused
    assert all(v.choice == "a" for v in by_battle.values()), by_battle
    stored = _votes(engine)
    assert stored[victim] == "tie" and all(stored[b] == "a" for b in by_battle)
    assert committer.stats().actions == len(ids)


def test_sigkilled_process_keeps_every_vote_its_record_vote_confirmed(db_url: str, engine: Engine,
                                                                      tmp_path: Path) -> None:
    """The worker records through the default (group commit) path and prints ``ok`` after each return;
    a SIGKILL right after those lines must find each of those votes on disk."""
    ids = _battles(engine, 400)
    assert group_committer(make_engine(db_url)) is not None  # the worker's engine takes the group path
    ids_file = tmp_path / "ids.txt"
    ids_file.write_text("\n".join(ids))
    proc = subprocess.Popen([sys.executable, str(WORKER), db_url, str(ids_file), "b"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline().strip() == "ready", proc.stderr
    proc.stdin.write("go\n")
    proc.stdin.flush()
    confirmed = []
    while len(confirmed) < 30:
        line = proc.stdout.readline().split()
        assert line and line[0] == "ok", line
        confirmed.append(line[1])
    os.kill(proc.pid, signal.SIGKILL)  # at once: the last confirmation is microseconds old
    proc.wait(timeout=30)
    confirmed += [ln.split()[1] for ln in proc.stdout.read().splitlines() if ln.startswith("ok ")]
    stored = _votes(engine)
    assert set(confirmed) <= set(stored)
    assert len(stored) < len(ids), "the worker finished before the kill: the test proved nothing"
    _assert_consistent(engine)
