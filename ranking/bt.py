"""Bradley-Terry maximum likelihood on pairwise counts (Newton's method, Elo scale).

Model: ``P(i beats j) = σ(θ_i − θ_j)``, ties counted as half a win for each side (Chatbot Arena's
convention) unless excluded upstream. Log-likelihood over the folded pairs::

    ℓ(θ) = Σ_p W_p log σ(θ_i − θ_j) + (N_p − W_p) log σ(θ_j − θ_i) − (λ/2)‖θ‖²

The negative Hessian is the graph Laplacian weighted by ``N_p σ(1 − σ)`` (plus ``λI``), so Newton's
method costs one small ``n × n`` solve per step and converges quadratically; we iterate until the
gradient's Euclidean norm is at most ``tol`` (default 1e-8, on the *summed* log-likelihood).

**Rule for data without a finite MLE.** The MLE exists iff the directed "won at least half a battle
against" graph is strongly connected (Zermelo 1929; Ford 1957): a model with zero wins, or a group of
models never compared with the rest, would drift to ±∞. Only then a ridge prior ``λ = DEFAULT_RIDGE``
(a Gaussian prior on log-strengths with standard deviation 10 nats) is added and reported; data that has
an MLE is fitted with ``λ = 0``, exactly. Ratings are always finite, never NaN.

References: R. A. Bradley & M. E. Terry (1952), Biometrika 39:324; L. R. Ford (1957), Amer. Math.
Monthly 64:28; W.-L. Chiang et al. (2024), "Chatbot Arena", arXiv:2403.04132.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from ranking.counts import FloatArray, PairData

DEFAULT_RIDGE = 0.01
DEFAULT_TOL = 1e-8
ELO_SCALE = 400.0 / math.log(10.0)  # natural-log strength → Elo points (400·log10)
ELO_BASE = 1000.0


class FitError(RuntimeError):
    """A fit could not reach its tolerance (reported, never silently returned as converged)."""


@dataclass(frozen=True)
class BTFit:
    """Result of one fit: centred natural-log strengths and how the fit got there."""

    theta: FloatArray
    ridge: float
    iterations: int
    grad_norm: float
    converged: bool


def mle_exists(pairs: PairData) -> bool:
    """True when the "beat at least partly" digraph is strongly connected (finite MLE exists)."""
    n = pairs.n_models
    if n <= 1:
        return True
    src = np.concatenate(
        [pairs.i[pairs.effective_wins > 0], pairs.j[(pairs.battles - pairs.effective_wins) > 0]]
    )
    dst = np.concatenate(
        [pairs.j[pairs.effective_wins > 0], pairs.i[(pairs.battles - pairs.effective_wins) > 0]]
    )
    graph = coo_matrix((np.ones(src.size), (src, dst)), shape=(n, n)).tocsr()
    n_comp, _ = connected_components(graph, directed=True, connection="strong")
    return bool(n_comp == 1)


def win_probability(diff: FloatArray) -> FloatArray:
    """Numerically stable logistic σ(d)."""
    out: FloatArray = np.empty_like(diff)
    pos = diff >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-diff[pos]))
    e = np.exp(diff[~pos])
    out[~pos] = e / (1.0 + e)
    return out


def log_likelihood(theta: FloatArray, pairs: PairData, ridge: float) -> float:
    """Penalised log-likelihood ℓ(θ) (ties as half wins)."""
    d = theta[pairs.i] - theta[pairs.j]
    w = pairs.effective_wins
    ll = -(w * np.logaddexp(0.0, -d) + (pairs.battles - w) * np.logaddexp(0.0, d)).sum()
    return float(ll - 0.5 * ridge * float(theta @ theta))


def gradient(theta: FloatArray, pairs: PairData, ridge: float) -> FloatArray:
    """∂ℓ/∂θ: per pair residual ``W − N σ`` added to ``i`` and subtracted from ``j``."""
    p = win_probability(theta[pairs.i] - theta[pairs.j])
    r = pairs.effective_wins - pairs.battles * p
    n = theta.size
    g = np.bincount(pairs.i, weights=r, minlength=n) - np.bincount(pairs.j, weights=r, minlength=n)
    return g - ridge * theta


def newton_matrix(theta: FloatArray, pairs: PairData, ridge: float) -> FloatArray:
    """−Hessian (weighted Laplacian + λI), plus ``11ᵀ/n`` when λ = 0 to pin the free shift.

    Adding ``11ᵀ/n`` leaves the solution for gradients orthogonal to ``1`` unchanged (they always are
    when λ = 0) while making the matrix positive definite for a connected graph.
    """
    n = theta.size
    p = win_probability(theta[pairs.i] - theta[pairs.j])
    h = pairs.battles * p * (1.0 - p)
    mat = np.zeros((n, n))
    np.add.at(mat, (pairs.i, pairs.j), -h)
    mat += mat.T
    mat[np.diag_indices(n)] = -mat.sum(axis=1)
    mat[np.diag_indices(n)] += ridge
    if ridge == 0.0:
        mat += 1.0 / n
    return mat


def fit_bt(
    pairs: PairData,
    *,
    ridge: float | None = None,
    tol: float = DEFAULT_TOL,
    max_iter: int = 200,
    theta0: FloatArray | None = None,
) -> BTFit:
    """Maximum-likelihood Bradley-Terry strengths (natural log, mean zero).

    ``ridge=None`` applies the documented rule: 0 when the MLE exists, ``DEFAULT_RIDGE`` otherwise.
    Damped Newton (step halving on ℓ) makes the iteration safe from any start.
    """
    n = pairs.n_models
    lam = (0.0 if mle_exists(pairs) else DEFAULT_RIDGE) if ridge is None else float(ridge)
    if lam < 0:
        raise ValueError(f"ridge must be non-negative, got {lam}")
    theta = np.zeros(n) if theta0 is None else np.asarray(theta0, dtype=np.float64) - np.mean(theta0)
    if n <= 1:
        return BTFit(theta=np.zeros(n), ridge=lam, iterations=0, grad_norm=0.0, converged=True)
    ll = log_likelihood(theta, pairs, lam)
    g = gradient(theta, pairs, lam)
    for it in range(max_iter):
        g_norm = float(np.linalg.norm(g))
        if g_norm <= tol:
            theta, g_norm = _polish(theta, pairs, lam, g, g_norm)
            return BTFit(theta=theta, ridge=lam, iterations=it, grad_norm=g_norm, converged=True)
        step = np.linalg.solve(newton_matrix(theta, pairs, lam), g)
        scale = 1.0
        while True:
            cand = theta + scale * step
            ll_new = log_likelihood(cand, pairs, lam)
            if ll_new >= ll - 1e-12 * max(1.0, abs(ll)) or scale < 1e-8:
                break
            scale *= 0.5
        if lam == 0.0:
            cand = cand - cand.mean()
        if np.max(np.abs(cand - theta)) < 1e-15:
            theta = cand
            break
        theta, ll = cand, ll_new
        g = gradient(theta, pairs, lam)
    g_norm = float(np.linalg.norm(gradient(theta, pairs, lam)))
    return BTFit(theta=theta, ridge=lam, iterations=max_iter, grad_norm=g_norm, converged=g_norm <= tol)


def _polish(
    theta: FloatArray, pairs: PairData, lam: float, g: FloatArray, g_norm: float
) -> tuple[FloatArray, float]:
    """One extra Newton step once within tolerance: quadratic convergence takes the error to rounding."""
    cand = theta + np.linalg.solve(newton_matrix(theta, pairs, lam), g)
    if lam == 0.0:
        cand = cand - cand.mean()
    cand_norm = float(np.linalg.norm(gradient(cand, pairs, lam)))
    return (cand, cand_norm) if cand_norm <= g_norm else (theta, g_norm)


def to_elo(
    theta: FloatArray, *, anchor_index: int | None = None, anchor_value: float = ELO_BASE
) -> FloatArray:
    """Natural-log strengths → Elo scale: base 1000 at the mean, or the anchor model pinned to its value.

    Works on any array whose last axis is the model axis (one fit, or bootstrap rounds × models).
    """
    if theta.shape[-1] == 0:
        return np.array(theta, dtype=np.float64, copy=True)
    centred = theta - theta.mean(axis=-1, keepdims=True)
    if anchor_index is None:
        return ELO_BASE + ELO_SCALE * centred
    return anchor_value + ELO_SCALE * (centred - centred[..., anchor_index : anchor_index + 1])
