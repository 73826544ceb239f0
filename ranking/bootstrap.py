"""Exact bootstrap of battles: multinomial resampling of count cells, and batched Bradley-Terry refits.

**Draws.** Resampling ``N`` battles with replacement is a multinomial over the count cells
(pair × {i won, j won, tie}), as Chatbot Arena does. Drawing it cell by cell (binomial chain) costs a
sequential binomial per cell and round. We draw it exactly, faster, by Poissonisation: independent
``X_k ~ Poisson(c_k)`` (``c_k`` = observed count, so ``λ = N p_k``) are, given their total ``T``,
multinomial(``T``, p). If ``T < N`` we add ``N − T`` categorical draws; if ``T > N`` we remove ``T − N``
battles chosen uniformly without replacement (thinning an i.i.d. sample keeps it i.i.d.). Either way the
result is exactly multinomial(``N``, p); ``|T − N|`` is only about ``0.8√N`` per round. The Poisson
draws themselves use inversion tables shared by cells with equal counts (:mod:`ranking.poisson`).
With few cells (≤ ``DIRECT_MULTINOMIAL_CELLS``) NumPy's multinomial is cheaper and is used instead.

**Refits.** Each round's MLE is found from the full-data MLE by chord Newton steps with the full-data
Hessian (inverted once): bootstrap counts differ from the data by O(1/√n) per pair, so each step gains
about one digit, and all rounds of a block advance together as ``models × rounds`` array operations. A
round stops when its step moves no rating by more than ``step_tol`` Elo points (default 1e-6). Rounds
still moving after ``max_chord`` steps (sparse data, where resamples differ a lot) continue with full
Newton steps using their own Hessians, solved as one batch. Rounds that still do not settle (no finite
MLE in that round) and rounds in which a model drew no battle at all are refitted one by one with damped
Newton and the ridge rule of :mod:`ranking.bt`.

Rounds are processed in fixed blocks, each with its own child stream of the seed, on a small thread
pool (NumPy releases the GIL): results depend on the seed only, never on the number of threads.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.sparse import csr_matrix

from ranking import poisson
from ranking.bt import DEFAULT_TOL, ELO_SCALE, fit_bt, newton_matrix, win_probability
from ranking.counts import FloatArray, IntArray, PairData

# Up to this many cells NumPy's own multinomial (one binomial per cell) beats Poissonisation, whose
# fix-up costs about √N per round whatever the number of cells (20 models: 570 cells, 3× faster).
DIRECT_MULTINOMIAL_CELLS = 2048
BLOCK_ELEMENTS = 150_000  # pairs × rounds per block: each work array (~1.2 MB) stays in a core's L2
DEFAULT_STEP_TOL = 1e-6  # Elo points


@dataclass(frozen=True)
class BootstrapResult:
    """``theta[r, m]``: refitted log-strength of model ``m`` in round ``r`` (mean zero per round)."""

    theta: FloatArray
    fallback_rounds: int
    ridge_rounds: int


def pair_cells(pairs: PairData) -> IntArray:
    """The count cells in a fixed order: all ``i``-won cells, then ``j``-won, then ties."""
    return np.concatenate([pairs.w_ij, pairs.w_ji, pairs.t])


SORTED_SEARCH_CELLS = 4096  # from this many cells on, sorted queries beat random ones (cache)


def multinomial_fix(draws: IntArray, total: int, p: FloatArray, rng: np.random.Generator) -> None:
    """Turn Poisson rows into exact multinomial(``total``, p) rows in place (top up or thin)."""
    sums = draws.sum(axis=1)
    k = draws.shape[1]
    short = np.flatnonzero(sums < total)
    if short.size:
        extra = total - sums[short]
        cdf = np.cumsum(p)
        cdf /= cdf[-1]
        rows = np.repeat(short, extra)
        u = rng.random(rows.size)
        if k >= SORTED_SEARCH_CELLS:
            # Sorted queries walk forward through a large table; the draws are i.i.d., so which row
            # gets which one only needs to be random: shuffle the rows instead of the draws.
            u.sort()
            rng.shuffle(rows)
        cells = np.minimum(np.searchsorted(cdf, u, side="right"), k - 1)
        np.add.at(draws, (rows, cells), 1)
    long = np.flatnonzero(sums > total)
    if long.size:
        _thin(draws, long, sums[long] - total, rng)


def _thin(draws: IntArray, rows: IntArray, excess: IntArray, rng: np.random.Generator) -> None:
    """Remove ``excess[r]`` battles, uniformly without replacement, from each of ``rows``.

    The battles of all these rows are numbered consecutively in cell order (row after row). Each row
    draws its numbers with replacement inside its own range and redraws collisions (about ``m²/2T``)
    until they are distinct; the procedure is symmetric in the battles, so the removed set is a
    uniform subset. One sort serves both the collision check and the search for the battles' cells.
    """
    sub = draws[rows]
    totals = sub.sum(axis=1)
    starts = np.concatenate([[0], np.cumsum(totals)[:-1]])
    row_of = np.repeat(np.arange(rows.size), excess)
    keys = starts[row_of] + (rng.random(row_of.size) * totals[row_of]).astype(np.int64)
    while True:
        keys.sort()
        dup = np.flatnonzero(keys[1:] == keys[:-1]) + 1
        if dup.size == 0:
            break
        owner = np.searchsorted(starts, keys[dup], side="right") - 1
        keys[dup] = starts[owner] + (rng.random(dup.size) * totals[owner]).astype(np.int64)
    hit = np.searchsorted(np.cumsum(sub.ravel()), keys, side="right")
    np.subtract.at(sub, np.divmod(hit, sub.shape[1]), 1)
    draws[rows] = sub


def resample_cells(counts: IntArray, *, rounds: int, rng: np.random.Generator) -> IntArray:
    """``rounds`` exact multinomial(``sum(counts)``, counts/sum) draws, shape ``(rounds, cells)``."""
    counts = np.asarray(counts, dtype=np.int64)
    out = np.zeros((max(rounds, 0), counts.size), dtype=np.int64)
    positive = np.flatnonzero(counts)
    if rounds <= 0 or positive.size == 0:
        return out
    lam = counts[positive].astype(np.float64)
    tables = poisson.build_tables(lam, draws_per_cell=rounds)
    draws = poisson.draw(tables, rounds, rng)
    multinomial_fix(draws, int(counts.sum()), lam / lam.sum(), rng)
    out[:, positive] = draws
    return out


@dataclass(frozen=True)
class _Problem:
    """Everything a block needs, shared read-only between threads."""

    pairs: PairData
    theta_hat: FloatArray
    ridge: float
    incidence: csr_matrix  # models × pairs, +1 at i, −1 at j: gradient = D (W − N p)
    touches: csr_matrix  # |D|: battles per model = |D| N
    solve: FloatArray  # inverse of the full-data Newton matrix
    positive: IntArray  # cells with a non-zero count
    tables: poisson.PoissonTables
    total: int
    p_cells: FloatArray
    step_tol: float
    max_chord: int


def bootstrap_rounds(
    pairs: PairData,
    theta_hat: FloatArray,
    ridge: float,
    *,
    rounds: int,
    seed: int,
    tol: float = DEFAULT_TOL,
    step_tol: float = DEFAULT_STEP_TOL,
    max_chord: int = 12,
    workers: int | None = None,
) -> BootstrapResult:
    """Refitted strengths for ``rounds`` exact bootstrap resamples of the battles behind ``pairs``."""
    n = theta_hat.size
    if rounds <= 0:
        return BootstrapResult(theta=np.zeros((0, n)), fallback_rounds=0, ridge_rounds=0)
    cells = pair_cells(pairs)
    positive = np.flatnonzero(cells)
    lam = cells[positive].astype(np.float64)
    n_pairs = pairs.i.size
    rows = np.concatenate([pairs.i, pairs.j])
    cols = np.concatenate([np.arange(n_pairs), np.arange(n_pairs)])
    vals = np.concatenate([np.ones(n_pairs), -np.ones(n_pairs)])
    incidence = csr_matrix((vals, (rows, cols)), shape=(n, n_pairs))
    problem = _Problem(
        pairs=pairs,
        theta_hat=theta_hat,
        ridge=ridge,
        incidence=incidence,
        touches=abs(incidence),
        solve=np.asarray(np.linalg.inv(newton_matrix(theta_hat, pairs, ridge)), dtype=np.float64),
        positive=positive,
        tables=poisson.build_tables(
            lam if lam.size > DIRECT_MULTINOMIAL_CELLS else lam[:0], draws_per_cell=rounds
        ),
        total=int(lam.sum()),
        p_cells=lam / lam.sum(),
        step_tol=step_tol / ELO_SCALE,
        max_chord=max_chord,
    )
    block = int(np.clip(BLOCK_ELEMENTS // max(1, n_pairs), 8, 250))
    sizes = [min(block, rounds - start) for start in range(0, rounds, block)]
    seeds = np.random.SeedSequence(seed).spawn(len(sizes))
    workers = workers or max(1, min(2, os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        blocks = list(pool.map(lambda a: _run_block(problem, *a), zip(seeds, sizes, strict=True)))
    theta = np.concatenate([b[0] for b in blocks], axis=0)
    ridge_rounds = fallback = 0
    offsets = np.cumsum([0, *sizes])
    for k, (_, stuck_cells, stuck) in enumerate(blocks):
        for cells_row, r in zip(stuck_cells, stuck, strict=True):
            fit = fit_bt(
                _round_pairs(pairs, cells_row), ridge=ridge if ridge else None, tol=tol, theta0=theta_hat
            )
            ridge_rounds += int(fit.ridge > 0 and ridge == 0)
            theta[offsets[k] + r] = fit.theta
            fallback += 1
    return BootstrapResult(theta=theta, fallback_rounds=fallback, ridge_rounds=ridge_rounds)


def _round_pairs(pairs: PairData, cells: IntArray) -> PairData:
    m = pairs.i.size
    return PairData(
        n_models=pairs.n_models, i=pairs.i, j=pairs.j, w_ij=cells[:m], w_ji=cells[m : 2 * m], t=cells[2 * m :]
    )


def _run_block(
    problem: _Problem, seed: np.random.SeedSequence, size: int
) -> tuple[FloatArray, IntArray, list[int]]:
    """Draw one block of rounds and refit them: (theta rows, cells of stuck rounds, their indices)."""
    rng = np.random.Generator(np.random.PCG64(seed))
    if problem.positive.size <= DIRECT_MULTINOMIAL_CELLS:
        draws = rng.multinomial(problem.total, problem.p_cells, size=size)
    else:
        draws = poisson.draw(problem.tables, size, rng)
        multinomial_fix(draws, problem.total, problem.p_cells, rng)
    pairs = problem.pairs
    m = pairs.i.size
    if problem.positive.size == 3 * m:
        cells = draws  # every cell has battles: no scatter needed
    else:
        cells = np.zeros((size, 3 * m), dtype=np.int64)
        cells[:, problem.positive] = draws
    trans = cells.T.astype(np.float64)  # (3 × pairs, rounds)
    battles = trans[:m] + trans[m : 2 * m] + trans[2 * m :]
    wins = trans[:m] + 0.5 * trans[2 * m :]
    # A model that lost all its battles in the resample has a flat likelihood: the chord would leave it
    # wherever its neighbours pushed it. Such rounds get the ridge rule like any round without an MLE.
    empty = (problem.touches @ battles == 0).any(axis=0)
    theta, active = _chord(problem, wins, battles)
    slow = np.flatnonzero(active & ~empty)
    if slow.size:  # sparse data: per-round Hessians converge where the shared one crawls
        theta[:, slow], ok = _newton_rounds(problem, wins[:, slow], battles[:, slow], theta[:, slow])
        active[slow[ok]] = False
    theta -= theta.mean(axis=0)
    stuck = np.flatnonzero(active | empty)
    return theta.T, cells[stuck], stuck.tolist()


def _chord(problem: _Problem, wins: FloatArray, battles: FloatArray) -> tuple[FloatArray, NDArray[np.bool_]]:
    """Chord Newton on a (pairs × rounds) block; in-place arithmetic keeps temporaries out of the loop."""
    pairs = problem.pairs
    size = wins.shape[1]
    theta = np.repeat(problem.theta_hat[:, None], size, axis=1)
    active = np.ones(size, dtype=bool)
    s_i = np.empty_like(wins)
    buf = np.empty_like(wins)
    p_hat = win_probability(problem.theta_hat[pairs.i] - problem.theta_hat[pairs.j])[:, None]
    for it in range(problem.max_chord):
        if it == 0:  # every round starts at θ̂, where p is known per pair
            np.multiply(battles, p_hat, out=buf)
        else:
            strength = np.exp(np.clip(theta, -60.0, 60.0))
            np.take(strength, pairs.i, axis=0, out=s_i)
            np.take(strength, pairs.j, axis=0, out=buf)
            buf += s_i
            np.divide(s_i, buf, out=buf)  # p = σ(θ_i − θ_j)
            buf *= battles
        np.subtract(wins, buf, out=buf)  # residual W − N p
        grad = problem.incidence @ buf
        if problem.ridge:
            grad -= problem.ridge * theta
        step = problem.solve @ grad
        moving = np.abs(step).max(axis=0) > problem.step_tol
        step[:, ~active] = 0.0
        theta += step
        active &= moving
        if not active.any():
            break
    return theta, active


def _newton_rounds(
    problem: _Problem, wins: FloatArray, battles: FloatArray, theta: FloatArray, max_iter: int = 15
) -> tuple[FloatArray, NDArray[np.bool_]]:
    """Full Newton with each round's own Hessian (batched solves); returns (theta, converged mask)."""
    pairs = problem.pairs
    n, k = theta.shape
    theta = theta.copy()
    lin_ij = pairs.i * n + pairs.j
    lin_ji = pairs.j * n + pairs.i
    diag = np.arange(n) * (n + 1)
    active = np.ones(k, dtype=bool)
    failed = np.zeros(k, dtype=bool)
    for _ in range(max_iter):
        p = win_probability(np.clip(theta[pairs.i] - theta[pairs.j], -60.0, 60.0))
        grad = problem.incidence @ (wins - battles * p) - problem.ridge * theta
        h = battles * p * (1.0 - p)
        hess = np.zeros((k, n * n))
        hess[:, lin_ij] = -h.T
        hess[:, lin_ji] = -h.T
        hess[:, diag] = (problem.touches @ h).T + problem.ridge
        if not problem.ridge:
            hess += 1.0 / n  # pins the free shift, as in ranking.bt.newton_matrix
        try:
            step = np.linalg.solve(hess.reshape(k, n, n), grad.T[..., None])[..., 0].T
        except np.linalg.LinAlgError:  # a disconnected round: leave all to the one-by-one fallback
            return theta, np.zeros(k, dtype=bool)
        failed |= ~np.isfinite(step).all(axis=0)
        step[:, failed | ~active] = 0.0
        theta += step
        active &= np.abs(step).max(axis=0) > problem.step_tol
        if not (active & ~failed).any():
            break
    return theta, ~active & ~failed
