"""Bradley-Terry fit: known answers, choix agreement, convergence, the ridge rule, synthetic truth."""

from __future__ import annotations

import math

import choix
import numpy as np
import pytest
from scipy.stats import spearmanr

from ranking import ELO_SCALE, CountsError, fit_bt, fold_pairs, leaderboard, mle_exists, tally
from ranking.bt import gradient
from ranking.synthetic import draw_battles, true_strengths


def zeros(n: int) -> np.ndarray:
    return np.zeros((n, n), dtype=np.int64)


def random_counts(rng: np.random.Generator, n: int, scale: int = 30) -> tuple[np.ndarray, np.ndarray]:
    wins = rng.integers(1, scale, size=(n, n))
    np.fill_diagonal(wins, 0)
    ties = rng.integers(0, scale // 3, size=(n, n))
    ties = np.triu(ties, 1)
    return wins, ties + ties.T


def test_two_models_known_answer() -> None:
    # A beat B 3 times, lost once: MLE odds 3:1, so r_A − r_B = 400·log10(3) ≈ 190.85 around 1000.
    wins = np.array([[0, 3], [1, 0]])
    board = leaderboard(("A", "B"), wins, zeros(2), zeros(2), bootstrap=0)
    gap = 400 * math.log10(3)
    assert board.rating_of("A") == pytest.approx(1000 + gap / 2, abs=1e-9)
    assert board.rating_of("B") == pytest.approx(1000 - gap / 2, abs=1e-9)
    assert board.ridge == 0.0


def test_ties_count_half_or_are_excluded() -> None:
    # 2 wins, 0 losses, 2 ties: half-ties give 3:1 (same as above); excluding ties leaves no MLE.
    wins = np.array([[0, 2], [0, 0]])
    ties = np.array([[0, 2], [2, 0]])
    half = leaderboard(("A", "B"), wins, ties, zeros(2), bootstrap=0)
    assert half.rating_of("A") - half.rating_of("B") == pytest.approx(400 * math.log10(3), abs=1e-9)
    excluded = leaderboard(("A", "B"), wins, ties, zeros(2), ties="exclude", bootstrap=0)
    assert excluded.ridge > 0  # A never lost: no finite MLE, the ridge rule applies
    assert excluded.rating_of("A") > excluded.rating_of("B")


def test_both_bad_as_tie_or_excluded() -> None:
    wins = np.array([[0, 2], [0, 0]])
    both_bad = np.array([[0, 2], [2, 0]])
    as_tie = leaderboard(("A", "B"), wins, zeros(2), both_bad, bootstrap=0)
    assert as_tie.rating_of("A") - as_tie.rating_of("B") == pytest.approx(400 * math.log10(3), abs=1e-9)
    assert as_tie.rows[0].ties == 2 and as_tie.rows[0].battles == 4
    dropped = leaderboard(("A", "B"), wins, zeros(2), both_bad, both_bad="exclude", bootstrap=0)
    assert dropped.rows[0].ties == 0 and dropped.rows[0].battles == 2


def test_chain_known_answer() -> None:
    # A–B 2:1 and B–C 2:1 with no A–C battles: on a tree the MLE reproduces every edge's odds exactly.
    wins = np.array([[0, 2, 0], [1, 0, 2], [0, 1, 0]])
    board = leaderboard(("A", "B", "C"), wins, zeros(3), zeros(3), bootstrap=0)
    step = 400 * math.log10(2)
    assert board.rating_of("A") - board.rating_of("B") == pytest.approx(step, abs=1e-9)
    assert board.rating_of("B") - board.rating_of("C") == pytest.approx(step, abs=1e-9)
    assert board.rating_of("B") == pytest.approx(1000.0, abs=1e-9)  # mean of the three is 1000


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_agrees_with_choix(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 12
    wins, ties = random_counts(rng, n)
    pairs = fold_pairs(wins, ties, tie_policy="half")
    fit = fit_bt(pairs)
    assert fit.converged and fit.grad_norm <= 1e-8 and fit.ridge == 0.0
    params = choix.ilsr_pairwise_dense(wins + 0.5 * ties, alpha=0.0, tol=1e-12, max_iter=10_000)
    np.testing.assert_allclose(fit.theta - fit.theta.mean(), params - params.mean(), atol=1e-6)


def test_sparse_random_agrees_with_choix_opt_pairwise() -> None:
    rng = np.random.default_rng(7)
    n = 8
    theta = rng.normal(size=n)
    battles = draw_battles(theta, 400, tie_rate=0.0, rng=rng)
    wins, ties, both_bad = tally(battles.model_a, battles.model_b, battles.outcome, n_models=n)
    fit = fit_bt(fold_pairs(wins, ties, tie_policy="half"))
    data = [(int(w), int(lo)) for w, lo in zip(*np.nonzero(wins), strict=True) for _ in range(wins[w, lo])]
    params = choix.opt_pairwise(n, data, alpha=0.0, method="BFGS", tol=1e-12)
    np.testing.assert_allclose(fit.theta, params - params.mean(), atol=1e-5)
    # choix's BFGS stops at 1e-5; our Newton gradient is at machine precision.
    assert np.linalg.norm(gradient(fit.theta, fold_pairs(wins, ties, tie_policy="half"), 0.0)) <= 1e-8


def test_zero_wins_and_disconnected_use_reported_ridge() -> None:
    # C lost every battle; D–E only ever met each other. No finite MLE: ridge rule, finite ratings.
    wins = zeros(5)
    wins[0, 1], wins[1, 0] = 3, 2
    wins[0, 2], wins[1, 2] = 4, 1
    wins[3, 4], wins[4, 3] = 2, 2
    assert not mle_exists(fold_pairs(wins, zeros(5), tie_policy="half"))
    board = leaderboard(tuple("ABCDE"), wins, zeros(5), zeros(5), bootstrap=50)
    assert board.ridge > 0
    for row in board.rows:
        assert all(math.isfinite(v) for v in (row.rating, row.ci_low, row.ci_high))
    assert board.rows[-1].model == "C"


def test_unplayed_model_is_unrated_and_changes_no_one() -> None:
    rng = np.random.default_rng(3)
    wins, ties = random_counts(rng, 4)
    base = leaderboard(tuple("ABCD"), wins, ties, zeros(4), bootstrap=100, seed=5)
    big_w = np.zeros((5, 5), dtype=np.int64)
    big_t = np.zeros((5, 5), dtype=np.int64)
    big_w[:4, :4], big_t[:4, :4] = wins, ties
    grown = leaderboard(tuple("ABCDE"), big_w, big_t, zeros(5), bootstrap=100, seed=5)
    assert grown.unrated == ("E",)
    assert grown.rows == base.rows


def test_anchor_pins_rating_and_keeps_gaps() -> None:
    rng = np.random.default_rng(4)
    wins, ties = random_counts(rng, 5)
    names = tuple("ABCDE")
    free = leaderboard(names, wins, ties, zeros(5), bootstrap=200)
    pinned = leaderboard(names, wins, ties, zeros(5), bootstrap=200, anchor=("C", 1200.0))
    assert pinned.rating_of("C") == pytest.approx(1200.0, abs=1e-9)
    row_c = next(r for r in pinned.rows if r.model == "C")
    assert row_c.ci_low == pytest.approx(1200.0) and row_c.ci_high == pytest.approx(1200.0)
    for m in names:
        assert pinned.rating_of(m) - 1200.0 == pytest.approx(
            free.rating_of(m) - free.rating_of("C"), abs=1e-9
        )
    with pytest.raises(CountsError, match="anchor"):
        leaderboard(names, wins, ties, zeros(5), anchor=("Z", 1.0))


def test_synthetic_truth_one_million_votes() -> None:
    rng = np.random.default_rng(11)
    theta = true_strengths(100, rng=rng)
    battles = draw_battles(theta, 1_000_000, tie_rate=0.15, rng=rng)
    assert 0.13 < np.mean(battles.outcome == 2) < 0.17
    wins, ties, both_bad = tally(battles.model_a, battles.model_b, battles.outcome, n_models=100)
    names = tuple(f"m{k}" for k in range(100))
    board = leaderboard(names, wins, ties, both_bad, bootstrap=0)
    assert board.converged and board.grad_norm <= 1e-8
    ratings = np.array([board.rating_of(m) for m in names])
    assert spearmanr(ratings, theta).statistic >= 0.999
    # Ties are drawn consistently with the half-win convention, so the MLE targets the true θ.
    np.testing.assert_allclose((ratings - 1000.0) / ELO_SCALE, theta, atol=0.08)


@pytest.mark.parametrize(
    ("wins", "message"),
    [
        (np.array([[0, 1], [1]], dtype=object), "shape|numeric"),
        (np.array([[0, -1], [1, 0]]), "non-negative"),
        (np.array([[1, 1], [1, 0]]), "diagonal"),
        (np.array([[0, 0.5], [1, 0]]), "whole numbers"),
    ],
)
def test_bad_counts_raise(wins: np.ndarray, message: str) -> None:
    with pytest.raises(CountsError, match=message):
        leaderboard(("A", "B"), wins, zeros(2), zeros(2))


def test_bad_options_raise() -> None:
    wins = np.array([[0, 1], [1, 0]])
    with pytest.raises(CountsError, match="symmetric"):
        leaderboard(("A", "B"), wins, np.array([[0, 1], [0, 0]]), zeros(2))
    with pytest.raises(CountsError, match="ties must be"):
        leaderboard(("A", "B"), wins, zeros(2), zeros(2), ties="third")
    with pytest.raises(CountsError, match="interval"):
        leaderboard(("A", "B"), wins, zeros(2), zeros(2), interval="bayes")
    with pytest.raises(CountsError, match="unique"):
        leaderboard(("A", "A"), wins, zeros(2), zeros(2))
