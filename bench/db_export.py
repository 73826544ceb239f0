"""Export benchmark (part of ``python -m db bench``): seconds to export N stored messages to Parquet.

The database is seeded in bulk (:func:`db.seed.seed_corrected_battles`) with battles shaped like real
ones: two sides, each with a request, a faulty reply, a correction and the following reply (8 messages,
2 corrections and 1 vote per battle; replies carry timing, tokens and a grader label). Then
:func:`db.export.export_battles` writes the nested Parquet file exactly as
``python -m db export --format parquet`` does; the seeding is not timed.
Target: 1M messages in <= 10 s. ``cpu_s`` (this process's CPU time) is printed beside the wall time:
on a shared machine it tells how much of the wall time was spent waiting for a core.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from db import make_engine
from db.seed import MESSAGES_PER_CORRECTED_BATTLE, create_schema, seed_corrected_battles

EXPORT_S_TARGET = 10.0


def measure_export(url: str, *, messages: int, chunk_size: int | None = None) -> dict[str, Any]:
    """Seed about ``messages`` messages at ``url`` (an empty database), then time the Parquet export."""
    from db.export import DEFAULT_CHUNK_SIZE, export_battles

    battles = max(1, messages // MESSAGES_PER_CORRECTED_BATTLE)
    engine = make_engine(url, durability="none")
    create_schema(engine)
    t0 = time.perf_counter()
    seed_corrected_battles(engine, battles=battles)
    seed_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "battles.parquet"
        t, cpu = time.perf_counter(), time.process_time()
        result = export_battles(engine, fmt="parquet", out=out, salt="bench-salt",
                                chunk_size=chunk_size or DEFAULT_CHUNK_SIZE)
        seconds, cpu_s = time.perf_counter() - t, time.process_time() - cpu
        size_mb = out.stat().st_size / 1e6
    engine.dispose()
    exported = result.counts.messages
    assert exported == battles * MESSAGES_PER_CORRECTED_BATTLE, "export lost messages"
    return {"messages": exported, "battles": result.counts.battles, "seed_s": round(seed_s, 1),
            "seconds": round(seconds, 2), "cpu_s": round(cpu_s, 2),
            "messages_per_s": round(exported / seconds),
            "parquet_mb": round(size_mb, 1), "chunk_size": chunk_size or DEFAULT_CHUNK_SIZE,
            "target_s": EXPORT_S_TARGET, "ratio_vs_target": round(EXPORT_S_TARGET / seconds, 2)}


def run_export_bench(
    *, sqlite_dir: str | None, postgres_url: str | None, messages: int
) -> dict[str, Any]:
    """The export figures for ``python -m db bench``: SQLite always; PostgreSQL when a URL is given
    (or ``ARENA_TEST_POSTGRES_URL`` is set, as for the rest of the bench)."""
    import os
    import sys

    from bench.db_writes import postgres_schema

    postgres_url = postgres_url or os.environ.get("ARENA_TEST_POSTGRES_URL") or None
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(dir=sqlite_dir) as tmp:
        print("sqlite: export ...", file=sys.stderr, flush=True)
        results["sqlite_export"] = measure_export(f"sqlite:///{Path(tmp) / 'export.db'}", messages=messages)
    if postgres_url:
        with postgres_schema(postgres_url) as url:
            print("postgresql: export ...", file=sys.stderr, flush=True)
            results["postgres_export"] = measure_export(url, messages=messages)
    return results
