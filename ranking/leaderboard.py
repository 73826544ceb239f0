"""The leaderboard: Bradley-Terry ratings with intervals, ranks, per-model counts and matrices."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ranking.blas import single_threaded_blas
from ranking.bootstrap import bootstrap_rounds
from ranking.bt import DEFAULT_TOL, fit_bt, to_elo, win_probability
from ranking.counts import (
    CountsError,
    FloatArray,
    IntArray,
    IntMatrix,
    check_policies,
    effective_ties,
    fold_pairs,
    restrict,
    validate_counts,
)
from ranking.intervals import interval_ranks, percentile_interval, sandwich_covariance, sandwich_interval

IntervalKind = Literal["bootstrap", "sandwich"]


@dataclass(frozen=True)
class LeaderboardRow:
    """One rated model.

    ``ties`` includes both-bad votes when they count as ties (``both_bad="tie"``); with
    ``ties="exclude"`` ties are still listed here (they happened) but do not enter the fit.
    ``battles`` = ``wins + losses + ties``.
    """

    model: str
    rating: float
    ci_low: float
    ci_high: float
    rank: int
    battles: int
    wins: int
    losses: int
    ties: int

    def as_dict(self) -> dict[str, Any]:
        """The stable JSON record (keys as in the ``fit`` CLI)."""
        return {
            "model": self.model,
            "rating": self.rating,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "rank": self.rank,
            "battles": self.battles,
            "wins": self.wins,
            "losses": self.losses,
            "ties": self.ties,
        }


@dataclass(frozen=True)
class Leaderboard:
    """Rows sorted by rating (best first) and ``n × n`` matrices in the input ``models`` order.

    ``observed_win_rate[i, j]`` = (wins of i over j + ½ counted ties) / battles used by the fit, NaN where
    the pair never met; ``predicted_win_rate`` = σ(θ_i − θ_j), NaN on the diagonal and for unrated models.
    ``unrated`` lists models with no battle used by the fit: they get no row (and do not affect others).
    ``ridge`` is 0 unless the data has no finite MLE (see :mod:`ranking.bt`).
    """

    rows: tuple[LeaderboardRow, ...]
    models: tuple[str, ...]
    battle_counts: IntMatrix
    observed_win_rate: FloatArray
    predicted_win_rate: FloatArray
    unrated: tuple[str, ...]
    ridge: float
    interval: str
    bootstrap_rounds: int
    converged: bool
    grad_norm: float
    bootstrap_fallback_rounds: int = 0
    bootstrap_ratings: FloatArray = field(default_factory=lambda: np.zeros((0, 0)), repr=False)

    def as_records(self) -> list[dict[str, Any]]:
        """Rows as plain dicts, best first."""
        return [row.as_dict() for row in self.rows]

    def rating_of(self, model: str) -> float:
        """Rating of one model (KeyError for unknown or unrated models)."""
        for row in self.rows:
            if row.model == model:
                return row.rating
        raise KeyError(model)


def leaderboard(
    models: tuple[str, ...] | list[str],
    wins: npt.ArrayLike,
    tie_counts: npt.ArrayLike,
    both_bad_counts: npt.ArrayLike,
    /,
    *,
    ties: str = "half",
    both_bad: str = "tie",
    bootstrap: int = 1000,
    seed: int = 0,
    anchor: tuple[str, float] | None = None,
    interval: str = "bootstrap",
    tol: float = DEFAULT_TOL,
) -> Leaderboard:
    """Fit Bradley-Terry on pairwise counts and build the leaderboard.

    Positional: ``models`` and the ``wins``/``ties``/``both_bad`` count matrices (db's aggregation).
    ``ties``: ``"half"`` (each tie half a win, Chatbot Arena) or ``"exclude"``. ``both_bad``: ``"tie"``
    or ``"exclude"``. ``interval``: ``"bootstrap"`` (exact resampling of battles, ``bootstrap`` rounds,
    percentile 95%; ``bootstrap=0`` gives zero-width intervals) or ``"sandwich"`` (analytic, robust).
    ``anchor=(model, value)`` pins that model's rating to ``value`` (in every bootstrap round too, so its
    own interval has zero width); otherwise the mean rating is 1000.
    """
    with single_threaded_blas():
        return _leaderboard(
            models,
            wins,
            tie_counts,
            both_bad_counts,
            ties=ties,
            both_bad=both_bad,
            bootstrap=bootstrap,
            seed=seed,
            anchor=anchor,
            interval=interval,
            tol=tol,
        )


def _leaderboard(
    models: tuple[str, ...] | list[str],
    wins: npt.ArrayLike,
    tie_counts: npt.ArrayLike,
    both_bad_counts: npt.ArrayLike,
    *,
    ties: str,
    both_bad: str,
    bootstrap: int,
    seed: int,
    anchor: tuple[str, float] | None,
    interval: str,
    tol: float,
) -> Leaderboard:
    names, w, t_raw, bb = validate_counts(models, wins, tie_counts, both_bad_counts)
    check_policies(ties, both_bad)
    if interval not in ("bootstrap", "sandwich"):
        raise CountsError(f"interval must be 'bootstrap' or 'sandwich', got {interval!r}")
    if int(bootstrap) < 0:
        raise CountsError(f"bootstrap rounds must be >= 0, got {bootstrap}")
    tie_mat = effective_ties(t_raw, bb, both_bad_policy=both_bad)
    pairs = fold_pairs(w, tie_mat, tie_policy=ties)
    rated_idx = np.flatnonzero(pairs.per_model_battles() > 0)
    sub = restrict(pairs, rated_idx)
    anchor_index = _anchor_index(anchor, names, rated_idx)
    anchor_value = float(anchor[1]) if anchor is not None else 0.0

    fit = fit_bt(sub, tol=tol)
    ratings = to_elo(fit.theta, anchor_index=anchor_index, anchor_value=anchor_value)
    boot = np.zeros((0, rated_idx.size))
    fallback = 0
    if interval == "sandwich":
        cov = sandwich_covariance(fit.theta, sub, fit.ridge)
        ci_low, ci_high = sandwich_interval(ratings, cov, anchor_index=anchor_index)
    elif int(bootstrap) > 0 and rated_idx.size > 1:
        result = bootstrap_rounds(sub, fit.theta, fit.ridge, rounds=int(bootstrap), seed=seed, tol=tol)
        fallback = result.fallback_rounds
        boot = to_elo(result.theta, anchor_index=anchor_index, anchor_value=anchor_value)
        ci_low, ci_high = percentile_interval(boot)
    else:
        ci_low, ci_high = ratings.copy(), ratings.copy()
    ranks = interval_ranks(ci_low, ci_high)

    rows = _rows(names, rated_idx, ratings, ci_low, ci_high, ranks, w, tie_mat)
    predicted = np.full((len(names), len(names)), np.nan)
    diff = fit.theta[:, None] - fit.theta[None, :]
    predicted[np.ix_(rated_idx, rated_idx)] = win_probability(diff.ravel()).reshape(diff.shape)
    np.fill_diagonal(predicted, np.nan)
    used_ties = tie_mat if ties == "half" else np.zeros_like(tie_mat)
    used = w + w.T + used_ties
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = np.where(used > 0, (w + 0.5 * used_ties) / used, np.nan)
    rated = set(rated_idx.tolist())
    unrated = tuple(names[i] for i in range(len(names)) if i not in rated)
    return Leaderboard(
        rows=rows,
        models=names,
        battle_counts=w + w.T + tie_mat,
        observed_win_rate=observed,
        predicted_win_rate=predicted,
        unrated=unrated,
        ridge=fit.ridge,
        interval=interval,
        bootstrap_rounds=int(boot.shape[0]),
        converged=fit.converged,
        grad_norm=fit.grad_norm,
        bootstrap_fallback_rounds=fallback,
        bootstrap_ratings=boot,
    )


def _anchor_index(
    anchor: tuple[str, float] | None, names: tuple[str, ...], rated_idx: IntArray
) -> int | None:
    if anchor is None:
        return None
    model, _value = anchor
    if model not in names:
        raise CountsError(f"anchor model {model!r} is not among the models")
    pos = np.flatnonzero(rated_idx == names.index(model))
    if pos.size == 0:
        raise CountsError(f"anchor model {model!r} has no battles, so it cannot be pinned")
    return int(pos[0])


def _rows(
    names: tuple[str, ...],
    rated_idx: IntArray,
    ratings: FloatArray,
    ci_low: FloatArray,
    ci_high: FloatArray,
    ranks: IntArray,
    wins: IntMatrix,
    tie_mat: IntMatrix,
) -> tuple[LeaderboardRow, ...]:
    won = wins.sum(axis=1)
    lost = wins.sum(axis=0)
    tied = tie_mat.sum(axis=1)
    rows = []
    for pos, m in enumerate(rated_idx.tolist()):
        rows.append(
            LeaderboardRow(
                model=names[m],
                rating=float(ratings[pos]),
                ci_low=float(ci_low[pos]),
                ci_high=float(ci_high[pos]),
                rank=int(ranks[pos]),
                battles=int(won[m] + lost[m] + tied[m]),
                wins=int(won[m]),
                losses=int(lost[m]),
                ties=int(tied[m]),
            )
        )
    rows.sort(key=lambda r: (-r.rating, r.model))
    return tuple(rows)
