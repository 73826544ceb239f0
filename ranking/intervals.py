"""Confidence intervals on Elo-scale ratings (bootstrap percentiles, sandwich) and interval ranks."""

from __future__ import annotations

import numpy as np

from ranking.bt import ELO_SCALE, newton_matrix, win_probability
from ranking.counts import FloatArray, IntArray, PairData

Z95 = 1.959963984540054


def percentile_interval(samples: FloatArray, *, level: float = 0.95) -> tuple[FloatArray, FloatArray]:
    """Percentile interval per column of ``samples`` (rounds × models), NumPy's linear quantiles."""
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(samples, [alpha, 1.0 - alpha], axis=0)
    return low, high


def sandwich_covariance(theta: FloatArray, pairs: PairData, ridge: float) -> FloatArray:
    """Robust (Huber–White) covariance ``H⁻¹ J H⁻¹`` of the centred log-strengths.

    ``J`` sums the outer products of per-battle scores ``(y − p)(e_i − e_j)``, grouped by count cell
    (``y`` = 1, 0, ½), so it stays valid when ties make the plain Bernoulli variance wrong. With λ = 0 the
    inverse is taken on the sum-zero subspace (``(L + 11ᵀ/n)⁻¹``; ``J·1 = 0`` keeps the result centred).
    """
    n = theta.size
    meat = sandwich_meat(theta, pairs)
    bread = np.linalg.inv(newton_matrix(theta, pairs, ridge))
    cov = bread @ meat @ bread
    centre = np.eye(n) - 1.0 / n
    out: FloatArray = centre @ cov @ centre
    return out


def sandwich_meat(theta: FloatArray, pairs: PairData) -> FloatArray:
    """``J``: the summed outer products of the per-battle scores at ``theta`` (see
    :func:`sandwich_covariance`); a weighted composite adds each source's ``J`` times its weight squared."""
    n = theta.size
    p = win_probability(theta[pairs.i] - theta[pairs.j])
    v = pairs.w_ij * (1.0 - p) ** 2 + pairs.w_ji * p**2 + pairs.t * (0.5 - p) ** 2
    meat = np.zeros((n, n))
    np.add.at(meat, (pairs.i, pairs.j), -v)
    meat += meat.T
    meat[np.diag_indices(n)] = -meat.sum(axis=1)
    out: FloatArray = meat
    return out


def sandwich_interval(
    ratings: FloatArray, cov: FloatArray, *, anchor_index: int | None, level: float = 0.95
) -> tuple[FloatArray, FloatArray]:
    """Normal interval ``rating ± z·se`` on the Elo scale; with an anchor, se of ``θ_i − θ_anchor``."""
    from scipy.stats import norm

    z = Z95 if level == 0.95 else float(norm.ppf(0.5 + level / 2.0))
    var = np.diagonal(cov).copy()
    if anchor_index is not None:
        var = var + cov[anchor_index, anchor_index] - 2.0 * cov[:, anchor_index]
    se = ELO_SCALE * np.sqrt(np.clip(var, 0.0, None))
    return ratings - z * se, ratings + z * se


def interval_ranks(ci_low: FloatArray, ci_high: FloatArray) -> IntArray:
    """Rank = 1 + number of models whose lower bound exceeds this model's upper bound (Chatbot Arena)."""
    low_sorted = np.sort(ci_low)
    above = low_sorted.size - np.searchsorted(low_sorted, ci_high, side="right")
    return (1 + above).astype(np.int64)
