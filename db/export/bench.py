"""Export benchmark (part of ``python -m db bench``): seconds to export N stored messages to Parquet.

The database is seeded in bulk with battles shaped like real ones: two sides, each with a request, a
faulty reply, a correction and the following reply (8 messages, 2 corrections and 1 vote per battle;
replies carry timing, tokens and a grader label). Then :func:`db.export.export_battles` writes the
nested Parquet file exactly as ``python -m db export --format parquet`` does; the seeding is not timed.
Target: 1M messages in <= 10 s. ``cpu_s`` (this process's CPU time) is printed beside the wall time:
on a shared machine it tells how much of the wall time was spent waiting for a core.
"""

from __future__ import annotations

import datetime as dt
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, insert, select

from db.engine import make_engine
from db.models import Base, Battle, Contestant, Conversation, Correction, Message, Vote, utcnow

EXPORT_S_TARGET = 10.0
MESSAGES_PER_BATTLE = 8
_REQUEST = "Put lunch with Ana on {d} at 12:30 for an hour in the calendar, room {r}, and remind me at 12."
_FAULTY = "calendar.create(title='Lunch with Ana', start='{d} 12:30', minutes=60, room={r})"
_FEEDBACK = "The room must be a string, and you forgot the reminder."
_FIXED = ("calendar.create(title='Lunch with Ana', start='2026-11-{d:02d}T12:30', minutes=60, room='{r}', "
          "reminders=[calendar.reminder(at='2026-11-{d:02d}T12:00')])")
_NOT_REPLY: dict[str, Any] = dict.fromkeys(
    ("ttft_ms", "total_ms", "prompt_tokens", "completion_tokens", "finish_reason", "grader_label",
     "grader_mistakes"))
_REPLY: dict[int, dict[str, Any]] = {
    position: {"ttft_ms": 41.0, "total_ms": 730.5, "prompt_tokens": 120, "completion_tokens": 38,
               "finish_reason": "stop", "grader_label": label, "grader_mistakes": mistakes}
    for position, label, mistakes in ((1, "garbage", ["room type", "no reminder"]), (3, "correct", None))
}


def _seed(engine: Engine, *, battles: int, chunk: int = 5_000) -> None:
    """``battles`` voted battles of 8 messages each, inserted in chunks (Core executemany)."""
    now = utcnow()
    start_at = now - dt.timedelta(seconds=battles)
    with engine.begin() as conn:
        conn.execute(insert(Contestant), [
            {"slug": f"model-{i}", "display_name": f"Model {i}", "family": "bench", "source": "",
             "params": {}, "enabled": True, "created_at": now, "updated_at": now} for i in range(10)
        ])
        models = list(conn.scalars(select(Contestant.id).order_by(Contestant.id)))
    conv_id = msg_id = 0
    for start in range(0, battles, chunk):
        size = min(chunk, battles - start)
        b_rows, c_rows, m_rows, k_rows, v_rows = [], [], [], [], []
        for n in range(start, start + size):
            bid = str(uuid.uuid4())
            when = start_at + dt.timedelta(seconds=n)  # battles a second apart, as visitors start them
            a, b = models[n % 10], models[(n * 7 + 3) % 10 if (n * 7 + 3) % 10 != n % 10 else (n + 1) % 10]
            b_rows.append({"id": bid, "mode": "anonymous", "scenario": "calendar", "status": "voted",
                           "revealed_before_vote": False, "created_at": when, "updated_at": when,
                           "closed_at": when})
            v_rows.append({"battle_id": bid, "choice": "ab"[n % 2], "created_at": when, "model_a_id": a,
                           "model_b_id": b, "mode": "anonymous", "scenario": "calendar", "revealed": False,
                           "flagged": False, "with_corrections": True})
            for side, model in (("a", a), ("b", b)):
                conv_id += 1
                c_rows.append({"id": conv_id, "battle_id": bid, "side": side, "contestant_id": model,
                               "system_prompt": "You turn requests into calendar API calls.",
                               "params": {"temperature": 0.7}})
                day, room = n % 28 + 1, f"R{n % 97}"
                texts = (("user", "request", _REQUEST.format(d=day, r=room)),
                         ("assistant", "reply", _FAULTY.format(d=day, r=room)),
                         ("user", "correction", _FEEDBACK),
                         ("assistant", "reply", _FIXED.format(d=day, r=room)))
                for position, (role, kind, content) in enumerate(texts):
                    msg_id += 1
                    m_rows.append({
                        "id": msg_id, "conversation_id": conv_id, "position": position, "role": role,
                        "kind": kind, "content": content, "created_at": when, "first_try": position == 1,
                        "superseded": False, "error": None,
                        **(_REPLY[position] if kind == "reply" else _NOT_REPLY),
                    })
                k_rows.append({
                    "battle_id": bid, "conversation_id": conv_id, "faulty_message_id": msg_id - 2,
                    "feedback_message_id": msg_id - 1, "next_reply_message_id": msg_id, "outcome": "fixed",
                    "judged_by": "person", "created_at": when, "judged_at": when,
                })
        with engine.begin() as conn:
            conn.execute(insert(Battle), b_rows)
            conn.execute(insert(Conversation), c_rows)
            conn.execute(insert(Message), m_rows)
            conn.execute(insert(Correction), k_rows)
            conn.execute(insert(Vote), v_rows)
    with engine.begin() as conn:
        conn.exec_driver_sql("ANALYZE")


def measure_export(url: str, *, messages: int, chunk_size: int | None = None) -> dict[str, Any]:
    """Seed about ``messages`` messages at ``url`` (an empty database), then time the Parquet export."""
    from db.export.core import export_battles
    from db.export.read import DEFAULT_CHUNK_SIZE

    battles = max(1, messages // MESSAGES_PER_BATTLE)
    engine = make_engine(url, durability="none")
    Base.metadata.create_all(engine)
    t0 = time.perf_counter()
    _seed(engine, battles=battles)
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
    assert exported == battles * MESSAGES_PER_BATTLE, "export lost messages"
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

    from db.bench import _postgres_schema

    postgres_url = postgres_url or os.environ.get("ARENA_TEST_POSTGRES_URL") or None
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(dir=sqlite_dir) as tmp:
        print("sqlite: export ...", file=sys.stderr, flush=True)
        results["sqlite_export"] = measure_export(f"sqlite:///{Path(tmp) / 'export.db'}", messages=messages)
    if postgres_url:
        with _postgres_schema(postgres_url) as url:
            print("postgresql: export ...", file=sys.stderr, flush=True)
            results["postgres_export"] = measure_export(url, messages=messages)
    return results
