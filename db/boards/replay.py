"""Replay's board figures: per model, how many corrections it answered, fixed, left unfixed or answered
with a regression, its own mistakes apart from other models' (one ``GROUP BY`` over ``replay_results``,
answered from its ``ix_replay_results_board`` index)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, func, select

from db.checks import retry_read
from db.engine import read_session
from db.models import Contestant, ReplayResult

__all__ = ["ReplayCounts", "replay_counts"]


@dataclass(frozen=True, slots=True)
class ReplayCounts:
    """One model's replay outcomes on its own mistakes (``own``) or on other models' mistakes."""

    model: str
    own: bool
    fixed: int = 0
    not_fixed: int = 0
    regression: int = 0

    @property
    def answered(self) -> int:
        return self.fixed + self.not_fixed + self.regression


@retry_read
def replay_counts(engine: Engine, *, scenario: str | None = None) -> list[ReplayCounts]:
    """Outcome counts per model and ``own``, sorted by model then own-mistakes first."""
    query = (select(Contestant.slug, ReplayResult.own, ReplayResult.outcome, func.count())
             .join(Contestant, Contestant.id == ReplayResult.contestant_id)
             .group_by(Contestant.slug, ReplayResult.own, ReplayResult.outcome))
    if scenario is not None:
        query = query.where(ReplayResult.scenario == scenario)
    cells: dict[tuple[str, bool], dict[str, int]] = {}
    with read_session(engine) as session:
        for slug, own, outcome, count in session.execute(query):
            cells.setdefault((slug, bool(own)), {})[outcome] = int(count)
    return [ReplayCounts(model=slug, own=own, **counts)
            for (slug, own), counts in sorted(cells.items(), key=lambda kv: (kv[0][0], not kv[0][1]))]
