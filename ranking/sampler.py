"""Pair sampling for the next battle: spend votes where they shrink rating uncertainty most.

Each model's rating variance is roughly ``1 / I_m`` with Fisher information
``I_m = Σ_j n_mj p_mj (1 − p_mj)`` (``p`` from current ratings, ½ without them). One more battle
between ``i`` and ``j`` adds ``p_ij(1 − p_ij)`` to both, cutting the variances by about
``p(1 − p)·(1/I_i² + 1/I_j²)``. Pairs are drawn with probability proportional to that gain raised to
``sharpness`` (concentrating on the least-known models and on close matches), mixed with a share
``explore`` of uniform pairs so that every enabled model keeps being shown. Left/right is a coin flip.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ranking.counts import CountsError, FloatArray

PRIOR_INFORMATION = 0.25  # one virtual even battle per model: unseen models get a finite, large gain


def pair_gains(battle_counts: Any, *, ratings: Any = None, scale: float = 400.0) -> FloatArray:
    """Expected variance reduction of one more battle for every ordered pair (zero on the diagonal)."""
    counts = np.asarray(battle_counts, dtype=np.float64)
    n = counts.shape[0]
    if counts.shape != (n, n):
        raise CountsError("battle_counts must be a square matrix")
    if ratings is None:
        p = np.full((n, n), 0.5)
    else:
        r = np.asarray(ratings, dtype=np.float64)
        if r.shape != (n,) or not np.all(np.isfinite(r)):
            raise CountsError("ratings must be finite, one per model")
        p = 1.0 / (1.0 + 10.0 ** ((r[None, :] - r[:, None]) / scale))
    info_pair = p * (1.0 - p)
    info = (counts * info_pair).sum(axis=1) + PRIOR_INFORMATION
    gain = info_pair * (1.0 / info[:, None] ** 2 + 1.0 / info[None, :] ** 2)
    np.fill_diagonal(gain, 0.0)
    return gain


def sample_pair(
    battle_counts: Any,
    enabled_mask: Any,
    rng: np.random.Generator,
    *,
    ratings: Any = None,
    sharpness: float = 2.0,
    explore: float = 0.1,
) -> tuple[int, int]:
    """Draw ``(left, right)`` model indices for the next battle; never the same model twice.

    ``battle_counts``: symmetric ``n × n`` battles so far; ``enabled_mask``: which models may be drawn;
    ``ratings``: optional current Elo-scale ratings (better targeting of close matches).
    """
    enabled = np.asarray(enabled_mask, dtype=bool)
    n = enabled.size
    if np.asarray(battle_counts).shape != (n, n):
        raise CountsError("battle_counts and enabled_mask disagree on the number of models")
    if enabled.sum() < 2:
        raise CountsError("need at least two enabled models to draw a pair")
    if not 0.0 <= explore <= 1.0:
        raise CountsError("explore must lie in [0, 1]")
    gain = pair_gains(battle_counts, ratings=ratings)
    allowed = np.triu(enabled[:, None] & enabled[None, :], k=1)
    weights = np.where(allowed, gain, 0.0) ** sharpness
    uniform = allowed / allowed.sum()
    total = weights.sum()
    probs = uniform if total <= 0 else (1.0 - explore) * weights / total + explore * uniform
    flat = probs.ravel()
    k = int(rng.choice(flat.size, p=flat / flat.sum()))
    i, j = divmod(k, n)
    return (i, j) if rng.random() < 0.5 else (j, i)
