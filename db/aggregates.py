"""Aggregations, all done by the database with ``GROUP BY``: leaderboard counts, rate limits, admin figures.

The leaderboard cost must grow with models², not with votes: SQL reduces millions of votes to at most
``n² × 4`` rows, which numpy scatters into dense arrays. Arrays are indexed like ``models``: by default
every contestant ordered by slug, so the pair, fix and first-try arrays of one page line up.

Filters shared by the three leaderboard counts: ``scenario`` (one slug or None for all), ``modes`` (default
anonymous battles only, as the public leaderboard; None for all modes), ``since``/``until`` (UTC, half-open
``[since, until)``; the vote time for pairs, the battle start for fixes and first tries),
``exclude_flagged``. Pairs also take ``corrections_only`` (battles in which someone sent a correction) and
``exclude_revealed`` (votes cast after identities were shown).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import ColumnElement, Engine, case, func, select
from sqlalchemy.orm import Session

from db.checks import require_aware, require_choice, require_int, require_text, retry_read
from db.engine import read_session
from db.errors import InvalidInput
from db.models import (
    MODES,
    Base,
    Battle,
    Contestant,
    Conversation,
    Message,
    SideStats,
    Visitor,
    Vote,
)
from db.views import HourCount, LatencyFigures, ModelCounts, PairCounts

DEFAULT_MODES: tuple[str, ...] = ("anonymous",)


def _model_index(session: Session, models: Sequence[str] | None) -> tuple[tuple[str, ...], dict[int, int]]:
    """The slug order of the arrays and a map contestant id -> row index (ids outside it are dropped)."""
    rows = session.execute(select(Contestant.id, Contestant.slug).order_by(Contestant.slug)).all()
    if models is None:
        slugs = tuple(slug for _, slug in rows)
    else:
        slugs = tuple(models)
        if len(set(slugs)) != len(slugs):
            raise ValueError("models contains duplicates")
    position = {slug: i for i, slug in enumerate(slugs)}
    return slugs, {cid: position[slug] for cid, slug in rows if slug in position}


def _check_filters(modes: Sequence[str] | None, since: dt.datetime | None, until: dt.datetime | None) -> None:
    for mode in modes or ():
        require_choice(mode, MODES, what="mode")
    require_aware(since, what="since")
    require_aware(until, what="until")


def _window(column: Any, since: dt.datetime | None, until: dt.datetime | None) -> list[ColumnElement[bool]]:
    clauses: list[ColumnElement[bool]] = []
    if since is not None:
        clauses.append(column >= since)
    if until is not None:
        clauses.append(column < until)
    return clauses


@retry_read
def pairwise_counts(
    engine: Engine,
    *,
    scenario: str | None = None,
    modes: Sequence[str] | None = DEFAULT_MODES,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    corrections_only: bool = False,
    exclude_flagged: bool = True,
    exclude_revealed: bool = True,
    models: Sequence[str] | None = None,
) -> PairCounts:
    """Wins, ties and both-bad counts over model pairs (see the module doc for the filters)."""
    _check_filters(modes, since, until)
    where: list[ColumnElement[bool]] = _window(Vote.created_at, since, until)
    if scenario is not None:
        where.append(Vote.scenario == scenario)
    if modes is not None:
        where.append(Vote.mode.in_(list(modes)))
    if corrections_only:
        where.append(Vote.with_corrections.is_(True))
    # ``== False`` (not ``IS``) so that the partial index ix_votes_counted_pairs matches the predicate.
    if exclude_flagged:
        where.append(Vote.flagged == False)  # noqa: E712
    if exclude_revealed:
        where.append(Vote.revealed == False)  # noqa: E712
    query = (
        select(Vote.model_a_id, Vote.model_b_id, Vote.choice, func.count())
        .where(*where)
        .group_by(Vote.model_a_id, Vote.model_b_id, Vote.choice)
    )
    with read_session(engine) as session:
        slugs, index = _model_index(session, models)
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


def _fact_filters(
    facts: tuple[Any, Any, Any, ColumnElement[bool]],
    scenario: str | None,
    modes: Sequence[str] | None,
    since: dt.datetime | None,
    until: dt.datetime | None,
    exclude_flagged: bool,
) -> list[ColumnElement[bool]]:
    """The leaderboard filters on ``facts``: (start time, scenario, mode columns, "not flagged")."""
    started, scenario_column, mode_column, not_flagged = facts
    where = _window(started, since, until)
    if scenario is not None:
        where.append(scenario_column == scenario)
    if modes is not None:
        where.append(mode_column.in_(list(modes)))
    if exclude_flagged:
        where.append(not_flagged)
    return where


def _battle_filters(
    scenario: str | None,
    modes: Sequence[str] | None,
    since: dt.datetime | None,
    until: dt.datetime | None,
    exclude_flagged: bool,
) -> list[ColumnElement[bool]]:
    facts = (Battle.created_at, Battle.scenario, Battle.mode, Battle.status != "flagged")
    return _fact_filters(facts, scenario, modes, since, until, exclude_flagged)


def side_filters(
    scenario: str | None,
    modes: Sequence[str] | None,
    since: dt.datetime | None,
    until: dt.datetime | None,
    exclude_flagged: bool,
) -> list[ColumnElement[bool]]:
    """``_battle_filters`` on the battle facts copied into ``side_stats``."""
    facts = (SideStats.started_at, SideStats.scenario, SideStats.mode, SideStats.flagged.is_(False))
    return _fact_filters(facts, scenario, modes, since, until, exclude_flagged)


def _model_counts(
    session: Session, models: Sequence[str] | None, rows: Sequence[Any], success: str
) -> ModelCounts:
    slugs, index = _model_index(session, models)
    successes = np.zeros(len(slugs), dtype=np.int64)
    trials = np.zeros(len(slugs), dtype=np.int64)
    for contestant_id, label, count in rows:
        i = index.get(contestant_id)
        if i is None:
            continue
        trials[i] += count
        if label == success:
            successes[i] += count
    return ModelCounts(models=slugs, successes=successes, trials=trials)


@retry_read
def fix_counts(
    engine: Engine,
    *,
    scenario: str | None = None,
    modes: Sequence[str] | None = DEFAULT_MODES,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    exclude_flagged: bool = True,
    models: Sequence[str] | None = None,
) -> ModelCounts:
    """Per model: corrections judged ``fixed`` out of those judged fixed or not fixed (by any judge),
    summed from the per-side roll-up (``side_stats``)."""
    _check_filters(modes, since, until)
    query = (
        select(SideStats.contestant_id, func.sum(SideStats.judged_fixed), func.sum(SideStats.judged))
        .where(SideStats.judged > 0, *side_filters(scenario, modes, since, until, exclude_flagged))
        .group_by(SideStats.contestant_id)
    )
    with read_session(engine) as session:
        rows = session.execute(query).all()
        split = []
        for contestant_id, fixed, judged in rows:
            split += [(contestant_id, "fixed", int(fixed or 0)),
                      (contestant_id, "not_fixed", int(judged or 0) - int(fixed or 0))]
        return _model_counts(session, models, split, "fixed")


@retry_read
def first_try_counts(
    engine: Engine,
    *,
    scenario: str | None = None,
    modes: Sequence[str] | None = DEFAULT_MODES,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    exclude_flagged: bool = True,
    models: Sequence[str] | None = None,
) -> ModelCounts:
    """Per model: first replies of a conversation labelled ``correct`` out of those the grader labelled."""
    _check_filters(modes, since, until)
    # The first try's label is rolled up with its side (db.reply_stats): one narrow row per side, no join.
    query = (
        select(SideStats.contestant_id, SideStats.first_try_label, func.count())
        .where(
            SideStats.first_try_label.is_not(None),
            *side_filters(scenario, modes, since, until, exclude_flagged),
        )
        .group_by(SideStats.contestant_id, SideStats.first_try_label)
    )
    with read_session(engine) as session:
        return _model_counts(session, models, session.execute(query).all(), "correct")


# --- rate limits ---------------------------------------------------------------------------------------


def _whose(
    visitor_id: int | None, address_hash: str | None, column: Any = Battle.visitor_id
) -> ColumnElement[bool]:
    """Rows (battles unless ``column`` says otherwise) of one visitor, or of every visitor seen from one
    address hash (exactly one given)."""
    if (visitor_id is None) == (address_hash is None):
        raise InvalidInput("give exactly one of visitor_id and address_hash")
    if visitor_id is not None:
        require_int(visitor_id, what="visitor id")
        return column == visitor_id
    require_text(address_hash or "", what="address hash", max_chars=128)
    same_address = select(Visitor.id).where(Visitor.address_hash == address_hash)
    return column.in_(same_address)


def _count_since(
    engine: Engine, table: Any, *, since: dt.datetime, visitor_id: int | None, address_hash: str | None
) -> int:
    """Rows of ``table`` (battles or votes) created at or after ``since`` by the visitor or the address."""
    require_aware(since, what="since")
    whose = _whose(visitor_id, address_hash, table.visitor_id)
    with read_session(engine) as session:
        return int(session.scalar(select(func.count()).where(whose, table.created_at >= since)) or 0)


@retry_read
def count_battles_since(
    engine: Engine, *, since: dt.datetime, visitor_id: int | None = None, address_hash: str | None = None
) -> int:
    """Battles opened at or after ``since`` by the visitor, or from the address (battles-per-hour limit)."""
    return _count_since(engine, Battle, since=since, visitor_id=visitor_id, address_hash=address_hash)


@retry_read
def count_votes_since(
    engine: Engine, *, since: dt.datetime, visitor_id: int | None = None, address_hash: str | None = None
) -> int:
    """Votes cast at or after ``since`` by the visitor, or from the address (the daily vote cap)."""
    return _count_since(engine, Vote, since=since, visitor_id=visitor_id, address_hash=address_hash)


def _count_messages(
    engine: Engine, *, kinds: Sequence[str], whose: ColumnElement[bool], since: dt.datetime
) -> int:
    require_aware(since, what="since")
    query = (
        select(func.count())
        .select_from(Message)
        .join(Conversation, Conversation.id == Message.conversation_id)
        .join(Battle, Battle.id == Conversation.battle_id)
        .where(whose, Message.kind.in_(list(kinds)), Message.created_at >= since)
    )
    with read_session(engine) as session:
        return int(session.scalar(query) or 0)


@retry_read
def count_messages_since(engine: Engine, *, visitor_id: int, since: dt.datetime) -> int:
    """Messages the visitor wrote (requests and corrections) at or after ``since``.

    A turn sent to both sides is two messages (one per side): callers set limits accordingly.
    """
    whose = _whose(visitor_id, None)
    return _count_messages(engine, kinds=("request", "correction"), whose=whose, since=since)


@retry_read
def count_generations_since(
    engine: Engine, *, since: dt.datetime, visitor_id: int | None = None, address_hash: str | None = None
) -> int:
    """Replies generated at or after ``since`` for the visitor, or for every visitor of the address.

    Every generation counts: each side of a turn, every retry (a superseded reply is still a row) and
    failed generations (a reply row with an error).
    """
    return _count_messages(engine, kinds=("reply",), whose=_whose(visitor_id, address_hash), since=since)


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
