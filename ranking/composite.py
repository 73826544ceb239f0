"""One fixing rating from several sources: human votes and automatic pairwise outcomes, each weighted.

A *source* is a set of pairwise counts on the same models: the human votes (wins, ties, both-bad) and
the automatic outcomes (replay: the same correction answered by two models; suites: the same generated
dialogue played by two), where the model that fixed beats the one that did not and both-fixed or
both-failed is a tie. The composite log-likelihood is the weighted sum of the sources' Bradley-Terry
log-likelihoods (arena-rank's ``CompositeBradleyTerry`` idea)::

    ℓ(θ) = Σ_s ω_s Σ_p [W_sp log σ(θ_i − θ_j) + L_sp log σ(θ_j − θ_i)]     (ties: half a win each)

which is a Bradley-Terry fit on the weighted counts ``Σ_s ω_s · counts_s``, so :func:`ranking.bt.fit_bt`
does the work (counts need not be integers; the ridge rule is the same). Intervals: each bootstrap round
resamples every source's battles on its own (exact multinomial, :func:`ranking.bootstrap.resample_cells`)
before weighting, so a source's interval reflects its own size, not its weight.

Three columns come from one call (:func:`composite_board`): human only, automatic only (every source but
``human``, weighted) and composite, with Kendall's τ between the human and automatic ratings over the
models rated by both, with a percentile interval over the same bootstrap rounds. ``interval="sandwich"``
(the web page's, a hundred times cheaper) gives robust analytic intervals instead, ``J`` summing each
source's scores times its weight squared, and τ's interval from draws of the normal approximation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import kendalltau

from ranking.bootstrap import resample_cells
from ranking.bt import fit_bt, newton_matrix, to_elo
from ranking.counts import CountsError, FloatArray, PairData
from ranking.intervals import interval_ranks, percentile_interval, sandwich_interval, sandwich_meat

HUMAN = "human"
DEFAULT_WEIGHTS: Mapping[str, float] = {HUMAN: 1.0, "replay": 0.5, "suite": 0.5}
"""Each source's weight when none is given: a human vote counts as one battle, an automatic pairwise
outcome as half of one (automatic outcomes are many and cheap, and answer a narrower question: did the
call get fixed, not which model a person would rather use)."""
COLUMNS = ("human", "automatic", "composite")


@dataclass(frozen=True)
class Source:
    """One source's counts on the shared model axis: ``wins[i, j]`` i beat j, ``ties`` symmetric."""

    name: str
    wins: np.ndarray
    ties: np.ndarray

    def cells(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Upper-triangle pairs and their cell counts (i won, j won, tie) stacked as one vector."""
        n = self.wins.shape[0]
        iu, ju = np.triu_indices(n, k=1)
        return iu, ju, np.concatenate([self.wins[iu, ju], self.wins[ju, iu], self.ties[iu, ju]])


@dataclass(frozen=True)
class Column:
    """One fit: Elo ratings (NaN where the model has no battle in the column's sources), intervals,
    interval ranks (0 where unrated) and weighted battles per model."""

    name: str
    ratings: FloatArray
    ci_low: FloatArray
    ci_high: FloatArray
    ranks: np.ndarray
    battles: FloatArray
    rounds: FloatArray  # bootstrap rounds × models (NaN columns where unrated)


@dataclass(frozen=True)
class CompositeBoard:
    models: tuple[str, ...]
    columns: dict[str, Column]
    weights: dict[str, float]
    kendall_tau: float  # NaN when fewer than two models are rated by both
    tau_low: float
    tau_high: float
    rounds: int
    per_source_battles: dict[str, int] = field(default_factory=dict)

    def as_records(self) -> list[dict[str, object]]:
        """One record per model: ``{"model", <column>: {"rating", "ci_low", "ci_high", "rank",
        "battles"} | null}`` for each of :data:`COLUMNS`."""
        out: list[dict[str, object]] = []
        for m, model in enumerate(self.models):
            record: dict[str, object] = {"model": model}
            for name in COLUMNS:
                col = self.columns[name]
                record[name] = None if math.isnan(col.ratings[m]) else {
                    "rating": round(float(col.ratings[m]), 3), "ci_low": round(float(col.ci_low[m]), 3),
                    "ci_high": round(float(col.ci_high[m]), 3), "rank": int(col.ranks[m]),
                    "battles": round(float(col.battles[m]), 3)}
            out.append(record)
        return out


def check_weights(weights: Mapping[str, float]) -> dict[str, float]:
    for name, weight in weights.items():
        if not (math.isfinite(weight) and weight >= 0):
            raise CountsError(f"weight of source {name!r} must be a finite number >= 0, got {weight}")
    return dict(weights)


def weighted_pairs(sources: Sequence[Source], weights: Mapping[str, float], n: int,
                   cells: Sequence[np.ndarray] | None = None) -> PairData:
    """The weighted sum of the sources' counts as folded pairs (float counts); ``cells`` replaces each
    source's observed cells (a bootstrap round)."""
    iu, ju = np.triu_indices(n, k=1)
    k = iu.size
    total = np.zeros(3 * k)
    for index, source in enumerate(sources):
        counts = source.cells()[2] if cells is None else cells[index]
        total += weights.get(source.name, 0.0) * counts
    w_ij, w_ji, t = total[:k], total[k:2 * k], total[2 * k:]
    keep = (w_ij + w_ji + t) > 0
    return PairData(n_models=n, i=iu[keep], j=ju[keep], w_ij=w_ij[keep], w_ji=w_ji[keep],  # type: ignore[arg-type]
                    t=t[keep])  # type: ignore[arg-type]


def _played(pairs: PairData, n: int) -> tuple[FloatArray, np.ndarray]:
    """Weighted battles per model (not whole numbers: ``PairData.per_model_battles`` would round them
    down) and the models that have any."""
    battles = np.zeros(n)
    np.add.at(battles, pairs.i, pairs.battles)
    np.add.at(battles, pairs.j, pairs.battles)
    return battles, np.flatnonzero(battles > 0)


def _fit_column(name: str, pairs_of: list[PairData], n: int) -> Column:
    """Ratings on the full data (``pairs_of[0]``) and percentile intervals over the rounds (the rest)."""
    pairs = pairs_of[0]
    battles, played = _played(pairs, n)
    ratings = np.full(n, np.nan)
    low, high, ranks = ratings.copy(), ratings.copy(), np.zeros(n, dtype=np.int64)
    rounds = np.full((len(pairs_of) - 1, n), np.nan)
    if played.size == 0:
        return Column(name, ratings, low, high, ranks, battles, rounds)
    fit = fit_bt(_restrict(pairs, played))
    ratings[played] = to_elo(fit.theta)
    for r, boot in enumerate(pairs_of[1:]):
        rounds[r, played] = to_elo(fit_bt(_restrict(boot, played), theta0=fit.theta).theta)
    if rounds.shape[0]:
        low[played], high[played] = percentile_interval(rounds[:, played])
    else:
        low[played], high[played] = ratings[played], ratings[played]
    ranks[played] = interval_ranks(low[played], high[played])
    return Column(name, ratings, low, high, ranks, battles, rounds)


def _sandwich_column(name: str, sources: Sequence[Source], weights: Mapping[str, float], n: int, *,
                     rounds: int, rng: np.random.Generator) -> Column:
    """Ratings with robust (sandwich) intervals: ``H⁻¹ J H⁻¹`` with ``H`` the weighted fit's Hessian and
    ``J = Σ_s ω_s² J_s`` (each source's scores, scaled by its weight), so weighting one source alone leaves
    its interval as it was. ``rounds`` draws from the normal approximation stand in for bootstrap rounds
    (Kendall's τ's interval)."""
    pairs = weighted_pairs(sources, weights, n)
    battles, played = _played(pairs, n)
    ratings = np.full(n, np.nan)
    low, high, ranks = ratings.copy(), ratings.copy(), np.zeros(n, dtype=np.int64)
    drawn = np.full((rounds, n), np.nan)
    if played.size == 0:
        return Column(name, ratings, low, high, ranks, battles, drawn)
    sub = _restrict(pairs, played)
    fit = fit_bt(sub)
    meat = np.zeros((played.size, played.size))
    for source in sources:
        weight = weights.get(source.name, 0.0)
        if weight > 0:
            alone = _restrict(weighted_pairs([source], {source.name: 1.0}, n), played)
            meat += weight * weight * sandwich_meat(fit.theta, alone)
    bread = np.linalg.inv(newton_matrix(fit.theta, sub, fit.ridge))
    centre = np.eye(played.size) - 1.0 / played.size
    cov = centre @ bread @ meat @ bread @ centre
    ratings[played] = to_elo(fit.theta)
    low[played], high[played] = sandwich_interval(ratings[played], cov, anchor_index=None)
    ranks[played] = interval_ranks(low[played], high[played])
    if rounds:
        noise = rng.multivariate_normal(np.zeros(played.size), cov, size=rounds, method="eigh")
        drawn[:, played] = to_elo(fit.theta + noise)
    return Column(name, ratings, low, high, ranks, battles, drawn)


def _restrict(pairs: PairData, played: np.ndarray) -> PairData:
    """Pairs re-indexed onto ``played`` (a bootstrap round may lose a pair, never gain a model)."""
    index = np.full(pairs.n_models, -1, dtype=np.int64)
    index[played] = np.arange(played.size)
    keep = (index[pairs.i] >= 0) & (index[pairs.j] >= 0)
    return PairData(n_models=int(played.size), i=index[pairs.i[keep]], j=index[pairs.j[keep]],
                    w_ij=pairs.w_ij[keep], w_ji=pairs.w_ji[keep], t=pairs.t[keep])


def composite_board(models: Sequence[str], sources: Sequence[Source], *,
                    weights: Mapping[str, float] | None = None, bootstrap: int = 200,
                    seed: int = 0, interval: str = "bootstrap") -> CompositeBoard:
    """Human-only, automatic-only and composite ratings with 95% intervals, and Kendall's τ between the
    first two (see the module docstring). ``weights`` default to :data:`DEFAULT_WEIGHTS` (a source not
    named there weighs 0.5)."""
    n = len(models)
    given = dict(DEFAULT_WEIGHTS) if weights is None else {**DEFAULT_WEIGHTS, **check_weights(weights)}
    given = {s.name: given.get(s.name, 0.5) for s in sources}
    for source in sources:
        if source.wins.shape != (n, n) or source.ties.shape != (n, n):
            raise CountsError(f"source {source.name!r}: counts must be {n}×{n}")
    if bootstrap < 0:
        raise CountsError(f"bootstrap rounds must be >= 0, got {bootstrap}")
    if interval not in ("bootstrap", "sandwich"):
        raise CountsError(f"interval must be 'bootstrap' or 'sandwich', got {interval!r}")
    rng = np.random.default_rng(seed)
    observed = [s.cells()[2].astype(np.int64) for s in sources]
    column_weights = {
        "human": {name: (1.0 if name == HUMAN else 0.0) for name in given},
        "automatic": {name: (0.0 if name == HUMAN else w) for name, w in given.items()},
        "composite": given,
    }
    columns = {}
    if interval == "sandwich":
        for name, w in column_weights.items():
            columns[name] = _sandwich_column(name, sources, w, n, rounds=bootstrap, rng=rng)
    else:
        draws = [resample_cells(c, rounds=bootstrap, rng=rng) for c in observed]
        round_cells = [observed] + [[d[r] for d in draws] for r in range(bootstrap)]
        for name, w in column_weights.items():
            pairs_of = [weighted_pairs(sources, w, n, cells) for cells in round_cells]
            columns[name] = _fit_column(name, pairs_of, n)
    tau, low, high = _kendall(columns["human"], columns["automatic"])
    return CompositeBoard(
        models=tuple(models), columns=columns, weights=given, kendall_tau=tau, tau_low=low, tau_high=high,
        rounds=bootstrap,
        per_source_battles={s.name: int(c.sum()) for s, c in zip(sources, observed, strict=True)})


def _kendall(human: Column, automatic: Column) -> tuple[float, float, float]:
    """τ between the two columns over the models both rate, and its percentile interval over the
    bootstrap rounds (each round's τ between that round's two fits)."""
    both = np.flatnonzero(~np.isnan(human.ratings) & ~np.isnan(automatic.ratings))
    if both.size < 2:
        return math.nan, math.nan, math.nan
    tau = float(kendalltau(human.ratings[both], automatic.ratings[both]).statistic)
    taus = [float(value) for r in range(human.rounds.shape[0])
            if np.isfinite(value := kendalltau(human.rounds[r, both], automatic.rounds[r, both]).statistic)]
    if not taus:
        return tau, tau, tau
    low, high = np.percentile(taus, [2.5, 97.5])
    return tau, float(low), float(high)
