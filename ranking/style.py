"""Style control: a contextual Bradley-Terry that separates *how* a reply looks from *who* wrote it.

Chatbot Arena's style control (Li et al. 2024, "Does style matter?", lmsys blog; arena-rank's
contextual BT): per battle ``b`` between ``i`` (side a) and ``j`` (side b)::

    P(a wins) = σ(θ_i − θ_j + βᵀ z_b),   z_b = z-scored (features of a − features of b)

Features that matter for fixing calendar calls: reply length, chatty text, apology, more than one line
(``STYLE_FEATURES``; the caller measures them per side). Each difference column is z-scored over the
battles (a constant column stays zero). Ties (and both-bad) count as y = ½. The fit maximises the
log-likelihood with an L2 penalty ``(λ/2)‖β‖²`` on the style coefficients only; θ stays unpenalised
(sum-zero, pinned like ``ranking.bt``) unless the plain data has no finite MLE, where ``bt``'s ridge
rule applies to θ as well. Newton's method on ``n + K`` parameters built from per-battle sums (no dense
design matrix), so a million battles cost O(battles · K). Intervals: sandwich ``H⁻¹ J H⁻¹``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ranking.bt import DEFAULT_RIDGE, ELO_SCALE, mle_exists, to_elo, win_probability
from ranking.counts import CountsError, FloatArray, IntArray, fold_pairs
from ranking.intervals import Z95, interval_ranks

STYLE_FEATURES: tuple[str, ...] = ("length", "chatty", "apology", "multiline")
DEFAULT_STYLE_L2 = 1.0


@dataclass(frozen=True)
class StyleFit:
    """Ratings with style controlled (Elo scale, mean 1000), their intervals and ranks, and β.

    ``beta`` is per z-scored feature difference (natural-log odds per standard deviation).
    """

    models: tuple[str, ...]
    ratings: FloatArray
    ci_low: FloatArray
    ci_high: FloatArray
    ranks: IntArray
    features: tuple[str, ...]
    beta: FloatArray
    beta_se: FloatArray
    iterations: int
    converged: bool


def zscore_columns(x: FloatArray) -> FloatArray:
    """Each column minus its mean over its standard deviation (constant columns become zero)."""
    mean = x.mean(axis=0) if x.shape[0] else np.zeros(x.shape[1])
    std = x.std(axis=0) if x.shape[0] else np.ones(x.shape[1])
    safe = np.where(std > 0, std, 1.0)
    out: FloatArray = np.where(std > 0, (x - mean) / safe, 0.0)
    return out


def _blocks(i: IntArray, j: IntArray, z: FloatArray, w: FloatArray, n: int) -> FloatArray:
    """Σ_b w_b x_b x_bᵀ with x_b = (e_i − e_j, z_b), as an (n + K) square matrix."""
    k = z.shape[1]
    out = np.zeros((n + k, n + k))
    tt = -np.bincount(i * n + j, weights=w, minlength=n * n).reshape(n, n)
    tt += tt.T
    tt[np.diag_indices(n)] = -tt.sum(axis=1)
    wz = w[:, None] * z
    tz = np.zeros((n, k))
    for c in range(k):
        column = wz[:, c]
        tz[:, c] = np.bincount(i, weights=column, minlength=n) - np.bincount(j, weights=column, minlength=n)
    out[:n, :n] = tt
    out[:n, n:] = tz
    out[n:, :n] = tz.T
    out[n:, n:] = z.T @ wz
    return out


def _score(i: IntArray, j: IntArray, z: FloatArray, r: FloatArray, n: int) -> FloatArray:
    g_theta = np.bincount(i, weights=r, minlength=n) - np.bincount(j, weights=r, minlength=n)
    return np.concatenate([g_theta, z.T @ r])


def _theta_ridge(i: IntArray, j: IntArray, y: FloatArray, n: int) -> float:
    winner = np.where(y == 0.0, j, i)
    loser = np.where(y == 0.0, i, j)
    decisive = y != 0.5
    wins = np.bincount(winner[decisive] * n + loser[decisive], minlength=n * n).reshape(n, n)
    ties = np.bincount(i[~decisive] * n + j[~decisive], minlength=n * n).reshape(n, n)
    ties = (ties + ties.T).astype(np.int64)
    return 0.0 if mle_exists(fold_pairs(wins, ties, tie_policy="half")) else DEFAULT_RIDGE


def fit_style_bt(
    models: tuple[str, ...] | list[str],
    model_a: NDArray[np.integer],
    model_b: NDArray[np.integer],
    outcome: NDArray[np.floating],
    features_a: NDArray[np.floating],
    features_b: NDArray[np.floating],
    *,
    features: tuple[str, ...] = STYLE_FEATURES,
    l2: float = DEFAULT_STYLE_L2,
    tol: float = 1e-8,
    max_iter: int = 100,
) -> StyleFit:
    """Contextual Bradley-Terry over battles (``outcome`` 1: a won, 0: b won, 0.5: tie or both bad).

    ``features_a``/``features_b`` are (battles × K) per-side style measurements, ``features`` their names.
    """
    names = tuple(models)
    n = len(names)
    i = np.asarray(model_a, dtype=np.int64)
    j = np.asarray(model_b, dtype=np.int64)
    y = np.asarray(outcome, dtype=np.float64)
    fa = np.asarray(features_a, dtype=np.float64)
    fb = np.asarray(features_b, dtype=np.float64)
    k = len(features)
    b = i.size
    if j.shape != (b,) or y.shape != (b,) or fa.shape != (b, k) or fb.shape != (b, k):
        raise CountsError("model_a, model_b, outcome and the (battles x features) arrays must agree")
    if b and (i.min() < 0 or j.min() < 0 or max(i.max(), j.max()) >= n or np.any(i == j)):
        raise CountsError("model indices must be in range and differ within a battle")
    if not np.all(np.isin(y, (0.0, 0.5, 1.0))):
        raise CountsError("outcomes must be 1, 0 or 0.5")
    if l2 < 0:
        raise CountsError("l2 must be non-negative")
    z = zscore_columns(fa - fb)
    ridge_theta = _theta_ridge(i, j, y, n)
    penalty = np.concatenate([np.full(n, ridge_theta), np.full(k, l2)])
    params = np.zeros(n + k)
    pin = np.zeros((n + k, n + k))
    if ridge_theta == 0.0:
        pin[:n, :n] = 1.0 / max(n, 1)
    flat = np.flatnonzero(~np.any(z != 0, axis=0))
    pin[n + flat, n + flat] = 1.0  # a constant feature has no information: its β stays exactly 0
    converged, iterations = b == 0, 0
    for iterations in range(1, max_iter + 1):  # noqa: B007 (reported)
        eta = params[i] - params[j] + z @ params[n:]
        p = win_probability(eta)
        grad = _score(i, j, z, y - p, n) - penalty * params
        if float(np.linalg.norm(grad)) <= tol:
            converged = True
            break
        hess = _blocks(i, j, z, p * (1 - p), n) + np.diag(penalty) + pin
        params = params + np.linalg.solve(hess, grad)
        if ridge_theta == 0.0:
            params[:n] -= params[:n].mean()
    eta = params[i] - params[j] + z @ params[n:]
    p = win_probability(eta)
    bread = np.linalg.inv(_blocks(i, j, z, p * (1 - p), n) + np.diag(penalty) + pin)
    meat = _blocks(i, j, z, (y - p) ** 2, n)
    cov = bread @ meat @ bread
    theta = params[:n]
    centre = np.eye(n) - 1.0 / max(n, 1)
    se_theta = ELO_SCALE * np.sqrt(np.clip(np.diagonal(centre @ cov[:n, :n] @ centre), 0.0, None))
    ratings = to_elo(theta)
    low, high = ratings - Z95 * se_theta, ratings + Z95 * se_theta
    return StyleFit(
        models=names, ratings=ratings, ci_low=low, ci_high=high, ranks=interval_ranks(low, high),
        features=tuple(features), beta=params[n:].copy(),
        beta_se=np.sqrt(np.clip(np.diagonal(cov)[n:], 0.0, None)), iterations=iterations,
        converged=converged,
    )
