"""Aggregations, all done by the database with ``GROUP BY``: leaderboard counts and admin figures (the rate
limits' counts are in :mod:`db.actions.limits`).

The leaderboard cost must grow with models², not with votes: SQL reduces millions of votes to at most
``n² × 4`` rows, which numpy scatters into dense arrays. Arrays are indexed like ``models``: by default
every contestant ordered by slug, so the pair, fix and first-try arrays of one page line up.

The three leaderboard counts take the keyword filters of ``db.VoteFilters`` (``modes``
defaults to anonymous battles only, as the public leaderboard): pairs the vote filters, fixes and first
tries the battle ones (no ``corrections_only`` or ``exclude_revealed``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, Unpack

import numpy as np
from sqlalchemy import Engine, case, func, select

from db.checks import require_aware, retry_read
from db.engine import read_session
from db.models import Base, Battle, Contestant, Conversation, Message, SideStats, Vote
from db.views import HourCount, LatencyFigures, ModelCounts, PairCounts
from db.vote_filters import BattleFilterArgs, VoteFilterArgs, VoteFilters, model_counts, model_index


@retry_read
def pairwise_counts(
    engine: Engine, *, models: Sequence[str] | None = None, **filters: Unpack[VoteFilterArgs]
) -> PairCounts:
    """Wins, ties and both-bad counts over model pairs (filters: ``db.vote_filters``)."""
    where = VoteFilters.of(filters, votes=True).vote_conditions()
    query = (
        select(Vote.model_a_id, Vote.model_b_id, Vote.choice, func.count())
        .where(*where)
        .group_by(Vote.model_a_id, Vote.model_b_id, Vote.choice)
    )
    with read_session(engine) as session:
        slugs, index = model_index(session, models)
        rows = session.execute(query).all()
    n = len(slugs)
    wins = np.zeros((n, n), dtype=np.int64)
    ties = np.zeros((n, n), dtype=np.int64)
    both_bad = np.zeros((n, n), dtype=np.int64)
    for a_id, b_id, choice, count in rows:
        i, j = index.get(a_id), index.get(b_id)
        if i is None or j is None:
            continue
        if choice == "a":
            wins[i, j] += count
        elif choice == "b":
            wins[j, i] += count
        else:
            target = ties if choice == "tie" else both_bad
            target[i, j] += count
            target[j, i] += count
    return PairCounts(models=slugs, wins=wins, ties=ties, both_bad=both_bad)


@retry_read
def fix_counts(
    engine: Engine, *, models: Sequence[str] | None = None, **filters: Unpack[BattleFilterArgs]
) -> ModelCounts:
    """Per model: corrections judged ``fixed`` out of those judged fixed or not fixed (by any judge),
    summed from the per-side roll-up (``side_stats``)."""
    where = VoteFilters.of(filters).side_conditions()
    query = (
        select(SideStats.contestant_id, func.sum(SideStats.judged_fixed), func.sum(SideStats.judged))
        .where(SideStats.judged > 0, *where)
        .group_by(SideStats.contestant_id)
    )
    with read_session(engine) as session:
        rows = session.execute(query).all()
        split = []
        for contestant_id, fixed, judged in rows:
            split += [(contestant_id, "fixed", int(fixed or 0)),
                      (contestant_id, "not_fixed", int(judged or 0) - int(fixed or 0))]
        return model_counts(session, models, split, "fixed")


@retry_read
def first_try_counts(
    engine: Engine, *, models: Sequence[str] | None = None, **filters: Unpack[BattleFilterArgs]
) -> ModelCounts:
    """Per model: first replies of a conversation labelled ``correct`` out of those the grader labelled."""
    where = VoteFilters.of(filters).side_conditions()
    # The first try's label is rolled up with its side (db.boards.reply_stats): one narrow row per side,
    # no join.
    query = (
        select(SideStats.contestant_id, SideStats.first_try_label, func.count())
        .where(SideStats.first_try_label.is_not(None), *where)
        .group_by(SideStats.contestant_id, SideStats.first_try_label)
    )
    with read_session(engine) as session:
        return model_counts(session, models, session.execute(query).all(), "correct")


# --- admin ---------------------------------------------------------------------------------------------


@retry_read
def admin_battles_per_hour(engine: Engine, *, since: dt.datetime) -> list[HourCount]:
    """Battles opened per UTC hour since ``since`` (hours without battles are left out)."""
    require_aware(since, what="since")
    if engine.dialect.name == "sqlite":
        bucket: Any = func.strftime("%Y-%m-%d %H:00:00", Battle.created_at)
    else:
        bucket = func.date_trunc("hour", func.timezone("UTC", Battle.created_at))
    query = (
        select(bucket.label("hour"), func.count())
        .where(Battle.created_at >= since)
        .group_by(bucket)
        .order_by(bucket)
    )
    with read_session(engine) as session:
        rows = session.execute(query).all()
    out = []
    for hour, count in rows:
        if isinstance(hour, str):
            hour = dt.datetime.fromisoformat(hour)
        out.append(HourCount(hour=hour.replace(tzinfo=dt.UTC), count=int(count)))
    return out


@retry_read
def admin_latency(engine: Engine, *, since: dt.datetime) -> list[LatencyFigures]:
    """Per contestant since ``since``: replies, errors, mean time to first token and total latency."""
    require_aware(since, what="since")
    errors = func.sum(case((Message.error.is_not(None), 1), else_=0))
    query = (
        select(
            Contestant.slug,
            func.count(),
            errors,
            func.avg(Message.ttft_ms),
            func.avg(Message.total_ms),
            func.max(Message.total_ms),
            func.coalesce(func.sum(Message.completion_tokens), 0),
        )
        .select_from(Message)
        .join(Conversation, Conversation.id == Message.conversation_id)
        .join(Contestant, Contestant.id == Conversation.contestant_id)
        .where(Message.kind == "reply", Message.created_at >= since)
        .group_by(Contestant.slug)
        .order_by(Contestant.slug)
    )
    with read_session(engine) as session:
        rows = session.execute(query).all()
    return [
        LatencyFigures(
            model=slug,
            replies=int(n),
            errors=int(n_err or 0),
            mean_ttft_ms=float(ttft) if ttft is not None else None,
            mean_total_ms=float(total) if total is not None else None,
            max_total_ms=float(mx) if mx is not None else None,
            completion_tokens=int(tokens or 0),
        )
        for slug, n, n_err, ttft, total, mx, tokens in rows
    ]


@retry_read
def table_counts(engine: Engine) -> dict[str, int]:
    """Row count of every table (``python -m db stats``)."""
    with read_session(engine) as session:
        return {
            name: int(session.scalar(select(func.count()).select_from(table)) or 0)
            for name, table in Base.metadata.tables.items()
        }


@retry_read
def message_counts(engine: Engine) -> dict[str, int]:
    """Stored visitor requests and replies, and ``(conversation, position)`` pairs held by more than one
    message (``duplicated``: none unless a write was repeated) — what ``python -m webapp bench --visitors``
    checks against what its visitors were told."""
    duplicated = (
        select(Message.conversation_id, Message.position)
        .group_by(Message.conversation_id, Message.position)
        .having(func.count() > 1)
        .subquery()
    )
    with read_session(engine) as session:
        return {
            "requests": int(session.scalar(select(func.count()).where(Message.kind == "request")) or 0),
            "replies": int(session.scalar(select(func.count()).where(Message.kind == "reply")) or 0),
            "duplicated": int(session.scalar(select(func.count()).select_from(duplicated)) or 0),
        }
