"""``python -m db bench``: how fast votes land and how fast the leaderboard counts come back.

0. The disk's fsync rate (8 kB write + fdatasync per round): the ceiling of fsync-per-commit writes.
1. Votes/s: ``writers`` processes each record ``votes_per_writer`` votes through the real
   :func:`db.actions.record_vote` (one committed transaction each, the plain path) on battles prepared
   beforehand; wall time from a shared start barrier to the last commit; for both durability modes of
   :func:`db.engine.make_engine`. Then ``writers`` threads of one process (the web app's shape), durable
   (fsync), on the plain path and through :mod:`db.actions.group_commit`. Target >= 2,000 votes/s.
2. Aggregation: ``aggregate_votes`` votes (and their battles) bulk-loaded, then
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

import numpy as np
from sqlalchemy import Engine, insert
from sqlalchemy.exc import DBAPIError

from db.engine import Durability, make_engine
from db.models import Base, Battle, Contestant, Conversation, Message, utcnow

VOTES_PER_S_TARGET = 2_000.0
AGGREGATION_S_TARGET = 0.5
CHOICES = np.array(["a", "b", "tie", "both_bad"])


@contextmanager
def _postgres_schema(url: str) -> Iterator[str]:
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


def seed_contestants(engine: Engine, n: int, prefix: str = "model") -> list[int]:
    """``n`` contestants named ``{prefix}-000`` ...; returns their ids in that order."""
    now = utcnow()
    rows = [
        {"slug": f"{prefix}-{i:03d}", "display_name": f"Model {i}", "family": "bench", "source": "",
         "params": {}, "enabled": True, "created_at": now, "updated_at": now}
        for i in range(n)
    ]
    with engine.begin() as conn:
        return list(
            conn.scalars(insert(Contestant).returning(Contestant.id, sort_by_parameter_order=True), rows)
        )


def prepare_vote_battles(engine: Engine, contestant_ids: list[int], count: int) -> list[str]:
    """``count`` open battles, each with one reply per side (what a vote needs), bulk-inserted."""
    now = utcnow()
    rng = np.random.default_rng(1)
    ids = [str(uuid.uuid4()) for _ in range(count)]
    with engine.begin() as conn:
        conn.execute(insert(Battle), [
            {"id": b, "mode": "anonymous", "scenario": "bench", "status": "open",
             "revealed_before_vote": False,
             "created_at": now, "updated_at": now} for b in ids
        ])
        pairs = rng.choice(len(contestant_ids), size=(count, 2), replace=True)
        conv_rows = []
        for b, (i, j) in zip(ids, pairs, strict=True):
            j = (i + 1) % len(contestant_ids) if i == j else j
            conv_rows.append({"battle_id": b, "side": "a", "contestant_id": contestant_ids[i],
                              "system_prompt": "", "params": {}})
            conv_rows.append({"battle_id": b, "side": "b", "contestant_id": contestant_ids[j],
                              "system_prompt": "", "params": {}})
        conv_ids = conn.scalars(
            insert(Conversation).returning(Conversation.id, sort_by_parameter_order=True), conv_rows
        ).all()
        conn.execute(insert(Message), [
            {"conversation_id": c, "position": 0, "role": "assistant", "kind": "reply", "content": "ok",
             "created_at": now, "first_try": True, "superseded": False} for c in conv_ids
        ])
    return ids


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
    from db.actions.group_commit import configure_group_commit
    from db.actions.votes import record_vote

    engine = make_engine(url, durability=durability)
    configure_group_commit(engine, enabled=False)  # one vote per process at a time: nothing to group
    with engine.connect():  # open the first pooled connection before the clock starts
        pass
    barrier.wait()
    done = 0
    for i, battle_id in enumerate(battle_ids):
        record_vote(engine, battle_id=battle_id, choice=str(CHOICES[i % 4]))
        done += 1
    out.put(done)
    engine.dispose()


def measure_votes_per_s(
    url: str, *, writers: int, votes_per_writer: int, models: int, durability: Durability = "fsync"
) -> dict[str, Any]:
    """Concurrent vote throughput through the real ``db.actions.record_vote``."""
    engine = make_engine(url)
    Base.metadata.create_all(engine)
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
    from db.actions.group_commit import configure_group_commit
    from db.actions.votes import record_vote

    setup = make_engine(url)
    Base.metadata.create_all(setup)
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
            record_vote(engine, battle_id=battle_id, choice=str(CHOICES[i % 4]))
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


_BATTLE_COLS = ("id", "mode", "scenario", "status", "revealed_before_vote", "created_at", "updated_at",
                "closed_at")
_VOTE_COLS = ("battle_id", "choice", "created_at", "model_a_id", "model_b_id", "mode", "scenario", "revealed",
              "flagged", "with_corrections")


def _skip_fk_triggers(conn: Any) -> None:
    """Seeding only: let a superuser skip per-row FK triggers (the rows are consistent by construction)."""
    try:
        with conn.begin_nested():
            conn.exec_driver_sql("SET LOCAL session_replication_role = replica")
    except DBAPIError:
        pass  # not a superuser: load with the checks, just slower


def _sqlite_values(engine: Engine, table: str, cols: tuple[str, ...], rows: list[tuple[Any, ...]]) -> Any:
    """``rows`` as the SQLite driver takes them: each column through its type's own bind processor (the
    one SQLAlchemy would apply: UTC timestamps, JSON, booleans), without building a dict per row."""
    columns = Base.metadata.tables[table].columns
    processors = [columns[c].type.bind_processor(engine.dialect) for c in cols]
    if not any(processors):
        return rows
    steps = [(i, f) for i, f in enumerate(processors) if f is not None]

    def convert(row: tuple[Any, ...]) -> tuple[Any, ...]:
        values = list(row)
        for i, process in steps:
            values[i] = process(values[i])
        return tuple(values)

    return map(convert, rows)


def _load(engine: Engine, table: str, cols: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    """Bulk-load rows: PostgreSQL ``COPY`` through psycopg, else one driver-level executemany."""
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            _skip_fk_triggers(conn)
            cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
            with cursor.copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            conn.exec_driver_sql("PRAGMA cache_size = -262144")  # 256 MB: random-key index inserts in RAM
            marks = ", ".join("?" * len(cols))
            cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
            cursor.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({marks})",
                               _sqlite_values(engine, table, cols, rows))


def bulk_votes(
    engine: Engine,
    contestant_ids: list[int],
    n: int,
    chunk: int = 100_000,
    progress: Callable[[int], None] | None = None,
) -> None:
    """``n`` voted battles with their votes, loaded in chunks (COPY on PostgreSQL); ``progress`` is told
    the votes loaded so far after each chunk."""
    rng = np.random.default_rng(7)
    ids = np.asarray(contestant_ids)
    now = utcnow()
    for start in range(0, n, chunk):
        size = min(chunk, n - start)
        a = rng.integers(0, len(ids), size)
        b = (a + rng.integers(1, len(ids), size)) % len(ids)
        choice = CHOICES[rng.choice(4, size=size, p=[0.42, 0.42, 0.1, 0.06])]
        battle_ids = [str(uuid.uuid4()) for _ in range(size)]
        _load(engine, "battles", _BATTLE_COLS,
              [(bid, "anonymous", "bench", "voted", False, now, now, now) for bid in battle_ids])
        _load(engine, "votes", _VOTE_COLS, [
            (bid, str(c), now, int(ids[x]), int(ids[y]), "anonymous", "bench", False, False, k % 5 == 0)
            for k, (bid, c, x, y) in enumerate(zip(battle_ids, choice, a, b, strict=True))
        ])
        if progress is not None:
            progress(start + size)
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":  # index-only scans need the visibility map
            conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("VACUUM ANALYZE votes")
        else:
            conn.exec_driver_sql("ANALYZE")
            conn.commit()


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
    from db.boards.aggregates import pairwise_counts

    engine = make_engine(url, durability="none")
    Base.metadata.create_all(engine)
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
        with _postgres_schema(postgres_url) as url:
            progress(f"postgresql: votes/s ({durability}) ...")
            results[f"postgres_votes_{durability}"] = measure_votes_per_s(
                url, writers=writers, votes_per_writer=votes_per_writer, models=models, durability=durability)
    for group_commit in (False, True) if votes else ():
        path = "group_commit" if group_commit else "plain"
        with _postgres_schema(postgres_url) as url:
            progress(f"postgresql: votes/s ({writers} threads, {path}) ...")
            results[f"postgres_votes_threads_{path}"] = measure_thread_votes_per_s(
                url, writers=writers, votes_per_writer=votes_per_writer, models=models,
                group_commit=group_commit)
    if aggregation:
        with _postgres_schema(postgres_url) as url:
            progress("postgresql: aggregation ...")
            results["postgres_aggregation"] = measure_aggregation(url, votes=aggregate_votes, models=models)
    return results
