"""Synthetic battles drawn from a known Bradley-Terry model with ties (tests, bench, simulations).

Ties follow a model consistent with the half-win convention: for a pair with ``σ = σ(θ_a − θ_b)``,
``P(tie) = τ·4σ(1 − σ)`` and ``P(a wins) = σ − P(tie)/2``, so that ``E[y] = σ`` with ``y`` ∈ {1, ½, 0}.
``τ`` is scaled so that the expected tie share over the drawn pairs equals ``tie_rate``; the half-win
estimator is then consistent for the true ``θ`` (needed for coverage checks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ranking.counts import A_WINS, B_WINS, TIE, FloatArray, IntArray


@dataclass(frozen=True)
class SyntheticBattles:
    """A battle stream in time order with the true log-strengths that generated it."""

    theta: FloatArray
    model_a: IntArray
    model_b: IntArray
    outcome: IntArray


def true_strengths(n_models: int, *, spread: float = 1.0, rng: np.random.Generator) -> FloatArray:
    """Centred log-strengths ~ N(0, spread²)."""
    theta = rng.normal(0.0, spread, size=n_models)
    return theta - theta.mean()


def draw_battles(
    theta: FloatArray, n_votes: int, *, tie_rate: float = 0.15, rng: np.random.Generator
) -> SyntheticBattles:
    """``n_votes`` battles between uniformly random distinct pairs, outcomes from the BT-with-ties model."""
    n = theta.size
    if n < 2:
        raise ValueError("need at least two models")
    a = rng.integers(0, n, size=n_votes)
    b = (a + rng.integers(1, n, size=n_votes)) % n
    sigma = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b])))
    shape = 4.0 * sigma * (1.0 - sigma)
    tau = min(0.5, tie_rate / float(shape.mean())) if n_votes else 0.0
    p_tie = tau * shape
    p_a = sigma - p_tie / 2.0
    u = rng.random(n_votes)
    outcome = np.where(u < p_a, A_WINS, np.where(u < p_a + p_tie, TIE, B_WINS)).astype(np.int64)
    return SyntheticBattles(
        theta=theta, model_a=a.astype(np.int64), model_b=b.astype(np.int64), outcome=outcome
    )
