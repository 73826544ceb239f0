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
    enabled = _enabled(battle_counts, enabled_mask)
    if not 0.0 <= explore <= 1.0:
        raise CountsError("explore must lie in [0, 1]")
    gains = pair_gains(battle_counts, ratings=ratings)
    return _draw(gains, enabled, rng, sharpness=sharpness, explore=explore)


def _enabled(battle_counts: npt.ArrayLike, enabled_mask: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """The mask as booleans, checked against the counts; at least two models."""
    enabled = np.asarray(enabled_mask, dtype=bool)
    n = enabled.size
    if enabled.ndim != 1 or np.asarray(battle_counts).shape != (n, n):
        raise CountsError("battle_counts and enabled_mask disagree on the number of models")
    if enabled.sum() < 2:
        raise CountsError("need at least two enabled models to draw a pair")
    return enabled


def _draw(score: FloatArray, enabled: npt.NDArray[np.bool_], rng: np.random.Generator, *, sharpness: float,
          explore: float) -> tuple[int, int]:
    """One enabled pair with probability ∝ ``score^sharpness`` mixed with ``explore`` uniform; a fair
    coin for the seating."""
    n = enabled.size
    allowed = np.triu(enabled[:, None] & enabled[None, :], k=1)
    score = np.where(allowed, score, 0.0)
    top = score.max()
    weights = (score / top) ** sharpness if top > 0 else score
    uniform = allowed / allowed.sum()
    total = weights.sum()
    probs = uniform if total <= 0 else (1.0 - explore) * weights / total + explore * uniform
    flat = probs.ravel()
    k = int(rng.choice(flat.size, p=flat / flat.sum()))
    i, j = divmod(k, n)
    return (i, j) if rng.random() < 0.5 else (j, i)


DEFAULT_MIN_SHARE = 0.05  # every enabled model sits in at least this share of battles
UNKNOWN_PLAYABLE = 0.5  # a model with no automatic or human record: as likely to play as not


def prior_weights(
    battle_counts: npt.ArrayLike,
    *,
    ratings: npt.ArrayLike,
    sd: npt.ArrayLike,
    playable: npt.ArrayLike,
    scale: float = 400.0,
) -> FloatArray:
    """Each pair's score under a prior (the composite rating, its uncertainty and each model's chance of
    playing the scenario at all): the information one more battle adds (:func:`pair_gains` at the prior
    ratings), times how uncertain its outcome is (``4 p (1 − p)``, ``p`` the win probability averaged
    over the ratings' uncertainty, probit approximation), times the chance that at least one side can
    play (``1 − (1 − c_i)(1 − c_j)``): two models that both fail every turn teach a visitor nothing."""
    r = np.asarray(ratings, dtype=np.float64)
    s = np.asarray(sd, dtype=np.float64)
    c = np.clip(np.asarray(playable, dtype=np.float64), 0.0, 1.0)
    n = r.size
    if s.shape != (n,) or c.shape != (n,) or not (np.all(np.isfinite(r)) and np.all(np.isfinite(s))):
        raise CountsError("ratings, sd and playable must be finite, one per model")
    if np.any(s < 0):
        raise CountsError("sd must be non-negative")
    k = np.log(10.0) / scale  # Elo points to log-strength
    spread = np.sqrt(1.0 + np.pi / 8.0 * k * k * (s[:, None] ** 2 + s[None, :] ** 2))
    p = 1.0 / (1.0 + np.exp(-k * (r[:, None] - r[None, :]) / spread))
    uncertain = 4.0 * p * (1.0 - p)
    either = 1.0 - (1.0 - c[:, None]) * (1.0 - c[None, :])
    out: FloatArray = pair_gains(battle_counts, ratings=r, scale=scale) * uncertain * either
    np.fill_diagonal(out, 0.0)
    return out


def explore_for(min_share: float, enabled: int) -> float:
    """The uniform share that keeps every one of ``enabled`` models in at least ``min_share`` of the
    battles: a uniform pair holds a given model with probability 2 / enabled."""
    if not 0.0 <= min_share <= 1.0:
        raise CountsError("min_share must lie in [0, 1]")
    return min(1.0, min_share * enabled / 2.0)


def draw_prior_pair(
    battle_counts: npt.ArrayLike,
    enabled_mask: npt.ArrayLike,
    rng: np.random.Generator,
    *,
    ratings: npt.ArrayLike,
    sd: npt.ArrayLike,
    playable: npt.ArrayLike,
    min_share: float = DEFAULT_MIN_SHARE,
    sharpness: float = 2.0,
) -> tuple[int, int]:
    """Draw ``(left, right)`` by :func:`prior_weights`, mixed with uniform pairs so that every enabled
    model keeps at least ``min_share`` of the battles (:func:`explore_for`)."""
    enabled = _enabled(battle_counts, enabled_mask)
    score = prior_weights(battle_counts, ratings=ratings, sd=sd, playable=playable)
    return _draw(score, enabled, rng, sharpness=sharpness, explore=explore_for(min_share, int(enabled.sum())))
