"""The Fixing board's figures per model: one ``GROUP BY`` over ``side_stats`` (the per-side roll-up of
``db.boards.reply_stats``), with the battle filters on the facts copied into it. Result rows grow with models;
the scan with sides, never with replies or corrections, and no row reaches Python per side."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Unpack

import numpy as np
from sqlalchemy import Engine, func, select

from db.checks import retry_read
from db.engine import read_session
from db.models import SIDE_COUNTS, SideStats
from db.vote_filters import HUMAN_MODES, BattleFilterArgs, VoteFilters, model_index

__all__ = ["HUMAN_MODES", "FixingTotals", "fixing_totals"]  # HUMAN_MODES: importable from here too


@dataclass(frozen=True)
class FixingTotals:
    """Per model (in ``models`` order), the sum of each of ``SIDE_COUNTS`` over the filtered sides."""

    models: tuple[str, ...]
    sums: dict[str, np.ndarray]

    def column(self, name: str) -> tuple[int, ...]:
        return tuple(int(v) for v in self.sums[name])


@retry_read
def fixing_totals(
    engine: Engine, *, models: Sequence[str] | None = None, **filters: Unpack[BattleFilterArgs]
) -> FixingTotals:
    """Every count of the Fixing board, per model, in one scan of ``side_stats``."""
    where = VoteFilters.of(filters, modes=HUMAN_MODES).side_conditions()
    query = (
        select(SideStats.contestant_id, *(func.sum(getattr(SideStats, name)) for name in SIDE_COUNTS))
        .where(*where)
        .group_by(SideStats.contestant_id)
    )
    with read_session(engine) as session:
        slugs, index = model_index(session, models)
        rows = session.execute(query).all()
    sums = {name: np.zeros(len(slugs), dtype=np.int64) for name in SIDE_COUNTS}
    for contestant_id, *values in rows:
        i = index.get(contestant_id)
        if i is not None:
            for name, value in zip(SIDE_COUNTS, values, strict=True):
                sums[name][i] = int(value or 0)
    return FixingTotals(slugs, sums)
