"""The ``battles`` view: one row per counted vote, the file ``python -m ranking fit --battles`` reads.

Columns (``SCHEMAS['battles']``): ``model_a, model_b, winner`` (``a | b | tie | both_bad``, as
``ranking.battles_file`` accepts), ``mode, scenario, tstamp`` (the vote's time), the per-side style
features ``<feature>_a / <feature>_b`` (``db.boards.vote_features.side_style``, the definition the Votes
board's style control uses; null for a side with no current reply), then ``battle_id, visitor`` (salted hash)
and ``with_corrections``.

Only the votes the leaderboard counts are rows: a vote cast after a reveal, or on a flagged battle, is
stored but never ranked, so it is not here either (the ``dialogues`` view keeps it, with ``counted``).
Battles come in ``(created_at, id)`` keyset pages, as in :mod:`db.export.read`, inside the same kind
of snapshot; a page's style features are one grouped query over its battles' current replies.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from sqlalchemy import Select, func, select
from sqlalchemy.orm import aliased

from db.boards.vote_features import STYLED_REPLIES, side_style
from db.export.filters import ExportError, conditions
from db.export.read import battle_pages, listed, raw
from db.export.schema import SCHEMAS, STYLE_FIELDS
from db.export.source import Source
from db.models import Battle, Contestant, Conversation, Message, Visitor, Vote
from db.vote_filters import VoteFilters

PAIR_COLUMNS = ("battle_id", "created_at", "model_a", "model_b", "winner", "mode", "scenario", "tstamp",
                "visitor", "with_corrections")
_PAIRS = pa.schema([
    ("battle_id", pa.string()), ("created_at", SCHEMAS["battles"].field("tstamp").type),
    *((name, SCHEMAS["battles"].field(name).type) for name in PAIR_COLUMNS[2:]),
])


def _counted() -> list[Any]:
    return [Vote.revealed == False, Vote.flagged == False]  # noqa: E712


def _pair_query(filters: VoteFilters) -> Select[Any]:
    side_a, side_b = aliased(Contestant), aliased(Contestant)
    return (
        select(raw(Battle.id), raw(Battle.created_at),
               raw(side_a.slug).label("model_a"), raw(side_b.slug).label("model_b"),
               raw(Vote.choice).label("winner"), raw(Battle.mode), raw(Battle.scenario),
               raw(Vote.created_at).label("tstamp"), raw(Visitor.anon_id).label("visitor"),
               raw(Vote.with_corrections))
        .join(Vote, Vote.battle_id == Battle.id)
        .join(side_a, side_a.id == Vote.model_a_id)
        .join(side_b, side_b.id == Vote.model_b_id)
        .outerjoin(Visitor, Visitor.id == Vote.visitor_id)
        .where(*conditions(filters), *_counted())
    )


def count_pairs(src: Source, filters: VoteFilters) -> int:
    """How many rows the view will have (the progress bar's total)."""
    query = (select(func.count()).select_from(Battle).join(Vote, Vote.battle_id == Battle.id)
             .where(*conditions(filters), *_counted()))
    return int(src.rows(query)[0][0] or 0)


def _style(src: Source, battle_ids: list[str]) -> dict[tuple[str, str], tuple[Any, ...]]:
    """``(battle id, side) -> STYLE_COLUMNS`` for the sides that have a current reply."""
    query = (
        select(Conversation.battle_id, Conversation.side, *side_style())
        .join(Message, Message.conversation_id == Conversation.id)
        .where(Conversation.battle_id.in_(listed(src, battle_ids)), *STYLED_REPLIES)
        .group_by(Conversation.battle_id, Conversation.side)
    )
    return {(row[0], row[1]): tuple(row[2:]) for row in src.rows(query)}


def _page(pairs: pa.Table, style: dict[tuple[str, str], tuple[Any, ...]]) -> pa.Table:
    columns: dict[str, Any] = {name: pairs.column(name) for name in _PAIRS.names}
    ids = pairs.column("battle_id").to_pylist()
    width = len(STYLE_FIELDS) // 2
    for side in ("a", "b"):
        values = [style.get((battle_id, side), (None,) * width) for battle_id in ids]
        for k, (name, _) in enumerate(STYLE_FIELDS[int(side == "b")::2]):
            columns[name] = pa.array([None if v[k] is None else float(v[k]) for v in values], pa.float64())
    return pa.table({name: columns[name] for name in SCHEMAS["battles"].names}, schema=SCHEMAS["battles"])


def iter_pairs(
    src: Source, *, filters: VoteFilters, salt: str, chunk_size: int
) -> Iterator[pa.Table]:
    """Pages of the view (at most ``chunk_size`` rows each), battles oldest first."""
    if not salt:
        raise ExportError("hash salt is empty: visitor ids are exported only as salted hashes")
    for pairs in battle_pages(src, _pair_query(filters), _PAIRS, chunk_size=chunk_size, salt=salt):
        yield _page(pairs, _style(src, pairs.column("battle_id").to_pylist()))
