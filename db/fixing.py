"""Queries behind the Fixing leaderboard: correction outcomes by judge, person-vs-grader pairs, the
grader's mistakes per reply, correction chains, automatic-arena battles; and the per-vote style
features of the Votes board's style control.

Two judges of one correction: the **person** (``Correction.outcome`` with ``judged_by = "person"``) and
the **grader**, whose verdict is the label of the reply that followed (``correct`` = fixed). The grader's
verdict needs no column of its own: it is the next reply's stored label, which the web app and the
automatic arena grade in the dialogue's context. Counts are SQL ``GROUP BY``s (rows grow with models);
the mistake sequences and chains are one row per graded reply / correction, for the measures that
follow a conversation (recurrence, turns to fix).

Filters as in ``db.aggregates``: ``scenario``, ``modes`` (None for all), ``since``/``until`` on the
battle's start (UTC, half-open), ``exclude_flagged``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from sqlalchemy import ColumnElement, Engine, String, and_, case, cast, func, or_, select
from sqlalchemy.orm import aliased

from db.aggregates import DEFAULT_MODES, _battle_filters, _check_filters, _model_counts, _model_index, _window
from db.checks import retry_read
from db.engine import read_session
from db.models import Battle, Conversation, Correction, Message, Vote
from db.views import ModelCounts

Judge = Literal["person", "grader"]
HUMAN_MODES: tuple[str, ...] = ("anonymous", "named", "direct")

_Next = aliased(Message)


@dataclass(frozen=True, slots=True)
class JudgeTable:
    """Per model, the 2×2 table of corrections both judges judged: (person fixed?, grader fixed?)."""

    models: tuple[str, ...]
    both_fixed: tuple[int, ...]
    person_only: tuple[int, ...]
    grader_only: tuple[int, ...]
    neither: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CorrectionLink:
    """One correction: the faulty reply, the reply that followed, and the judge's verdict (None: unjudged)."""

    model: str
    faulty_message_id: int
    next_reply_message_id: int
    fixed: bool | None


@dataclass(frozen=True, slots=True)
class GradedReply:
    model: str
    conversation_id: int
    mistakes: tuple[str, ...]


def _check(judge: str) -> None:
    if judge not in ("person", "grader"):
        raise ValueError(f"judge must be person or grader, got {judge!r}")


@retry_read
def fix_outcomes(
    engine: Engine,
    *,
    judge: Judge,
    scenario: str | None = None,
    modes: Sequence[str] | None = HUMAN_MODES,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    exclude_flagged: bool = True,
    models: Sequence[str] | None = None,
) -> ModelCounts:
    """Per model: corrections the judge found fixed, out of those it judged."""
    _check(judge)
    _check_filters(modes, since, until)
    where = _battle_filters(scenario, modes, since, until, exclude_flagged)
    if judge == "person":
        query = (
            select(Conversation.contestant_id, Correction.outcome, func.count())
            .join(Conversation, Conversation.id == Correction.conversation_id)
            .join(Battle, Battle.id == Correction.battle_id)
            .where(Correction.judged_by == "person", Correction.outcome != "unknown", *where)
            .group_by(Conversation.contestant_id, Correction.outcome)
        )
    else:
        verdict = case((_Next.grader_label == "correct", "fixed"), else_="not_fixed")
        query = (
            select(Conversation.contestant_id, verdict, func.count())
            .select_from(Correction)
            .join(Conversation, Conversation.id == Correction.conversation_id)
            .join(Battle, Battle.id == Correction.battle_id)
            .join(_Next, _Next.id == Correction.next_reply_message_id)
            .where(_Next.grader_label.is_not(None), *where)
            .group_by(Conversation.contestant_id, verdict)
        )
    with read_session(engine) as session:
        return _model_counts(session, models, session.execute(query).all(), "fixed")


@retry_read
def judge_table(
    engine: Engine,
    *,
    scenario: str | None = None,
    modes: Sequence[str] | None = HUMAN_MODES,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    exclude_flagged: bool = True,
    models: Sequence[str] | None = None,
) -> JudgeTable:
    """Corrections judged by a person whose next reply the grader labelled, as per-model 2×2 tables."""
    _check_filters(modes, since, until)
    grader_fixed = case((_Next.grader_label == "correct", 1), else_=0)
    query = (
        select(Conversation.contestant_id, Correction.outcome, grader_fixed, func.count())
        .select_from(Correction)
        .join(Conversation, Conversation.id == Correction.conversation_id)
        .join(Battle, Battle.id == Correction.battle_id)
        .join(_Next, _Next.id == Correction.next_reply_message_id)
        .where(Correction.judged_by == "person", Correction.outcome != "unknown",
               _Next.grader_label.is_not(None),
               *_battle_filters(scenario, modes, since, until, exclude_flagged))
        .group_by(Conversation.contestant_id, Correction.outcome, grader_fixed)
    )
    with read_session(engine) as session:
        slugs, index = _model_index(session, models)
        rows = session.execute(query).all()
    cells = [[0, 0, 0, 0] for _ in slugs]
    for contestant_id, outcome, by_grader, count in rows:
        i = index.get(contestant_id)
        if i is None:
            continue
        person = outcome == "fixed"
        cells[i][(0 if by_grader else 1) if person else (2 if by_grader else 3)] += int(count)
    return JudgeTable(slugs, *(tuple(c[k] for c in cells) for k in range(4)))


@retry_read
def correction_links(
    engine: Engine,
    *,
    judge: Judge,
    scenario: str | None = None,
    modes: Sequence[str] | None = HUMAN_MODES,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    exclude_flagged: bool = True,
) -> list[CorrectionLink]:
    """Every correction with a reply after it, oldest first, with the judge's verdict."""
    _check(judge)
    _check_filters(modes, since, until)
    query = (
        select(Conversation.contestant_id, Correction.faulty_message_id, Correction.next_reply_message_id,
               Correction.outcome, Correction.judged_by, _Next.grader_label)
        .select_from(Correction)
        .join(Conversation, Conversation.id == Correction.conversation_id)
        .join(Battle, Battle.id == Correction.battle_id)
        .join(_Next, _Next.id == Correction.next_reply_message_id)
        .where(*_battle_filters(scenario, modes, since, until, exclude_flagged))
        .order_by(Correction.id)
    )
    with read_session(engine) as session:
        slugs, index = _model_index(session, None)
        rows = session.execute(query).all()
    by_id = {cid: slugs[i] for cid, i in index.items()}
    links = []
    for contestant_id, faulty, following, outcome, judged_by, label in rows:
        assert following is not None  # inner join on the next reply
        if judge == "person":
            fixed = None if judged_by != "person" or outcome == "unknown" else outcome == "fixed"
        else:
            fixed = None if label is None else label == "correct"
        links.append(CorrectionLink(by_id[contestant_id], faulty, following, fixed))
    return links


def _mistake_flag(kind: str) -> ColumnElement[int]:
    """1 when a reply's stored mistakes include ``kind`` (the JSON list read as text: both backends)."""
    return case((cast(Message.grader_mistakes, String).like(f'%"{kind}"%'), 1), else_=0)


@dataclass(frozen=True, slots=True)
class ReplyFlags:
    """Per model (in ``models`` order): current graded replies, and those with a regression or chatty."""

    models: tuple[str, ...]
    graded: tuple[int, ...]
    regressions: tuple[int, ...]
    chatty: tuple[int, ...]


def _graded_where() -> ColumnElement[bool]:
    return and_(Message.kind == "reply", Message.grader_label.is_not(None), Message.superseded.is_(False))


@retry_read
def reply_flags(
    engine: Engine,
    *,
    scenario: str | None = None,
    modes: Sequence[str] | None = HUMAN_MODES,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    exclude_flagged: bool = True,
    models: Sequence[str] | None = None,
) -> ReplyFlags:
    """One ``GROUP BY`` per model: graded replies, regressions, chatty replies."""
    _check_filters(modes, since, until)
    query = (
        select(Conversation.contestant_id, func.count(), func.sum(_mistake_flag("regression")),
               func.sum(_mistake_flag("chatty")))
        .select_from(Message)
        .join(Conversation, Conversation.id == Message.conversation_id)
        .join(Battle, Battle.id == Conversation.battle_id)
        .where(_graded_where(), *_battle_filters(scenario, modes, since, until, exclude_flagged))
        .group_by(Conversation.contestant_id)
    )
    with read_session(engine) as session:
        slugs, index = _model_index(session, models)
        rows = session.execute(query).all()
    cells = [[0, 0, 0] for _ in slugs]
    for contestant_id, *values in rows:
        i = index.get(contestant_id)
        if i is not None:
            cells[i] = [int(v or 0) for v in values]
    return ReplyFlags(slugs, *(tuple(c[k] for c in cells) for k in range(3)))


@retry_read
def graded_replies(
    engine: Engine,
    *,
    scenario: str | None = None,
    modes: Sequence[str] | None = HUMAN_MODES,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    exclude_flagged: bool = True,
    min_replies: int = 1,
) -> list[GradedReply]:
    """Current (not superseded) graded replies with their mistakes, in conversation order, of the
    conversations with at least ``min_replies`` of them (a recurrence needs three: made, cleared, back)."""
    _check_filters(modes, since, until)
    where = [_graded_where(), *_battle_filters(scenario, modes, since, until, exclude_flagged)]
    query = (
        select(Conversation.contestant_id, Message.conversation_id, Message.grader_mistakes)
        .join(Conversation, Conversation.id == Message.conversation_id)
        .join(Battle, Battle.id == Conversation.battle_id)
        .where(*where)
        .order_by(Message.conversation_id, Message.position)
    )
    if min_replies > 1:
        long_enough = (
            select(Message.conversation_id)
            .join(Conversation, Conversation.id == Message.conversation_id)
            .join(Battle, Battle.id == Conversation.battle_id)
            .where(*where)
            .group_by(Message.conversation_id)
            .having(func.count() >= min_replies)
        )
        query = query.where(Message.conversation_id.in_(long_enough))
    with read_session(engine) as session:
        slugs, index = _model_index(session, None)
        rows = session.execute(query).all()
    by_id = {cid: slugs[i] for cid, i in index.items()}
    return [GradedReply(by_id[cid], conv, tuple(mistakes or ())) for cid, conv, mistakes in rows]


@retry_read
def auto_battle_ids(
    engine: Engine,
    *,
    scenario: str | None = None,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    exclude_flagged: bool = True,
) -> list[str]:
    """Automatic-arena battles (mode ``auto``), oldest first."""
    _check_filters(("auto",), since, until)
    # Sorted here, not in SQL: ordering by (created_at, id) makes SQLite walk that index over every
    # battle (0.7 s at 200k), while the unordered filter is one quick scan; auto battles are few.
    query = select(Battle.id, Battle.created_at).where(
        *_battle_filters(scenario, ("auto",), since, until, exclude_flagged)
    )
    with read_session(engine) as session:
        rows = session.execute(query).all()
    return [battle_id for battle_id, _ in sorted(rows, key=lambda row: (row[1], row[0]))]


STYLE_COLUMNS: tuple[str, ...] = ("length", "chatty", "apology", "multiline")
VOTE_CODES: dict[str, int] = {"a": 0, "b": 1, "tie": 2, "both_bad": 3}  # ranking.counts' outcome codes


def _vote_filters(
    scenario: str | None,
    modes: Sequence[str] | None,
    since: dt.datetime | None,
    until: dt.datetime | None,
    corrections_only: bool,
    exclude_flagged: bool,
    exclude_revealed: bool,
) -> list[ColumnElement[bool]]:
    """The counted-vote predicate of ``db.aggregates.pairwise_counts``."""
    _check_filters(modes, since, until)
    where: list[ColumnElement[bool]] = _window(Vote.created_at, since, until)
    if scenario is not None:
        where.append(Vote.scenario == scenario)
    if modes is not None:
        where.append(Vote.mode.in_(list(modes)))
    if corrections_only:
        where.append(Vote.with_corrections.is_(True))
    if exclude_flagged:
        where.append(Vote.flagged == False)  # noqa: E712
    if exclude_revealed:
        where.append(Vote.revealed == False)  # noqa: E712
    return where


@dataclass(frozen=True)
class CountedVotes:
    """The counted votes one by one, oldest first: model indices into ``models``, ``VOTE_CODES`` outcome,
    visitor id (-1 when unknown)."""

    models: tuple[str, ...]
    model_a: np.ndarray
    model_b: np.ndarray
    outcome: np.ndarray
    visitor: np.ndarray


@retry_read
def counted_votes(
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
) -> CountedVotes:
    """The votes ``pairwise_counts`` counts, one row each (for the anomalous-voter test)."""
    where = _vote_filters(scenario, modes, since, until, corrections_only, exclude_flagged, exclude_revealed)
    query = (
        select(Vote.model_a_id, Vote.model_b_id, Vote.choice, Vote.visitor_id)
        .where(*where)
        .order_by(Vote.created_at, Vote.id)
    )
    with read_session(engine) as session:
        slugs, index = _model_index(session, models)
        rows = [r for r in session.execute(query).all() if r[0] in index and r[1] in index]
    return CountedVotes(
        models=slugs,
        model_a=np.array([index[r[0]] for r in rows], dtype=np.int64),
        model_b=np.array([index[r[1]] for r in rows], dtype=np.int64),
        outcome=np.array([VOTE_CODES[r[2]] for r in rows], dtype=np.int64),
        visitor=np.array([-1 if r[3] is None else r[3] for r in rows], dtype=np.int64),
    )


@dataclass(frozen=True)
class StyleBattles:
    """One row per counted vote: model indices into ``models``, outcome (1 a won, 0 b won, 0.5 tie or
    both bad) and per-side means over the side's current replies of ``STYLE_COLUMNS``: characters, share
    graded ``chatty``, share apologising ("sorry", "apolog"), share longer than one line."""

    models: tuple[str, ...]
    model_a: np.ndarray
    model_b: np.ndarray
    outcome: np.ndarray
    features_a: np.ndarray
    features_b: np.ndarray


@retry_read
def vote_style_features(
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
) -> StyleBattles:
    """The votes the Votes board counts (same filters as ``pairwise_counts``) with style features."""
    where = _vote_filters(scenario, modes, since, until, corrections_only, exclude_flagged, exclude_revealed)
    text = func.lower(Message.content)
    chatty = _mistake_flag("chatty")
    apology = case((or_(text.like("%sorry%"), text.like("%apolog%")), 1.0), else_=0.0)
    multiline = case((func.trim(Message.content).contains("\n"), 1.0), else_=0.0)
    query = (
        select(Vote.id, Vote.model_a_id, Vote.model_b_id, Vote.choice, Conversation.side,
               func.avg(func.length(Message.content)), func.avg(chatty), func.avg(apology),
               func.avg(multiline))
        .join(Conversation, Conversation.battle_id == Vote.battle_id)
        .join(Message, Message.conversation_id == Conversation.id)
        .where(Message.kind == "reply", Message.superseded.is_(False), *where)
        .group_by(Vote.id, Vote.model_a_id, Vote.model_b_id, Vote.choice, Conversation.side)
        .order_by(Vote.id)
    )
    with read_session(engine) as session:
        slugs, index = _model_index(session, models)
        rows = session.execute(query).all()
    pairs: dict[int, tuple[int, int, float]] = {}
    sides: dict[tuple[int, str], list[float]] = {}
    outcome = {"a": 1.0, "b": 0.0}  # tie and both_bad: 0.5
    for vote_id, a_id, b_id, choice, side, *values in rows:
        if a_id in index and b_id in index:
            pairs[vote_id] = (index[a_id], index[b_id], outcome.get(choice, 0.5))
            sides[(vote_id, side)] = [float(v or 0.0) for v in values]
    keep = [v for v in pairs if (v, "a") in sides and (v, "b") in sides]  # both sides replied
    width = len(STYLE_COLUMNS)
    return StyleBattles(
        models=slugs,
        model_a=np.array([pairs[v][0] for v in keep], dtype=np.int64),
        model_b=np.array([pairs[v][1] for v in keep], dtype=np.int64),
        outcome=np.array([pairs[v][2] for v in keep], dtype=np.float64),
        features_a=np.array([sides[(v, "a")] for v in keep], dtype=np.float64).reshape(len(keep), width),
        features_b=np.array([sides[(v, "b")] for v in keep], dtype=np.float64).reshape(len(keep), width),
    )
