"""The ``replay_pairs`` view: two models' answers to the same correction as one battle row.

Columns (``SCHEMAS['replay_pairs']``): ``model_a, model_b, winner`` (``a``: a fixed and b did not, ``b``
the reverse, ``tie``: both fixed or both not), ``source`` (``replay``), ``scenario``, ``tstamp`` (when the
correction was sent) and ``item`` (the correction's id: the ``replay`` view's ``id``). ``python -m ranking
fit --battles FILE --composite`` reads it beside the ``battles`` view's file (votes: source ``human``).

Only corrections of battles the ``replay`` view holds (closed, not flagged, human modes, the filters'
publication cut-off); rows come in keyset pages of ``(a's result id, b's result id)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from sqlalchemy import case, func, literal, select, tuple_
from sqlalchemy.orm import aliased

from db.export.filters import conditions
from db.export.read import raw
from db.export.schema import SCHEMAS
from db.export.source import Source
from db.models import Battle, Contestant, Correction, ReplayResult
from db.vote_filters import VoteFilters

_ROWS = pa.schema([("first_id", pa.int64()), ("second_id", pa.int64()), *SCHEMAS["replay_pairs"]])


def _query(filters: VoteFilters) -> Any:
    first, second = aliased(ReplayResult), aliased(ReplayResult)
    side_a, side_b = aliased(Contestant), aliased(Contestant)
    a_fixed, b_fixed = first.outcome == "fixed", second.outcome == "fixed"
    winner = case((a_fixed == b_fixed, "tie"), (a_fixed, "a"), else_="b")
    query = (
        select(raw(first.id).label("first_id"), raw(second.id).label("second_id"),
               raw(side_a.slug).label("model_a"), raw(side_b.slug).label("model_b"),
               winner.label("winner"), literal("replay").label("source"),
               raw(Battle.scenario), raw(Correction.created_at).label("tstamp"),
               raw(first.correction_id).label("item"))
        .join(second, (second.correction_id == first.correction_id)
              & (second.contestant_id > first.contestant_id))
        .join(side_a, side_a.id == first.contestant_id)
        .join(side_b, side_b.id == second.contestant_id)
        .join(Correction, Correction.id == first.correction_id)
        .join(Battle, Battle.id == Correction.battle_id)
        .where(*conditions(filters))
    )
    return query, (first.id, second.id)


def count_replay_pairs(src: Source, filters: VoteFilters) -> int:
    query, _ = _query(filters)
    return int(src.rows(select(func.count()).select_from(query.subquery()))[0][0] or 0)


def iter_replay_pairs(src: Source, *, filters: VoteFilters, chunk_size: int) -> Iterator[pa.Table]:
    """Pages of at most ``chunk_size`` rows, in result-id order."""
    query, keys = _query(filters)
    base = query.order_by(*keys).limit(chunk_size)
    last: tuple[int, int] | None = None
    while True:
        page = base if last is None else base.where(tuple_(*keys) > last)
        table = src.table(page, _ROWS)
        if not table.num_rows:
            return
        yield table.select(SCHEMAS["replay_pairs"].names)
        if table.num_rows < chunk_size:
            return
        last = (table.column(0)[-1].as_py(), table.column(1)[-1].as_py())
