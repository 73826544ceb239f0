"""The Votes board's per-vote queries: the counted votes one by one (the anomalous-voter test) and their
per-side style features (style control). Same filters as ``db.boards.aggregates.pairwise_counts``
(``db.vote_filters.VoteFilters.vote_conditions``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Unpack

import numpy as np
from sqlalchemy import ColumnElement, Engine, case, func, or_, select

from db.boards.fixing import mistake_flag
from db.checks import retry_read
from db.engine import read_session
from db.models import Conversation, Message, Vote
from db.vote_filters import VoteFilterArgs, VoteFilters, model_index

STYLE_COLUMNS: tuple[str, ...] = ("length", "chatty", "apology", "multiline")
STYLE_NOTES: dict[str, str] = {  # what each feature measures (the dataset card quotes these)
    "length": "mean characters per reply",
    "chatty": "share of replies the grader marked `chatty` (prose around the call)",
    "apology": 'share of replies saying "sorry" or "apolog…" (case-insensitive)',
    "multiline": "share of replies longer than one line (after trimming)",
}
VOTE_CODES: dict[str, int] = {"a": 0, "b": 1, "tie": 2, "both_bad": 3}  # ranking.counts' outcome codes


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
    engine: Engine, *, models: Sequence[str] | None = None, **filters: Unpack[VoteFilterArgs]
) -> CountedVotes:
    """The votes ``pairwise_counts`` counts, one row each (for the anomalous-voter test)."""
    where = VoteFilters.of(filters, votes=True).vote_conditions()
    query = (
        select(Vote.model_a_id, Vote.model_b_id, Vote.choice, Vote.visitor_id)
        .where(*where)
        .order_by(Vote.created_at, Vote.id)
    )
    with read_session(engine) as session:
        slugs, index = model_index(session, models)
        rows = [r for r in session.execute(query).all() if r[0] in index and r[1] in index]
    return CountedVotes(
        models=slugs,
        model_a=np.array([index[r[0]] for r in rows], dtype=np.int64),
        model_b=np.array([index[r[1]] for r in rows], dtype=np.int64),
        outcome=np.array([VOTE_CODES[r[2]] for r in rows], dtype=np.int64),
        visitor=np.array([-1 if r[3] is None else r[3] for r in rows], dtype=np.int64),
    )


STYLED_REPLIES: tuple[ColumnElement[bool], ...] = (Message.kind == "reply", Message.superseded.is_(False))


def side_style() -> tuple[ColumnElement[Any], ...]:
    """The ``STYLE_COLUMNS`` of one side, as aggregates over its ``STYLED_REPLIES`` (group by the side).

    The one definition of the style features: the Votes board's style control (:func:`vote_style_features`)
    and the export's ``battles`` view (``db.export.pairwise``) both select these.
    """
    text = func.lower(Message.content)
    apology = case((or_(text.like("%sorry%"), text.like("%apolog%")), 1.0), else_=0.0)
    multiline = case((func.trim(Message.content).contains("\n"), 1.0), else_=0.0)
    columns = (func.avg(func.length(Message.content)), func.avg(mistake_flag("chatty")), func.avg(apology),
               func.avg(multiline))
    return tuple(column.label(name) for column, name in zip(columns, STYLE_COLUMNS, strict=True))


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
    engine: Engine, *, models: Sequence[str] | None = None, **filters: Unpack[VoteFilterArgs]
) -> StyleBattles:
    """The votes the Votes board counts (same filters as ``pairwise_counts``) with style features."""
    where = VoteFilters.of(filters, votes=True).vote_conditions()
    query = (
        select(Vote.id, Vote.model_a_id, Vote.model_b_id, Vote.choice, Conversation.side, *side_style())
        .join(Conversation, Conversation.battle_id == Vote.battle_id)
        .join(Message, Message.conversation_id == Conversation.id)
        .where(*STYLED_REPLIES, *where)
        .group_by(Vote.id, Vote.model_a_id, Vote.model_b_id, Vote.choice, Conversation.side)
        .order_by(Vote.id)
    )
    with read_session(engine) as session:
        slugs, index = model_index(session, models)
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
