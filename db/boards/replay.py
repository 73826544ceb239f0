"""Replay's board figures: per model, how many corrections it answered, fixed, left unfixed or answered
with a regression, its own mistakes apart from other models' (one ``GROUP BY`` over ``replay_results``,
answered from its ``ix_replay_results_board`` index); and the pairwise outcomes two models' answers to
the same correction make (:func:`replay_pair_counts`: the one that fixed beats the one that did not,
both fixed or both not is a tie), read from ``replay_pair_tallies``, which each stored answer adds to
(``db.actions.replay``). :func:`refill_replay_tallies` rebuilds that roll-up and the per-kind one
(``replay_tallies``) from the stored answers (migration 0010, bulk loaders)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Connection, Engine, delete, func, insert, select
from sqlalchemy.orm import aliased

from db.boards.side_kinds import kinds_of
from db.checks import retry_read
from db.engine import read_session
from db.models import Contestant, Correction, Message, ReplayPairTally, ReplayResult, ReplayTally
from db.views import PairCounts
from db.vote_filters import model_index

__all__ = ["ReplayCounts", "refill_replay_tallies", "replay_counts", "replay_pair_counts"]


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
    corrections i fixed and j did not; ``ties`` both fixed or both not (``both_bad`` stays zero). A read
    of ``replay_pair_tallies``, kept on write."""
    query = (select(ReplayPairTally.first_id, ReplayPairTally.second_id, ReplayPairTally.first_fixed,
                    ReplayPairTally.second_fixed, func.sum(ReplayPairTally.count))
             .group_by(ReplayPairTally.first_id, ReplayPairTally.second_id, ReplayPairTally.first_fixed,
                       ReplayPairTally.second_fixed))
    if scenario is not None:
        query = query.where(ReplayPairTally.scenario == scenario)
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


def _refill_pairs(conn: Connection) -> None:
    """``replay_pair_tallies`` from every pair of stored answers to one correction (one self-join)."""
    first, second = aliased(ReplayResult), aliased(ReplayResult)
    fixed_a = (first.outcome == "fixed").label("fixed_a")
    fixed_b = (second.outcome == "fixed").label("fixed_b")
    query = (select(first.scenario, first.contestant_id, second.contestant_id, fixed_a, fixed_b, func.count())
             .join(second, (second.correction_id == first.correction_id)
                   & (second.contestant_id > first.contestant_id))
             .group_by(first.scenario, first.contestant_id, second.contestant_id, fixed_a, fixed_b))
    records = [{"scenario": scenario, "first_id": a, "second_id": b, "first_fixed": bool(fa),
                "second_fixed": bool(fb), "count": int(n)}
               for scenario, a, b, fa, fb, n in conn.execute(query)]
    if records:
        conn.execute(insert(ReplayPairTally), records)


def refill_replay_tallies(conn: Connection, *, chunk: int = 20_000) -> int:
    """Recount ``replay_tallies`` and ``replay_pair_tallies`` from every stored answer (both are emptied
    first), ``chunk`` answers at a time; returns the per-kind tally rows written."""
    conn.execute(delete(ReplayTally))
    conn.execute(delete(ReplayPairTally))
    _refill_pairs(conn)
    answered: Counter[tuple[str, int, str]] = Counter()
    fixed: Counter[tuple[str, int, str]] = Counter()
    last = 0
    while True:
        rows = conn.execute(
            select(ReplayResult.id, ReplayResult.scenario, ReplayResult.contestant_id, ReplayResult.outcome,
                   Message.grader_label, Message.grader_mistakes)
            .join(Correction, Correction.id == ReplayResult.correction_id)
            .join(Message, Message.id == Correction.faulty_message_id)
            .where(ReplayResult.id > last).order_by(ReplayResult.id).limit(chunk)).all()
        if not rows:
            break
        for _, scenario, contestant_id, outcome, label, mistakes in rows:
            for kind in kinds_of(label, mistakes):
                answered[scenario, contestant_id, kind] += 1
                fixed[scenario, contestant_id, kind] += outcome == "fixed"
        last = rows[-1][0]
    records = [{"scenario": scenario, "contestant_id": contestant_id, "kind": kind, "answered": n,
                "fixed": fixed[scenario, contestant_id, kind]}
               for (scenario, contestant_id, kind), n in answered.items()]
    if records:
        conn.execute(insert(ReplayTally), records)
    return len(records)
