"""Replay's board figures: per model, how many corrections it answered, fixed, left unfixed or answered
with a regression, its own mistakes apart from other models' (one ``GROUP BY`` over ``replay_results``,
answered from its ``ix_replay_results_board`` index); and the pairwise outcomes two models' answers to
the same correction make (:func:`replay_pair_counts`: the one that fixed beats the one that did not,
both fixed or both not is a tie), one ``GROUP BY`` over a self-join on the correction."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import aliased

from db.checks import retry_read
from db.engine import read_session
from db.models import Contestant, ReplayResult
from db.views import PairCounts
from db.vote_filters import model_index

__all__ = ["ReplayCounts", "replay_counts", "replay_pair_counts"]


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


@retry_read
def replay_pair_counts(engine: Engine, *, scenario: str | None = None) -> PairCounts:
    """Pairwise outcomes of replay, as vote counts over every contestant (slug order): ``wins[i, j]``
    corrections i fixed and j did not; ``ties`` both fixed or both not (``both_bad`` stays zero)."""
    first, second = aliased(ReplayResult), aliased(ReplayResult)
    fixed_a = (first.outcome == "fixed").label("fixed_a")
    fixed_b = (second.outcome == "fixed").label("fixed_b")
    query = (select(first.contestant_id, second.contestant_id, fixed_a, fixed_b, func.count())
             .join(second, (second.correction_id == first.correction_id)
                   & (second.contestant_id > first.contestant_id))
             .group_by(first.contestant_id, second.contestant_id, fixed_a, fixed_b))
    if scenario is not None:
        query = query.where(first.scenario == scenario)
    with read_session(engine) as session:
        slugs, index = model_index(session, None)
        rows = session.execute(query).all()
    n = len(slugs)
    wins, ties = np.zeros((n, n), dtype=np.int64), np.zeros((n, n), dtype=np.int64)
    for a_id, b_id, a_fixed, b_fixed, count in rows:
        a, b = index[a_id], index[b_id]
        if bool(a_fixed) == bool(b_fixed):
            ties[a, b] += count
            ties[b, a] += count
        elif a_fixed:
            wins[a, b] += count
        else:
            wins[b, a] += count
    return PairCounts(models=slugs, wins=wins, ties=ties, both_bad=np.zeros((n, n), dtype=np.int64))
