"""Queries behind the Fixing leaderboard: correction outcomes by judge, person-vs-grader pairs, turns
to fix, the per-model reply flags, correction links and graded replies one by one (for tests and
research; the board reads only aggregates), automatic-arena battles. The Votes board's per-vote
queries are in ``db.boards.vote_features``.

Two judges of one correction: the **person** (``Correction.outcome`` with ``judged_by = "person"``) and
the **grader**, whose verdict is the label of the reply that followed (``correct`` = fixed). The grader's
verdict needs no column of its own: it is the next reply's stored label, which the web app and the
automatic arena grade in the dialogue's context. Every figure the board shows is an SQL ``GROUP BY``
(result rows grow with models): the measures that follow a conversation (recurrence, turns to fix)
read what ``db.boards.reply_stats`` rolled up when the rows were written.

Filters: the battle ones of ``db.vote_filters`` (``scenario``, ``modes``, default every human mode, None
for all; ``since``/``until`` on the battle's start, UTC, half-open; ``exclude_flagged``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Unpack

from sqlalchemy import ColumnElement, Engine, String, and_, case, cast, func, select
from sqlalchemy.orm import aliased

from db.boards.reply_stats import TURN_BUCKETS
from db.boards.side_totals import HUMAN_MODES, FixingTotals, fixing_totals
from db.checks import retry_read
from db.engine import read_session
from db.models import Battle, Conversation, Correction, Message
from db.views import ModelCounts
from db.vote_filters import BattleFilterArgs, VoteFilters, model_counts, model_index

FIXED_LABEL = "correct"  # the grader finds a correction fixed when the reply that followed is labelled this
Judge = Literal["person", "grader"]

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


def _battles(filters: BattleFilterArgs) -> list[ColumnElement[bool]]:
    return VoteFilters.of(filters, modes=HUMAN_MODES).battle_conditions()


def _check(judge: str) -> None:
    if judge not in ("person", "grader"):
        raise ValueError(f"judge must be person or grader, got {judge!r}")


@retry_read
def fix_outcomes(
    engine: Engine,
    *,
    judge: Judge,
    models: Sequence[str] | None = None,
    **filters: Unpack[BattleFilterArgs],
) -> ModelCounts:
    """Per model: corrections the judge found fixed, out of those it judged."""
    _check(judge)
    where = _battles(filters)
    if judge == "person":
        query = (
            select(Conversation.contestant_id, Correction.outcome, func.count())
            .join(Conversation, Conversation.id == Correction.conversation_id)
            .join(Battle, Battle.id == Correction.battle_id)
            .where(Correction.judged_by == "person", Correction.outcome != "unknown", *where)
            .group_by(Conversation.contestant_id, Correction.outcome)
        )
    else:
        verdict = case((_Next.grader_label == FIXED_LABEL, "fixed"), else_="not_fixed")
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
        return model_counts(session, models, session.execute(query).all(), "fixed")


@retry_read
def judge_table(
    engine: Engine,
    *,
    models: Sequence[str] | None = None,
    **filters: Unpack[BattleFilterArgs],
) -> JudgeTable:
    """Corrections judged by a person whose next reply the grader labelled, as per-model 2×2 tables."""
    where = _battles(filters)
    grader_fixed = case((_Next.grader_label == FIXED_LABEL, 1), else_=0)
    query = (
        select(Conversation.contestant_id, Correction.outcome, grader_fixed, func.count())
        .select_from(Correction)
        .join(Conversation, Conversation.id == Correction.conversation_id)
        .join(Battle, Battle.id == Correction.battle_id)
        .join(_Next, _Next.id == Correction.next_reply_message_id)
        .where(Correction.judged_by == "person", Correction.outcome != "unknown",
               _Next.grader_label.is_not(None), *where)
        .group_by(Conversation.contestant_id, Correction.outcome, grader_fixed)
    )
    with read_session(engine) as session:
        slugs, index = model_index(session, models)
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
    **filters: Unpack[BattleFilterArgs],
) -> list[CorrectionLink]:
    """Every correction with a reply after it, oldest first, with the judge's verdict."""
    _check(judge)
    where = _battles(filters)
    query = (
        select(Conversation.contestant_id, Correction.faulty_message_id, Correction.next_reply_message_id,
               Correction.outcome, Correction.judged_by, _Next.grader_label)
        .select_from(Correction)
        .join(Conversation, Conversation.id == Correction.conversation_id)
        .join(Battle, Battle.id == Correction.battle_id)
        .join(_Next, _Next.id == Correction.next_reply_message_id)
        .where(*where)
        .order_by(Correction.id)
    )
    with read_session(engine) as session:
        slugs, index = model_index(session, None)
        rows = session.execute(query).all()
    by_id = {cid: slugs[i] for cid, i in index.items()}
    links = []
    for contestant_id, faulty, following, outcome, judged_by, label in rows:
        assert following is not None  # inner join on the next reply
        if judge == "person":
            fixed = None if judged_by != "person" or outcome == "unknown" else outcome == "fixed"
        else:
            fixed = None if label is None else label == FIXED_LABEL
        links.append(CorrectionLink(by_id[contestant_id], faulty, following, fixed))
    return links


@dataclass(frozen=True, slots=True)
class TurnsToFix:
    """Per model (in ``models`` order): chains of corrections by the turn that fixed them
    (``TURN_BUCKETS`` → count)."""

    models: tuple[str, ...]
    buckets: tuple[dict[str, int], ...]


def turns_to_fix_counts(
    engine: Engine,
    *,
    judge: Judge,
    models: Sequence[str] | None = None,
    **filters: Unpack[BattleFilterArgs],
) -> TurnsToFix:
    """``db.boards.turns_to_fix`` of each side (rolled up when written), summed per model in SQL."""
    _check(judge)
    totals = fixing_totals(engine, models=models, **filters)
    return turns_from_totals(totals, judge)


def turns_from_totals(totals: FixingTotals, judge: Judge) -> TurnsToFix:
    columns = [totals.column(f"{judge}_{suffix}") for suffix in ("turns_1", "turns_2", "turns_3", "never")]
    return TurnsToFix(totals.models, tuple(
        dict(zip(TURN_BUCKETS, cells, strict=True)) for cells in zip(*columns, strict=True)
    ))


def mistake_flag(kind: str) -> ColumnElement[int]:
    """1 when a reply's stored mistakes include ``kind`` (the JSON list read as text: both backends)."""
    return case((cast(Message.grader_mistakes, String).like(f'%"{kind}"%'), 1), else_=0)


@dataclass(frozen=True, slots=True)
class ReplyFlags:
    """Per model (in ``models`` order): current graded replies, and those with a regression, a recurrence
    (a mistake kind back after a later reply had cleared it) or chatty text."""

    models: tuple[str, ...]
    graded: tuple[int, ...]
    regressions: tuple[int, ...]
    recurrences: tuple[int, ...]
    chatty: tuple[int, ...]


def _graded_where() -> ColumnElement[bool]:
    return and_(Message.kind == "reply", Message.grader_label.is_not(None), Message.superseded.is_(False))


def reply_flags(
    engine: Engine,
    *,
    models: Sequence[str] | None = None,
    **filters: Unpack[BattleFilterArgs],
) -> ReplyFlags:
    """Graded replies, regressions, recurrences, chatty replies per model, from the per-side roll-up."""
    totals = fixing_totals(engine, models=models, **filters)
    return flags_from_totals(totals)


def flags_from_totals(totals: FixingTotals) -> ReplyFlags:
    return ReplyFlags(totals.models, totals.column("graded_replies"), totals.column("regression_replies"),
                      totals.column("recurrence_replies"), totals.column("chatty_replies"))


@retry_read
def graded_replies(
    engine: Engine,
    *,
    min_replies: int = 1,
    **filters: Unpack[BattleFilterArgs],
) -> list[GradedReply]:
    """Current (not superseded) graded replies with their mistakes, in conversation order, of the
    conversations with at least ``min_replies`` of them (a recurrence needs three: made, cleared, back)."""
    where = [_graded_where(), *_battles(filters)]
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
        slugs, index = model_index(session, None)
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
    filters = VoteFilters(scenario=scenario, modes=("auto",), since=since, until=until,
                          exclude_flagged=exclude_flagged)
    # Sorted here, not in SQL: ordering by (created_at, id) makes SQLite walk that index over every
    # battle (0.7 s at 200k), while the unordered filter is one quick scan; auto battles are few.
    query = select(Battle.id, Battle.created_at).where(*filters.battle_conditions())
    with read_session(engine) as session:
        rows = session.execute(query).all()
    return [battle_id for battle_id, _ in sorted(rows, key=lambda row: (row[1], row[0]))]
