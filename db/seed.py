"""Synthetic rows for benchmarks and load tests: bulk inserts that bypass the visitor flows.

The benchmarks (``bench/``) and a few tests need many rows fast, so nothing here goes through
:mod:`db.actions`: rows are built in Python, consistent by construction, and inserted in bulk (Core
executemany; PostgreSQL ``COPY`` in :func:`load_rows`). Never call these on a database that visitors use.

- :func:`create_schema`: the tables, straight from the models (a throw-away database; no Alembic).
- :func:`seed_contestants`, :func:`prepare_vote_battles`: contestants, and open battles that each side
  has answered (what :func:`db.actions.record_vote` needs).
- :func:`bulk_votes` (over :func:`load_rows`): voted battles with their votes, by the million.
- :func:`seed_graded_replies`: graded dialogues with corrections for voted battles; every side's
  roll-up is then computed by :func:`db.boards.reply_stats.refill_side_stats`, exactly as migration 0005
  does (SQLite: the web app's benchmark file).
- :func:`seed_corrected_battles`: voted battles shaped like real ones for the export benchmark.
- :func:`seed_replay_results`: replay answers (``replay_results``) to the stored corrections, then their
  per-kind roll-up (:func:`db.boards.replay.refill_replay_tallies`, as migration 0010 does).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, func, insert, select
from sqlalchemy.exc import DBAPIError

from db.boards.replay import refill_replay_tallies
from db.boards.reply_stats import refill_side_stats
from db.models import Base, Battle, Contestant, Conversation, Correction, Message, Vote, utcnow

__all__ = [
    "MESSAGES_PER_CORRECTED_BATTLE",
    "REPLIES_PER_SIDE",
    "VOTE_CHOICES",
    "bulk_votes",
    "create_schema",
    "load_rows",
    "prepare_vote_battles",
    "seed_contestants",
    "seed_corrected_battles",
    "seed_graded_replies",
    "seed_replay_results",
]

VOTE_CHOICES = np.array(["a", "b", "tie", "both_bad"])  # this order: the seeded draws depend on it
Row = tuple[Any, ...]


def create_schema(engine: Engine) -> None:
    """Every table of the models, created at ``engine`` (those that exist are left alone)."""
    Base.metadata.create_all(engine)


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


def _skip_fk_triggers(conn: Connection) -> None:
    """Seeding only: let a superuser skip per-row FK triggers (the rows are consistent by construction)."""
    try:
        with conn.begin_nested():
            conn.exec_driver_sql("SET LOCAL session_replication_role = replica")
    except DBAPIError:
        pass  # not a superuser: load with the checks, just slower


def _sqlite_values(engine: Engine, table: str, cols: tuple[str, ...], rows: list[Row]) -> Iterable[Row]:
    """``rows`` as the SQLite driver takes them: each column through its type's own bind processor (the
    one SQLAlchemy would apply: UTC timestamps, JSON, booleans), without building a dict per row."""
    columns = Base.metadata.tables[table].columns
    processors = [columns[c].type.bind_processor(engine.dialect) for c in cols]
    if not any(processors):
        return rows
    steps = [(i, f) for i, f in enumerate(processors) if f is not None]

    def convert(row: Row) -> Row:
        values = list(row)
        for i, process in steps:
            values[i] = process(values[i])
        return tuple(values)

    return map(convert, rows)


def load_rows(engine: Engine, table: str, cols: tuple[str, ...], rows: list[Row]) -> None:
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


_BATTLE_COLS = ("id", "mode", "scenario", "status", "revealed_before_vote", "created_at", "updated_at",
                "closed_at")
_VOTE_COLS = ("battle_id", "choice", "created_at", "model_a_id", "model_b_id", "mode", "scenario", "revealed",
              "flagged", "with_corrections")


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
        choice = VOTE_CHOICES[rng.choice(4, size=size, p=[0.42, 0.42, 0.1, 0.06])]
        battle_ids = [str(uuid.uuid4()) for _ in range(size)]
        load_rows(engine, "battles", _BATTLE_COLS,
                  [(bid, "anonymous", "bench", "voted", False, now, now, now) for bid in battle_ids])
        load_rows(engine, "votes", _VOTE_COLS, [
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


# Graded replies: each side's dialogue is request, reply, correction, reply, correction (a chain of two),
# reply, request, reply, request, reply; a correction corrects the reply before it and is answered by the
# one after. Mistakes are drawn at random (the study's kinds plus ``regression`` and ``chatty``), and so is
# the person's verdict on each correction.
REPLIES_PER_SIDE = 5
_SCRIPT: tuple[str, ...] = ("request", "reply", "correction", "reply", "correction", "reply", "request",
                            "reply", "request", "reply")
_KINDS = ("wrong_year", "wrong_time", "bad_format", "wrong_duration", "regression", "chatty")
_ROLE = {"request": "user", "correction": "user", "reply": "assistant"}
_CONVERSATION_COLS = ("id", "battle_id", "side", "contestant_id", "system_prompt", "params")
_MESSAGE_COLS = ("id", "conversation_id", "position", "role", "kind", "content", "created_at", "first_try",
                 "superseded", "grader_label", "grader_mistakes")
_CORRECTION_COLS = ("battle_id", "conversation_id", "faulty_message_id", "feedback_message_id",
                    "next_reply_message_id", "outcome", "judged_by", "created_at", "judged_at")


def _mistakes(rng: np.random.Generator) -> list[str]:
    return [k for k in _KINDS if rng.random() < 0.12]


def _side_rows(
    conv: int, battle: str, first_id: int, rng: np.random.Generator, now: dt.datetime
) -> tuple[list[Row], list[Row]]:
    """One side's message and correction rows (``_MESSAGE_COLS``, ``_CORRECTION_COLS``); message ids
    from ``first_id``."""
    messages: list[Row] = []
    corrections: list[Row] = []
    for position, kind in enumerate(_SCRIPT):
        mistakes = _mistakes(rng) if kind == "reply" else None
        label = None if mistakes is None else ("correct" if not mistakes else "partial")
        messages.append((first_id + position, conv, position, _ROLE[kind], kind, "x", now, position == 1,
                         False, label, mistakes))
        if kind == "correction":
            outcome = ("fixed", "not_fixed", "unknown")[int(rng.integers(0, 3))]
            judged = outcome != "unknown"
            here = first_id + position
            corrections.append((battle, conv, here - 1, here, here + 1, outcome, "person" if judged else None,
                                now, now if judged else None))
    return messages, corrections


def seed_graded_replies(
    engine: Engine,
    *,
    replies: int,
    chunk_battles: int = 20_000,
    progress: Callable[[str], None] | None = None,
) -> int:
    """Give voted battles (oldest votes first) two graded sides each until ``replies`` replies are stored;
    returns the replies written. Battles that already have sides are not touched. ``progress`` is told
    the replies loaded after each chunk, and when the roll-up starts."""
    rng = np.random.default_rng(13)
    now = utcnow()
    battles_needed = -(-replies // (2 * REPLIES_PER_SIDE))
    with engine.connect() as conn:
        has_sides = select(Conversation.battle_id)
        voted = conn.execute(
            select(Vote.battle_id, Vote.model_a_id, Vote.model_b_id)
            .where(Vote.battle_id.not_in(has_sides)).order_by(Vote.id).limit(battles_needed)
        ).all()
        next_conv = int(conn.scalar(select(func.max(Conversation.id))) or 0) + 1
        next_message = int(conn.scalar(select(func.max(Message.id))) or 0) + 1
    written = 0
    for start in range(0, len(voted), chunk_battles):
        conversations: list[Row] = []
        messages: list[Row] = []
        corrections: list[Row] = []
        for battle, model_a, model_b in voted[start:start + chunk_battles]:
            for side, model in (("a", model_a), ("b", model_b)):
                conversations.append((next_conv, battle, side, model, "", {}))
                side_messages, side_corrections = _side_rows(next_conv, battle, next_message, rng, now)
                messages += side_messages
                corrections += side_corrections
                next_conv += 1
                next_message += len(_SCRIPT)
                written += REPLIES_PER_SIDE
        load_rows(engine, "conversations", _CONVERSATION_COLS, conversations)
        load_rows(engine, "messages", _MESSAGE_COLS, messages)
        load_rows(engine, "corrections", _CORRECTION_COLS, corrections)
        if progress is not None:
            progress(f"replies: {written:,} of {replies:,} loaded")
    if progress is not None:
        progress("replies: rolling up side_stats and side_kinds (db.boards.reply_stats.refill_side_stats)")
    with engine.begin() as conn:
        refill_side_stats(conn)
        conn.exec_driver_sql("ANALYZE")
    return written


# Corrected battles (the export benchmark's): two sides, each a request, a faulty reply, a correction and
# the following reply; replies carry timing, tokens and a grader label.
MESSAGES_PER_CORRECTED_BATTLE = 8
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


def _corrected_messages(n: int, conv_id: int, first_id: int, when: dt.datetime) -> list[dict[str, Any]]:
    """Battle ``n``'s four messages on one side (ids from ``first_id``): request, faulty reply,
    correction, fixed reply."""
    day, room = n % 28 + 1, f"R{n % 97}"
    texts = (("user", "request", _REQUEST.format(d=day, r=room)),
             ("assistant", "reply", _FAULTY.format(d=day, r=room)),
             ("user", "correction", _FEEDBACK),
             ("assistant", "reply", _FIXED.format(d=day, r=room)))
    return [
        {"id": first_id + position, "conversation_id": conv_id, "position": position, "role": role,
         "kind": kind, "content": content, "created_at": when, "first_try": position == 1,
         "superseded": False, "error": None, **(_REPLY[position] if kind == "reply" else _NOT_REPLY)}
        for position, (role, kind, content) in enumerate(texts)
    ]


def _seed_export_contestants(engine: Engine, now: dt.datetime) -> list[int]:
    """Ten contestants ``model-0`` ... ``model-9``; their ids in order."""
    with engine.begin() as conn:
        conn.execute(insert(Contestant), [
            {"slug": f"model-{i}", "display_name": f"Model {i}", "family": "bench", "source": "",
             "params": {}, "enabled": True, "created_at": now, "updated_at": now} for i in range(10)
        ])
        return list(conn.scalars(select(Contestant.id).order_by(Contestant.id)))


def seed_corrected_battles(engine: Engine, *, battles: int, chunk: int = 5_000) -> None:
    """Ten contestants and ``battles`` voted battles a second apart, of
    :data:`MESSAGES_PER_CORRECTED_BATTLE` messages, two corrections and one vote each, inserted in chunks
    (Core executemany) into an empty database."""
    now = utcnow()
    start_at = now - dt.timedelta(seconds=battles)
    models = _seed_export_contestants(engine, now)
    conv_id = msg_id = 0
    for start in range(0, battles, chunk):
        b_rows, c_rows, m_rows, k_rows, v_rows = [], [], [], [], []
        for n in range(start, start + min(chunk, battles - start)):
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
                m_rows += _corrected_messages(n, conv_id, msg_id + 1, when)
                msg_id += 4
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


_REPLAY_COLS = ("correction_id", "contestant_id", "own", "scenario", "outcome", "content", "grader_label",
                "grader_mistakes", "created_at")
REPLAY_OUTCOME_SHARES = {"fixed": 0.45, "not_fixed": 0.45, "regression": 0.10}


def seed_replay_results(engine: Engine, *, results: int, models_per_item: int = 4, chunk: int = 50_000,
                        progress: Callable[[str], None] | None = None) -> int:
    """Replay answers to the stored corrections (oldest first): ``models_per_item`` different contestants
    answer each correction, with outcomes drawn by :data:`REPLAY_OUTCOME_SHARES`, until ``results`` rows
    are stored; returns the rows written (fewer when there are too few corrections)."""
    rng = np.random.default_rng(29)
    now = utcnow()
    items = -(-results // models_per_item)
    with engine.connect() as conn:
        corrections = conn.execute(select(Correction.id, Conversation.contestant_id, Battle.scenario)
                                   .join(Conversation, Conversation.id == Correction.conversation_id)
                                   .join(Battle, Battle.id == Correction.battle_id)
                                   .order_by(Correction.id).limit(items)).all()
        contestants = np.array(conn.execute(select(Contestant.id)).scalars().all())
    outcomes = np.array(list(REPLAY_OUTCOME_SHARES))
    shares = np.array(list(REPLAY_OUTCOME_SHARES.values()))
    rows: list[Row] = []
    written = 0
    for correction_id, owner, scenario in corrections:
        picked = rng.choice(contestants, size=min(models_per_item, contestants.size), replace=False)
        for model, outcome in zip(picked, rng.choice(outcomes, size=picked.size, p=shares), strict=True):
            label = "correct" if outcome == "fixed" else "partial"
            rows.append((correction_id, int(model), int(model) == owner, scenario, str(outcome), "call()",
                         label, None if outcome == "fixed" else ["wrong_time"], now))
            written += 1
            if written >= results:
                break
        if len(rows) >= chunk or written >= results:
            load_rows(engine, "replay_results", _REPLAY_COLS, rows)
            rows = []
            if progress is not None:
                progress(f"replay: {written:,} of {results:,} answers loaded")
        if written >= results:
            break
    if rows:
        load_rows(engine, "replay_results", _REPLAY_COLS, rows)
    with engine.begin() as conn:
        refill_replay_tallies(conn)
        conn.exec_driver_sql("ANALYZE")
    return written
