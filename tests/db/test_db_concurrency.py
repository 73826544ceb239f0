"""Concurrent writers (threads and processes, distinct and racing), a writer SIGKILLed mid-run, and a
PostgreSQL restart under a live connection pool. The database must never lose a confirmed vote nor
hold two votes for one battle."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select, text
from sqlalchemy.exc import DBAPIError

from db import actions
from db.engine import make_engine
from db.errors import VoteRefused
from db.models import Battle, Vote
from db.seed import prepare_vote_battles, seed_contestants

WORKER = Path(__file__).with_name("vote_worker.py")


def _battles(engine: Engine, count: int) -> list[str]:
    return prepare_vote_battles(engine, seed_contestants(engine, 4, prefix="c"), count)


def _votes(engine: Engine) -> dict[str, str]:
    with engine.connect() as conn:
        return {battle_id: choice for battle_id, choice in conn.execute(select(Vote.battle_id, Vote.choice))}


def _assert_consistent(engine: Engine) -> None:
    """Every vote closed its battle and every voted battle has exactly one vote."""
    with engine.connect() as conn:
        voted = set(conn.scalars(select(Battle.id).where(Battle.status == "voted")))
        rows = conn.execute(select(Vote.battle_id, func.count()).group_by(Vote.battle_id)).all()
        if conn.dialect.name == "sqlite":
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
    assert all(n == 1 for _, n in rows)
    assert {battle_id for battle_id, _ in rows} == voted


def _run_threads(targets: list) -> None:
    barrier = threading.Barrier(len(targets))
    errors: list[BaseException] = []

    def wrap(fn):  # type: ignore[no-untyped-def]
        def run() -> None:
            barrier.wait()
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - surfaced below
                errors.append(exc)

        return run

    threads = [threading.Thread(target=wrap(t)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors


def test_eight_threads_distinct_battles_lose_nothing(engine: Engine) -> None:
    ids = _battles(engine, 8 * 8)
    choices = {b: "ab"[i % 2] for i, b in enumerate(ids)}

    def voter(mine: list[str]):  # type: ignore[no-untyped-def]
        return lambda: [actions.record_vote(engine, battle_id=b, choice=choices[b]) for b in mine]

    _run_threads([voter(ids[w::8]) for w in range(8)])
    assert _votes(engine) == choices
    _assert_consistent(engine)


def test_eight_threads_racing_on_the_same_battles(engine: Engine) -> None:
    ids = _battles(engine, 10)
    wins: list[tuple[str, str]] = []
    refusals: Counter[str] = Counter()
    lock = threading.Lock()

    def voter(seed: int):  # type: ignore[no-untyped-def]
        def run() -> None:
            order = ids[:]
            random.Random(seed).shuffle(order)
            choice = "ab"[seed % 2]
            for battle_id in order:
                try:
                    actions.record_vote(engine, battle_id=battle_id, choice=choice)
                except VoteRefused as refused:
                    with lock:
                        refusals[refused.reason] += 1
                else:
                    with lock:
                        wins.append((battle_id, choice))

        return run

    _run_threads([voter(seed) for seed in range(8)])
    assert sorted(b for b, _ in wins) == sorted(ids)  # exactly one winner per battle
    assert refusals == Counter({"already_voted": 7 * len(ids)})
    assert _votes(engine) == dict(wins)  # the stored vote is the confirmed one
    _assert_consistent(engine)


def _start_worker(url: str, ids: list[str], choice: str, tmp_path: Path, name: str) -> subprocess.Popen[str]:
    ids_file = tmp_path / f"{name}.txt"
    ids_file.write_text("\n".join(ids))
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), url, str(ids_file), choice],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", proc.stderr
    return proc


def _finish(proc: subprocess.Popen[str]) -> list[list[str]]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return [line.split() for line in out.splitlines()]


@pytest.mark.parametrize("race", [False, True], ids=["distinct", "racing"])
def test_two_processes(engine: Engine, db_url: str, tmp_path: Path, race: bool) -> None:
    ids = _battles(engine, 40)
    # racing: both get every battle, in opposite orders, so they collide in the middle
    plans = [ids, ids[::-1]] if race else [ids[0::2], ids[1::2]]
    procs = [_start_worker(db_url, plan, "ab"[i], tmp_path, f"w{i}") for i, plan in enumerate(plans)]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = [_finish(proc) for proc in procs]
    confirmed = {line[1]: "ab"[i] for i, lines in enumerate(results) for line in lines if line[0] == "ok"}
    refused = [line for lines in results for line in lines if line[0] == "refused"]
    assert sum(1 for lines in results for line in lines if line[0] == "ok") == len(ids)  # no double win
    assert len(refused) == (len(ids) if race else 0)
    assert all(line[2] == "already_voted" for line in refused)
    assert _votes(engine) == confirmed
    _assert_consistent(engine)


def test_sigkilled_writer_leaves_a_consistent_db_with_every_confirmed_vote(
    engine: Engine, db_url: str, tmp_path: Path
) -> None:
    ids = _battles(engine, 400)
    proc = _start_worker(db_url, ids, "b", tmp_path, "victim")
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    confirmed = []
    while len(confirmed) < 40:
        line = proc.stdout.readline().split()
        assert line and line[0] == "ok", line
        confirmed.append(line[1])
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    confirmed += [line.split()[1] for line in proc.stdout.read().splitlines() if line.startswith("ok ")]
    stored = _votes(engine)
    assert set(confirmed) <= set(stored)
    assert len(stored) <= len(confirmed) + 1  # at most one commit landed after its line was cut short
    assert len(stored) < len(ids), "the writer finished before the kill: the test proved nothing"
    _assert_consistent(engine)
    fresh = next(b for b in ids if b not in stored)  # the database still takes votes
    assert actions.record_vote(engine, battle_id=fresh, choice="a").choice == "a"


def _pg_cluster() -> tuple[str, str]:
    versions = sorted(os.listdir("/etc/postgresql"))
    return versions[-1], "main"


def _wait_ready(timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = subprocess.run(["pg_isready", "-h", "127.0.0.1", "-p", "5432", "-q"], check=False)
        if ready.returncode == 0:
            return
        time.sleep(0.3)
    raise AssertionError("PostgreSQL did not come back")


@pytest.mark.postgres
@pytest.mark.slow
def test_postgres_restart_under_a_live_pool(pg_schema_url: str) -> None:
    """Restart the real server while the app holds pooled connections and a writer keeps voting."""
    if not Path("/etc/postgresql").is_dir() or subprocess.run(
        ["which", "pg_ctlcluster"], capture_output=True, check=False
    ).returncode:
        pytest.skip("no local PostgreSQL cluster to restart (pg_ctlcluster)")
    engine = make_engine(pg_schema_url)
    from db.models import Base

    Base.metadata.create_all(engine)
    ids = _battles(engine, 600)
    conns = [engine.connect() for _ in range(5)]  # fill the pool with live connections
    for conn in conns:
        conn.execute(text("SELECT 1"))
        conn.close()
    before = actions.record_vote(engine, battle_id=ids[0], choice="a")
    confirmed = {before.battle_id}
    failures: list[str] = []

    def writer() -> None:
        for battle_id in ids[1:400]:
            try:
                actions.record_vote(engine, battle_id=battle_id, choice="b")
            except DBAPIError as exc:  # in flight during the restart: not confirmed, may or may not exist
                failures.append(type(exc.orig).__name__)
                time.sleep(0.05)
            except VoteRefused:
                failures.append("refused")
            else:
                confirmed.add(battle_id)
            time.sleep(0.002)

    thread = threading.Thread(target=writer)
    thread.start()
    time.sleep(0.3)
    version, cluster = _pg_cluster()
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, cluster, "restart"], check=True, timeout=120
    )
    _wait_ready()
    thread.join(timeout=60)
    # The next actions succeed: a read and a write through the same engine and its (stale) pool.
    assert actions.get_battle(engine, battle_id=ids[0]).status == "voted"
    assert actions.record_vote(engine, battle_id=ids[-1], choice="tie").choice == "tie"
    confirmed.add(ids[-1])
    stored = _votes(engine)
    assert confirmed <= set(stored), "a confirmed vote was lost"
    # The writer carried on after the restart: its last votes went through on the recovered pool.
    assert ids[399] in confirmed, Counter(failures)
    _assert_consistent(engine)
    engine.dispose()


def test_racing_tabs_of_a_new_visitor_get_one_visitor(engine: Engine) -> None:
    seen: list[int] = []
    lock = threading.Lock()

    def tab() -> None:
        visitor = actions.get_or_create_visitor(engine, anon_id="new-visitor", address_hash="h")
        with lock:
            seen.append(visitor.id)

    _run_threads([tab for _ in range(6)])
    assert len(seen) == 6 and len(set(seen)) == 1


def test_servers_registering_one_catalogue_at_once_get_one_contestant(engine: Engine) -> None:
    """App servers started together on a fresh database register the same catalogue entry at once."""
    seen: list[int] = []
    lock = threading.Lock()

    def server() -> None:
        contestant = actions.upsert_contestant(engine, slug="shared", display_name="Shared", family="f")
        with lock:
            seen.append(contestant.id)

    _run_threads([server for _ in range(6)])
    assert len(seen) == 6 and len(set(seen)) == 1
    assert [c.slug for c in actions.list_contestants(engine)] == ["shared"]
