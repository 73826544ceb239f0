"""``python -m db bench``: how fast votes land and how fast the leaderboard counts come back.

0. The disk's fsync rate (8 kB write + fdatasync per round): the ceiling of fsync-per-commit writes.
1. Votes/s: ``writers`` processes each record ``votes_per_writer`` votes through the real
   :func:`db.actions.record_vote` (one committed transaction each, the plain path) on battles prepared
   beforehand (:mod:`db.seed`); wall time from a shared start barrier to the last commit; for both
   durability modes of :func:`db.engine.make_engine`. Then ``writers`` threads of one process (the web
   app's shape), durable (fsync), on the plain path and through :mod:`db.actions.group_commit`.
   Target >= 2,000 votes/s.
2. Aggregation: ``aggregate_votes`` votes (and their battles) bulk-loaded (:mod:`db.seed`), then
   :func:`db.boards.pairwise_counts` timed (best of 3). Target <= 0.5 s.

Measured on SQLite (a fresh file) and, when a URL is given, on PostgreSQL (a fresh schema, dropped after).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from db import Durability, make_engine
from db.seed import VOTE_CHOICES, bulk_votes, create_schema, prepare_vote_battles, seed_contestants

VOTES_PER_S_TARGET = 2_000.0
AGGREGATION_S_TARGET = 0.5


@contextmanager
def postgres_schema(url: str) -> Iterator[str]:
    """A throw-away schema on the server at ``url``; yields a URL whose search_path points at it."""
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = make_engine(url)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in url else "?"
    try:
        yield f"{url}{sep}options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


def _analyze(engine: Engine) -> None:
    """Planner statistics for the freshly loaded tables, as autovacuum keeps them in production.

    Without them PostgreSQL guesses the new ``messages`` table is tiny and answers ``record_vote``'s
    "did each side reply" with a hashed scan of every message: a cost per vote that grows with the table.
    """
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")
        else:
            conn.exec_driver_sql("ANALYZE")
            conn.commit()


def _writer(url: str, durability: Durability, battle_ids: list[str], barrier: Any, out: Any) -> None:
    from db.actions import configure_group_commit, record_vote

    engine = make_engine(url, durability=durability)
    configure_group_commit(engine, enabled=False)  # one vote per process at a time: nothing to group
    with engine.connect():  # open the first pooled connection before the clock starts
        pass
    barrier.wait()
    done = 0
    for i, battle_id in enumerate(battle_ids):
        record_vote(engine, battle_id=battle_id, choice=str(VOTE_CHOICES[i % 4]))
        done += 1
    out.put(done)
    engine.dispose()


def measure_votes_per_s(
    url: str, *, writers: int, votes_per_writer: int, models: int, durability: Durability = "fsync"
) -> dict[str, Any]:
    """Concurrent vote throughput through the real ``db.actions.record_vote``."""
    engine = make_engine(url)
    create_schema(engine)
    ids = prepare_vote_battles(engine, seed_contestants(engine, models), writers * votes_per_writer)
    _analyze(engine)
    engine.dispose()
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(writers + 1)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(url, durability, ids[w::writers], barrier, out))
        for w in range(writers)
    ]
    for p in procs:
        p.start()
    barrier.wait()
    start = time.perf_counter()
    done = sum(out.get() for _ in procs)
    elapsed = time.perf_counter() - start
    for p in procs:
        p.join()
    rate = done / elapsed
    return {"durability": durability, "writers": writers, "kind": "processes", "path": "plain",
            "votes": done, "seconds": round(elapsed, 3),
            "votes_per_s": round(rate, 1),
            "target_votes_per_s": VOTES_PER_S_TARGET, "ratio_vs_target": round(rate / VOTES_PER_S_TARGET, 2)}


def measure_thread_votes_per_s(
    url: str, *, writers: int, votes_per_writer: int, models: int, group_commit: bool,
    durability: Durability = "fsync", lanes: int = 1,
) -> dict[str, Any]:
    """Vote throughput of ``writers`` threads of ONE process (the web app's shape) on one engine.

    ``group_commit=False``: every vote its own transaction and flush (the plain path);
    ``True``: through :mod:`db.actions.group_commit` (votes of concurrent threads share a transaction and a
    flush).
    """
    from db.actions import configure_group_commit, record_vote

    setup = make_engine(url)
    create_schema(setup)
    ids = prepare_vote_battles(setup, seed_contestants(setup, models), writers * votes_per_writer)
    _analyze(setup)
    setup.dispose()
    engine = make_engine(url, durability=durability, pool_size=writers)
    committer = configure_group_commit(engine, enabled=group_commit, lanes=lanes)
    with engine.connect():
        pass
    barrier = threading.Barrier(writers + 1)
    counts: list[int] = []

    def writer(mine: list[str]) -> None:
        barrier.wait()
        for i, battle_id in enumerate(mine):
            record_vote(engine, battle_id=battle_id, choice=str(VOTE_CHOICES[i % 4]))
        counts.append(len(mine))

    threads = [threading.Thread(target=writer, args=(ids[w::writers],)) for w in range(writers)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    engine.dispose()
    done = sum(counts)
    if done != len(ids):
        raise RuntimeError(f"thread writers recorded {done} of {len(ids)} votes")
    rate = done / elapsed
    result: dict[str, Any] = {
        "durability": durability, "writers": writers, "kind": "threads",
        "path": "group_commit" if group_commit else "plain", "votes": done, "seconds": round(elapsed, 3),
        "votes_per_s": round(rate, 1), "target_votes_per_s": VOTES_PER_S_TARGET,
        "ratio_vs_target": round(rate / VOTES_PER_S_TARGET, 2)}
    if committer is not None:
        stats = committer.stats()
        result["commits"] = stats.batches
        result["mean_batch"] = round(stats.actions / max(stats.batches, 1), 2)
        result["largest_batch"] = stats.largest
    return result


def measure_fsync_per_s(folder: str | None, *, seconds: float = 1.0) -> float:
    """How many 8 kB write+fdatasync rounds the disk does per second: the ceiling of durable commits."""
    with tempfile.NamedTemporaryFile(dir=folder) as handle:
        block = b"\0" * 8192
        done = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            os.pwrite(handle.fileno(), block, 0)
            os.fdatasync(handle.fileno())
            done += 1
        return done / (time.perf_counter() - start)


def measure_aggregation(url: str, *, votes: int, models: int) -> dict[str, Any]:
    """Seed ``votes`` votes over ``models`` contestants, then time :func:`pairwise_counts`."""
    from db.boards import pairwise_counts

    engine = make_engine(url, durability="none")
    create_schema(engine)
    t0 = time.perf_counter()
    bulk_votes(engine, seed_contestants(engine, models), votes)
    seed_s = time.perf_counter() - t0
    timings, cpu = [], []
    counts = None
    for _ in range(5):
        t, c = time.perf_counter(), time.process_time()
        counts = pairwise_counts(engine)
        timings.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    engine.dispose()
    assert counts is not None and counts.total == votes, "aggregation lost votes"
    best = min(timings)
    return {"votes": votes, "models": models, "seed_s": round(seed_s, 1), "best_s": round(best, 3),
            "median_s": round(statistics.median(timings), 3),
            # CPU of this process: the whole query on SQLite (in-process), the client side on PostgreSQL
            "best_cpu_s": round(min(cpu), 3), "target_s": AGGREGATION_S_TARGET,
            "ratio_vs_target": round(AGGREGATION_S_TARGET / best, 2)}


def run_bench(
    *,
    sqlite_dir: str | None,
    postgres_url: str | None,
    writers: int,
    votes_per_writer: int,
    aggregate_votes: int,
    models: int,
    parts: tuple[str, ...] = ("votes", "aggregation"),
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """All figures as one JSON-able dict. ``ratio_vs_target`` >= 1 means the target is met."""
    postgres_url = postgres_url or os.environ.get("ARENA_TEST_POSTGRES_URL") or None
    if progress is None:
        def progress(line: str) -> None:
            print(line, file=sys.stderr, flush=True)

    results: dict[str, Any] = {"fsync_per_s": round(measure_fsync_per_s(sqlite_dir), 1)}
    durabilities: tuple[Durability, ...] = ("fsync", "crash_safe")
    votes, aggregation = "votes" in parts, "aggregation" in parts
    with tempfile.TemporaryDirectory(dir=sqlite_dir) as tmp:
        for durability in durabilities if votes else ():
            progress(f"sqlite: votes/s ({durability}) ...")
            results[f"sqlite_votes_{durability}"] = measure_votes_per_s(
                f"sqlite:///{Path(tmp) / f'votes_{durability}.db'}", writers=writers,
                votes_per_writer=votes_per_writer, models=models, durability=durability)
        for group_commit in (False, True) if votes else ():
            path = "group_commit" if group_commit else "plain"
            progress(f"sqlite: votes/s ({writers} threads, {path}) ...")
            results[f"sqlite_votes_threads_{path}"] = measure_thread_votes_per_s(
                f"sqlite:///{Path(tmp) / f'threads_{path}.db'}", writers=writers,
                votes_per_writer=votes_per_writer, models=models, group_commit=group_commit)
        if aggregation:
            progress("sqlite: aggregation ...")
            results["sqlite_aggregation"] = measure_aggregation(
                f"sqlite:///{Path(tmp) / 'agg.db'}", votes=aggregate_votes, models=models)
    if not postgres_url:
        results["postgres"] = "skipped: no --postgres-url and no ARENA_TEST_POSTGRES_URL"
        return results
    for durability in durabilities if votes else ():
        with postgres_schema(postgres_url) as url:
            progress(f"postgresql: votes/s ({durability}) ...")
            results[f"postgres_votes_{durability}"] = measure_votes_per_s(
                url, writers=writers, votes_per_writer=votes_per_writer, models=models, durability=durability)
    for group_commit in (False, True) if votes else ():
        path = "group_commit" if group_commit else "plain"
        with postgres_schema(postgres_url) as url:
            progress(f"postgresql: votes/s ({writers} threads, {path}) ...")
            results[f"postgres_votes_threads_{path}"] = measure_thread_votes_per_s(
                url, writers=writers, votes_per_writer=votes_per_writer, models=models,
                group_commit=group_commit)
    if aggregation:
        with postgres_schema(postgres_url) as url:
            progress("postgresql: aggregation ...")
            results["postgres_aggregation"] = measure_aggregation(url, votes=aggregate_votes, models=models)
    return results
