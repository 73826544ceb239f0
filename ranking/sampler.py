"""Pair sampling for the next battle: spend votes where they shrink rating uncertainty most.

The asymptotic covariance of the centred log-strengths is the pseudo-inverse ``Σ`` of the Fisher
information ``F`` (the graph Laplacian weighted by ``n_ij p_ij (1 − p_ij)``; ``p`` from current ratings,
½ without them; plus a weak prior of ``PRIOR_INFORMATION`` spread evenly over all pairs so that ``F`` is
invertible from the first vote). One more battle between ``i`` and ``j`` adds ``w = p(1 − p)`` along
``x = e_i − e_j``, and by Sherman–Morrison cuts every variance at once:
``Δvar_k = w (Σx)_k² / (1 + w xᵀΣx)``. The score of a pair is the resulting drop in
``Σ_k var_k^power`` (to first order), a smooth stand-in for "the widest interval", and it accounts for
covariances: a design that only pits neighbours against each other leaves the ends of the chain poorly
tied to the rest, which a per-model count heuristic would miss.

Pairs are drawn with probability proportional to ``score^sharpness``, mixed with a share ``explore``
of uniform pairs so that every enabled model keeps being shown. Left/right is a fair coin flip.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ranking.blas import single_threaded_blas
from ranking.counts import CountsError, FloatArray

BLAS_SCOPE_MODELS = 32  # from this size on, scope BLAS to one thread (entering the scope costs ~0.5 ms)
PRIOR_INFORMATION = 0.5  # total weight of virtual even battles per model, spread over all its pairs


def _win_probabilities(n: int, ratings: npt.ArrayLike | None, scale: float) -> FloatArray:
    if ratings is None:
        return np.full((n, n), 0.5)
    r = np.asarray(ratings, dtype=np.float64)
    if r.shape != (n,) or not np.all(np.isfinite(r)):
        raise CountsError("ratings must be finite, one per model")
    out: FloatArray = 1.0 / (1.0 + 10.0 ** ((r[None, :] - r[:, None]) / scale))
    return out


def pair_gains(
    battle_counts: npt.ArrayLike,
    *,
    ratings: npt.ArrayLike | None = None,
    scale: float = 400.0,
    power: float = 6.0,
) -> FloatArray:
    """First-order drop of ``Σ_k var_k^power`` from one more battle, for every pair (0 on the diagonal)."""
    counts = np.asarray(battle_counts, dtype=np.float64)
    n = counts.shape[0]
    if counts.ndim != 2 or counts.shape != (n, n) or n < 2:
        raise CountsError("battle_counts must be a square matrix over at least two models")
    if np.any(counts < 0):
        raise CountsError("battle_counts must be non-negative")
    p = _win_probabilities(n, ratings, scale)
    w = p * (1.0 - p)
    weights = counts * w + PRIOR_INFORMATION / (n - 1)
    np.fill_diagonal(weights, 0.0)
    fisher = np.diag(weights.sum(axis=1)) - weights
    centre = np.full((n, n), 1.0 / n)
    cov = np.linalg.inv(fisher + centre) - centre  # pseudo-inverse on the sum-zero subspace
    var = np.clip(np.diagonal(cov), 1e-300, None)
    weighted = cov @ (var[:, None] ** (power - 1.0) * cov)  # Σ C Σ with C = diag(var^(power−1))
    d_w = np.diagonal(weighted)
    d_c = np.diagonal(cov)
    quad_weighted = d_w[:, None] + d_w[None, :] - 2.0 * weighted
    quad_cov = d_c[:, None] + d_c[None, :] - 2.0 * cov
    gain = power * w * quad_weighted / (1.0 + w * quad_cov)
    np.fill_diagonal(gain, 0.0)
    out: FloatArray = np.clip(gain, 0.0, None)
    return out


def sample_pair(
    battle_counts: npt.ArrayLike,
    enabled_mask: npt.ArrayLike,
    rng: np.random.Generator,
    *,
    ratings: npt.ArrayLike | None = None,
    sharpness: float = 4.0,
    explore: float = 0.1,
) -> tuple[int, int]:
    """Draw ``(left, right)`` model indices for the next battle; never the same model twice.

    ``battle_counts``: symmetric ``n × n`` battles so far; ``enabled_mask``: which models may be drawn;
    ``ratings``: optional current Elo-scale ratings (targets close matches better).
    """
    if np.asarray(enabled_mask).size < BLAS_SCOPE_MODELS:  # tiny matrices: BLAS stays single-threaded
        return draw_pair(
            battle_counts, enabled_mask, rng, ratings=ratings, sharpness=sharpness, explore=explore
        )
    with single_threaded_blas():
        return draw_pair(
            battle_counts, enabled_mask, rng, ratings=ratings, sharpness=sharpness, explore=explore
        )


def draw_pair(
    battle_counts: npt.ArrayLike,
    enabled_mask: npt.ArrayLike,
    rng: np.random.Generator,
    *,
    ratings: npt.ArrayLike | None = None,
    sharpness: float = 4.0,
    explore: float = 0.1,
) -> tuple[int, int]:
    """:func:`sample_pair` without its BLAS scope: for loops that hold one scope around many draws."""
    enabled = np.asarray(enabled_mask, dtype=bool)
    n = enabled.size
    if enabled.ndim != 1 or np.asarray(battle_counts).shape != (n, n):
        raise CountsError("battle_counts and enabled_mask disagree on the number of models")
    if enabled.sum() < 2:
        raise CountsError("need at least two enabled models to draw a pair")
    if not 0.0 <= explore <= 1.0:
        raise CountsError("explore must lie in [0, 1]")
    gain = pair_gains(battle_counts, ratings=ratings)
    allowed = np.triu(enabled[:, None] & enabled[None, :], k=1)
    score = np.where(allowed, gain, 0.0)
    top = score.max()
    weights = (score / top) ** sharpness if top > 0 else score
    uniform = allowed / allowed.sum()
    total = weights.sum()
    probs = uniform if total <= 0 else (1.0 - explore) * weights / total + explore * uniform
    flat = probs.ravel()
    k = int(rng.choice(flat.size, p=flat / flat.sum()))
    i, j = divmod(k, n)
    return (i, j) if rng.random() < 0.5 else (j, i)
