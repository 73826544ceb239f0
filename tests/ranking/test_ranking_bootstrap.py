"""Exact bootstrap: multinomial draws, Poisson tables, batched refits, intervals and coverage."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.stats import chisquare, poisson

from ranking import PairData, bootstrap, fit_bt, fold_pairs, leaderboard, mle_exists, tally
from ranking import poisson as ptables
from ranking.bootstrap import (
    _Problem,
    _run_block,
    bootstrap_rounds,
    multinomial_fix,
    pair_cells,
    resample_cells,
)
from ranking.bt import ELO_SCALE, newton_matrix
from ranking.synthetic import draw_battles, true_strengths


def synthetic_counts(seed: int, n: int, votes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    theta = true_strengths(n, rng=rng)
    b = draw_battles(theta, votes, rng=rng)
    wins, ties, both_bad = tally(b.model_a, b.model_b, b.outcome, n_models=n)
    return theta, wins, ties, both_bad


def test_resample_cells_is_multinomial() -> None:
    counts = np.array([5, 0, 40, 120, 3, 832])
    total = int(counts.sum())
    draws = resample_cells(counts, rounds=20_000, rng=np.random.default_rng(0))
    assert np.all(draws.sum(axis=1) == total)
    assert np.all(draws[:, 1] == 0)
    p = counts / total
    np.testing.assert_allclose(draws.mean(axis=0), total * p, rtol=0.02, atol=0.05)
    expected_cov = total * (np.diag(p) - np.outer(p, p))
    np.testing.assert_allclose(np.cov(draws.T), expected_cov, rtol=0.06, atol=0.5)


@pytest.mark.parametrize("shift", [-30, 30])
def test_multinomial_fix_tops_up_and_thins_exactly(shift: int) -> None:
    # Rows that are all short (or all long) exercise each branch alone; totals must land exactly.
    rng = np.random.default_rng(1)
    p = np.array([0.2, 0.3, 0.5])
    rows = rng.multinomial(1000 + shift, p, size=4000)
    multinomial_fix(rows, 1000, p, rng)
    assert np.all(rows.sum(axis=1) == 1000) and np.all(rows >= 0)
    np.testing.assert_allclose(rows.mean(axis=0), 1000 * p, rtol=0.01)
    np.testing.assert_allclose(rows.var(axis=0), 1000 * p * (1 - p), rtol=0.08)


@pytest.mark.parametrize("lam", [0.0, 1.0, 3.0, 47.0, 2500.0])
def test_poisson_tables_match_pmf(lam: float) -> None:
    means = np.full(50, lam)
    tables = ptables.build_tables(means, draws_per_cell=400)
    assert tables.fallback.size == 0
    x = ptables.draw(tables, 400, np.random.default_rng(2)).ravel()
    if lam == 0.0:
        assert np.all(x == 0)
        return
    lo, hi = poisson.ppf([1e-4, 1 - 1e-4], lam).astype(int)
    edges = np.arange(lo, hi + 2)
    observed = np.histogram(np.clip(x, lo, hi), bins=edges)[0]
    pmf = poisson.pmf(np.arange(lo, hi + 1), lam)
    pmf[0] += poisson.cdf(lo - 1, lam)
    pmf[-1] += poisson.sf(hi, lam)
    assert chisquare(observed, pmf / pmf.sum() * x.size).pvalue > 1e-3


def test_poisson_fallback_for_rare_large_means() -> None:
    # A table pays off only when it serves enough draws: here the small mean's does, the huge one's not.
    tables = ptables.build_tables(np.array([5.0, 5.0, 123456.0]), draws_per_cell=200)
    assert tables.fallback.tolist() == [2]
    x = ptables.draw(tables, 2000, np.random.default_rng(3))
    assert abs(x[:, 2].mean() - 123456.0) < 30


def _problem(pairs: PairData, theta_hat: np.ndarray, *, max_chord: int, draws_per_cell: int) -> _Problem:
    m, n = pairs.i.size, pairs.n_models
    cells = pair_cells(pairs)
    positive = np.flatnonzero(cells)
    lam = cells[positive].astype(float)
    incidence = csr_matrix(
        (np.r_[np.ones(m), -np.ones(m)], (np.r_[pairs.i, pairs.j], np.r_[np.arange(m), np.arange(m)])),
        shape=(n, m),
    )
    return _Problem(
        pairs=pairs,
        theta_hat=theta_hat,
        ridge=0.0,
        incidence=incidence,
        touches=abs(incidence),
        solve=np.linalg.inv(newton_matrix(theta_hat, pairs, 0.0)),
        positive=positive,
        tables=ptables.build_tables(lam, draws_per_cell=draws_per_cell),
        total=int(lam.sum()),
        p_cells=lam / lam.sum(),
        step_tol=1e-6 / ELO_SCALE,
        max_chord=max_chord,
    )


@pytest.mark.parametrize(
    ("votes", "max_chord", "direct"),
    [
        (3000, 40, True),  # dense data: chord steps alone
        (3000, 40, False),  # the same through Poissonised draws (the path of large leaderboards)
        (150, 2, True),  # sparse data, 2 chord steps: the batched per-round Newton takes over
    ],
)
def test_block_refits_equal_independent_newton_fits(
    votes: int, max_chord: int, direct: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not direct:
        monkeypatch.setattr(bootstrap, "DIRECT_MULTINOMIAL_CELLS", 0)
    _, wins, ties, both_bad = synthetic_counts(4, 8, votes)
    pairs = fold_pairs(wins, ties + both_bad, tie_policy="half")
    fit = fit_bt(pairs)
    assert fit.ridge == 0.0
    problem = _problem(pairs, fit.theta, max_chord=max_chord, draws_per_cell=20)
    theta, stuck_cells, stuck = _run_block(problem, np.random.SeedSequence(9), 20)
    # The same child stream drawn again gives the cells of every round (the block keeps only stuck ones).
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(9)))
    if direct:
        draws = rng.multinomial(problem.total, problem.p_cells, size=20)
    else:
        draws = ptables.draw(problem.tables, 20, rng)
        multinomial_fix(draws, problem.total, problem.p_cells, rng)
    block_cells = np.zeros((20, 3 * pairs.i.size), dtype=np.int64)
    block_cells[:, problem.positive] = draws
    assert np.all(block_cells.sum(axis=1) == pair_cells(pairs).sum())
    np.testing.assert_array_equal(stuck_cells, block_cells[stuck])
    m = pairs.i.size
    checked = 0
    for r in range(20):
        one = PairData(
            n_models=8,
            i=pairs.i,
            j=pairs.j,
            w_ij=block_cells[r, :m],
            w_ji=block_cells[r, m : 2 * m],
            t=block_cells[r, 2 * m :],
        )
        if r in stuck:
            assert not mle_exists(one) or (one.per_model_battles() == 0).any()
            continue
        direct = fit_bt(one)
        np.testing.assert_allclose(theta[r] * ELO_SCALE, direct.theta * ELO_SCALE, atol=1e-5)
        checked += 1
    assert checked >= 15


def test_bootstrap_is_seeded_and_thread_independent() -> None:
    _, wins, ties, both_bad = synthetic_counts(5, 10, 5000)
    pairs = fold_pairs(wins, ties, tie_policy="half")
    fit = fit_bt(pairs)
    one = bootstrap_rounds(pairs, fit.theta, fit.ridge, rounds=300, seed=3, workers=1)
    two = bootstrap_rounds(pairs, fit.theta, fit.ridge, rounds=300, seed=3, workers=2)
    other = bootstrap_rounds(pairs, fit.theta, fit.ridge, rounds=300, seed=4, workers=2)
    np.testing.assert_array_equal(one.theta, two.theta)
    assert not np.array_equal(one.theta, other.theta)


def test_bootstrap_and_sandwich_intervals_agree_on_large_data() -> None:
    _, wins, ties, both_bad = synthetic_counts(6, 15, 60_000)
    names = tuple(f"m{k}" for k in range(15))
    boot = leaderboard(names, wins, ties, both_bad, bootstrap=1000, seed=1)
    sand = leaderboard(names, wins, ties, both_bad, interval="sandwich")
    assert boot.bootstrap_rounds == 1000 and boot.bootstrap_fallback_rounds == 0
    for b, s in zip(boot.rows, sand.rows, strict=True):
        assert b.model == s.model and b.rating == s.rating
        assert b.ci_low < b.rating < b.ci_high
        assert (b.ci_high - b.ci_low) == pytest.approx(s.ci_high - s.ci_low, rel=0.15)


def _coverage(interval: str, draws: int, votes: int, rounds: int) -> float:
    n = 10
    rng = np.random.default_rng(123)
    theta = true_strengths(n, rng=rng)
    truth = 1000.0 + ELO_SCALE * (theta - theta.mean())
    names = tuple(f"m{k}" for k in range(n))
    hits = total = 0
    for d in range(draws):
        b = draw_battles(theta, votes, rng=rng)
        wins, ties, both_bad = tally(b.model_a, b.model_b, b.outcome, n_models=n)
        board = leaderboard(names, wins, ties, both_bad, interval=interval, bootstrap=rounds, seed=d)
        for row in board.rows:
            t = truth[names.index(row.model)]
            hits += row.ci_low <= t <= row.ci_high
            total += 1
    return hits / total


def test_sandwich_coverage_of_true_ratings() -> None:
    assert 0.93 <= _coverage("sandwich", draws=200, votes=4000, rounds=0) <= 0.97


@pytest.mark.slow
@pytest.mark.parametrize("direct", [True, False], ids=["numpy-multinomial", "poissonised"])
def test_bootstrap_coverage_of_true_ratings(direct: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not direct:
        monkeypatch.setattr(bootstrap, "DIRECT_MULTINOMIAL_CELLS", 0)
    assert 0.93 <= _coverage("bootstrap", draws=200, votes=4000, rounds=1000) <= 0.97


def test_rounds_that_lose_a_model_fall_back_to_the_ridge_rule() -> None:
    # "C" won once and lost once: a resample drops its only win (or its only loss) with probability
    # about 1 − (1 − e⁻¹)² ≈ 60%, leaving no finite MLE (or no battle at all, ≈ e⁻² of rounds).
    wins = np.array([[0, 30, 1], [25, 0, 0], [0, 1, 0]])
    pairs = fold_pairs(wins, np.zeros((3, 3), dtype=np.int64), tie_policy="half")
    fit = fit_bt(pairs)
    assert fit.ridge == 0.0
    result = bootstrap_rounds(pairs, fit.theta, fit.ridge, rounds=400, seed=0)
    assert 180 < result.fallback_rounds < 320
    # Nearly all of them lack an MLE; the few others only converged slowly and got an exact refit.
    assert 0.9 * result.fallback_rounds <= result.ridge_rounds <= result.fallback_rounds
    assert np.all(np.isfinite(result.theta))


@pytest.mark.parametrize("start", ["empty", "long"])
def test_multinomial_fix_on_large_tables_keeps_multinomial_law(start: str) -> None:
    # 5000 cells take the sorted-search top-up path: from empty rows it alone must build
    # multinomial(N, p) (group sums binomial(N, P_g)); rows a little long are thinned to exactly N.
    rng = np.random.default_rng(5)
    k, total, rounds = 5000, 5000, 400
    p = rng.dirichlet(np.ones(k))
    if start == "empty":
        rows = np.zeros((rounds, k), dtype=np.int64)
    else:
        rows = rng.multinomial(total + 300, p, size=rounds)
    multinomial_fix(rows, total, p, rng)
    assert np.all(rows.sum(axis=1) == total) and np.all(rows >= 0)
    groups = np.array_split(np.arange(k), 5)
    sums = np.stack([rows[:, g].sum(axis=1) for g in groups], axis=1)
    big_p = np.array([p[g].sum() for g in groups])
    np.testing.assert_allclose(sums.mean(axis=0), total * big_p, rtol=0.01)
    np.testing.assert_allclose(sums.var(axis=0), total * big_p * (1 - big_p), rtol=0.2)


def test_thinning_half_of_a_multinomial_leaves_a_multinomial() -> None:
    # Removing a uniform half of multinomial(2N, p) battles leaves multinomial(N, p): variance
    # N p (1 − p). Removing proportionally (or from fixed cells) would shrink or skew it.
    rng = np.random.default_rng(6)
    p = np.array([0.1, 0.3, 0.6])
    rows = rng.multinomial(400, p, size=6000)
    multinomial_fix(rows, 200, p, rng)
    assert np.all(rows.sum(axis=1) == 200)
    np.testing.assert_allclose(rows.mean(axis=0), 200 * p, rtol=0.01)
    np.testing.assert_allclose(rows.var(axis=0), 200 * p * (1 - p), rtol=0.06)
