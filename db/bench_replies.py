"""Bulk-loaded graded conversations for the Fixing board's benchmark (``python -m webapp bench --replies``).

Each voted battle's two sides get the same five-reply dialogue shape: request, reply, correction, reply,
correction (a chain of two), reply, request, reply, request, reply: five graded replies and two
corrections per side,
mistakes drawn at random (the study's kinds plus ``regression`` and ``chatty``), the person's verdict on
each correction random as well. Rows are inserted with explicit ids in chunks, then every conversation's
side's roll-up is computed by :func:`db.boards.reply_stats.refill_side_stats`, exactly as migration 0005 does.
SQLite only (the web app's benchmark file): the rows go through one executemany per chunk.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import numpy as np
from sqlalchemy import Engine, func, select

from db.bench import _load
from db.boards.reply_stats import refill_side_stats
from db.models import Conversation, Message, Vote, utcnow

REPLIES_PER_SIDE = 5
# (kind, role) in order; a correction corrects the reply before it and is answered by the one after.
SCRIPT: tuple[str, ...] = ("request", "reply", "correction", "reply", "correction", "reply", "request",
                           "reply", "request", "reply")
KINDS = ("wrong_year", "wrong_time", "bad_format", "wrong_duration", "regression", "chatty")
_ROLE = {"request": "user", "correction": "user", "reply": "assistant"}
_CONVERSATION_COLS = ("id", "battle_id", "side", "contestant_id", "system_prompt", "params")
_MESSAGE_COLS = ("id", "conversation_id", "position", "role", "kind", "content", "created_at", "first_try",
                 "superseded", "grader_label", "grader_mistakes")
_CORRECTION_COLS = ("battle_id", "conversation_id", "faulty_message_id", "feedback_message_id",
                    "next_reply_message_id", "outcome", "judged_by", "created_at", "judged_at")


def _mistakes(rng: np.random.Generator) -> list[str]:
    return [k for k in KINDS if rng.random() < 0.12]


def _side_rows(
    conv: int, battle: str, first_id: int, rng: np.random.Generator, now: dt.datetime
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    messages: list[tuple[Any, ...]] = []
    corrections: list[tuple[Any, ...]] = []
    for position, kind in enumerate(SCRIPT):
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
        conversations: list[tuple[Any, ...]] = []
        messages: list[tuple[Any, ...]] = []
        corrections: list[tuple[Any, ...]] = []
        for battle, model_a, model_b in voted[start:start + chunk_battles]:
            for side, model in (("a", model_a), ("b", model_b)):
                conversations.append((next_conv, battle, side, model, "", {}))
                side_messages, side_corrections = _side_rows(next_conv, battle, next_message, rng, now)
                messages += side_messages
                corrections += side_corrections
                next_conv += 1
                next_message += len(SCRIPT)
                written += REPLIES_PER_SIDE
        _load(engine, "conversations", _CONVERSATION_COLS, conversations)
        _load(engine, "messages", _MESSAGE_COLS, messages)
        _load(engine, "corrections", _CORRECTION_COLS, corrections)
        if progress is not None:
            progress(f"replies: {written:,} of {replies:,} loaded")
    if progress is not None:
        progress("replies: rolling up side_stats (db.boards.reply_stats.refill_side_stats)")
    with engine.begin() as conn:
        refill_side_stats(conn)
        conn.exec_driver_sql("ANALYZE")
    return written
