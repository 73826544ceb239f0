"""The Fixing board's figures per model: one ``GROUP BY`` over ``side_stats`` (the per-side roll-up of
``db.reply_stats``), with the battle filters on the facts copied into it. Result rows grow with models;
the scan with sides, never with replies or corrections, and no row reaches Python per side."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Engine, func, select

from db.aggregates import _check_filters, _model_index, side_filters
from db.checks import retry_read
from db.engine import read_session
from db.models import SIDE_COUNTS, SideStats

HUMAN_MODES: tuple[str, ...] = ("anonymous", "named", "direct")


@dataclass(frozen=True)
class FixingTotals:
    """Per model (in ``models`` order), the sum of each of ``SIDE_COUNTS`` over the filtered sides."""

    models: tuple[str, ...]
    sums: dict[str, np.ndarray]

    def column(self, name: str) -> tuple[int, ...]:
        return tuple(int(v) for v in self.sums[name])


@retry_read
def fixing_totals(
    engine: Engine,
    *,
    scenario: str | None = None,
    modes: Sequence[str] | None = HUMAN_MODES,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    exclude_flagged: bool = True,
    models: Sequence[str] | None = None,
) -> FixingTotals:
    """Every count of the Fixing board, per model, in one scan of ``side_stats``."""
    _check_filters(modes, since, until)
    query = (
        select(SideStats.contestant_id, *(func.sum(getattr(SideStats, name)) for name in SIDE_COUNTS))
        .where(*side_filters(scenario, modes, since, until, exclude_flagged))
        .group_by(SideStats.contestant_id)
    )
    with read_session(engine) as session:
        slugs, index = _model_index(session, models)
        rows = session.execute(query).all()
    sums = {name: np.zeros(len(slugs), dtype=np.int64) for name in SIDE_COUNTS}
    for contestant_id, *values in rows:
        i = index.get(contestant_id)
        if i is not None:
            for name, value in zip(SIDE_COUNTS, values, strict=True):
                sums[name][i] = int(value or 0)
    return FixingTotals(slugs, sums)
