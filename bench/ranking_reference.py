"""Reference: the Chatbot Arena Bradley-Terry method, written by us from its published description.

Kept only to measure ``ranking`` against (``python -m ranking bench``). The method, as described in
Chiang et al. 2024 (arXiv:2403.04132, §5) and the FastChat leaderboard notebooks:

1. Collapse battles to unique ``(model_a, model_b, outcome)`` rows with their counts as weights
   (outcome 1 = a won, 0 = b won, ½ = tie).
2. Fit by minimising the weighted logistic loss (weights normalised to sum to one) with SciPy's
   L-BFGS-B from zero, on log10 strengths (``P = 1 / (1 + 10^(s_b − s_a))``, ``gtol`` 1e-6, at most
   100 iterations), then ``rating = 400 s + 1000``.
3. Bootstrap: ``rounds`` multinomial draws of ``N`` battles over the unique rows, then one full
   L-BFGS-B refit per round, and percentile 2.5 / 97.5 intervals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize
from scipy.special import expit

ALPHA = math.log(10.0)  # optimise log10 strengths; ratings = SCALE · s + BASE
SCALE = 400.0


@dataclass(frozen=True)
class ReferenceResult:
    """Ratings (Elo scale, mean 1000) and percentile intervals, in model index order."""

    ratings: NDArray[np.float64]
    ci_low: NDArray[np.float64]
    ci_high: NDArray[np.float64]


def unique_rows(
    model_a: NDArray[np.int64], model_b: NDArray[np.int64], outcome: NDArray[np.float64]
) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
    """Deduplicate battles: (matchups[k, 2], outcomes[k], counts[k])."""
    keys = np.stack([model_a, model_b, np.round(outcome * 2).astype(np.int64)], axis=1)
    uniq, counts = np.unique(keys, axis=0, return_counts=True)
    return uniq[:, :2], uniq[:, 2] / 2.0, counts.astype(np.float64)


def _loss_and_grad(
    ratings: NDArray[np.float64],
    matchups: NDArray[np.int64],
    outcomes: NDArray[np.float64],
    weights: NDArray[np.float64],
) -> tuple[float, NDArray[np.float64]]:
    d = ALPHA * (ratings[matchups[:, 0]] - ratings[matchups[:, 1]])
    p = expit(d)
    eps = 1e-300
    loss = -float(np.sum(weights * (outcomes * np.log(p + eps) + (1.0 - outcomes) * np.log(1.0 - p + eps))))
    coef = ALPHA * weights * (p - outcomes)
    n = ratings.size
    grad = np.bincount(matchups[:, 0], coef, n) - np.bincount(matchups[:, 1], coef, n)
    return loss, grad.astype(np.float64)


def fit(
    matchups: NDArray[np.int64], outcomes: NDArray[np.float64], weights: NDArray[np.float64], n_models: int
) -> NDArray[np.float64]:
    """One L-BFGS-B fit; weights are normalised to sum to one as in the published code."""
    w = weights / weights.sum()
    res = minimize(
        _loss_and_grad,
        x0=np.zeros(n_models),
        args=(matchups, outcomes, w),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 100, "gtol": 1e-6},
    )
    return 1000.0 + SCALE * (res.x - res.x.mean())


def leaderboard(
    model_a: NDArray[np.int64],
    model_b: NDArray[np.int64],
    outcome: NDArray[np.float64],
    *,
    n_models: int,
    rounds: int,
    seed: int = 0,
) -> ReferenceResult:
    """MLE ratings plus ``rounds`` multinomial-bootstrap refits."""
    matchups, outcomes, counts = unique_rows(model_a, model_b, outcome)
    ratings = fit(matchups, outcomes, counts, n_models)
    rng = np.random.default_rng(seed)
    total = int(counts.sum())
    boot = np.empty((rounds, n_models))
    draws = rng.multinomial(total, counts / total, size=rounds)
    for r in range(rounds):
        boot[r] = fit(matchups, outcomes, draws[r].astype(np.float64), n_models)
    low, high = np.quantile(boot, [0.025, 0.975], axis=0)
    return ReferenceResult(ratings=ratings, ci_low=low, ci_high=high)
