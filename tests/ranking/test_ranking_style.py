"""Style-controlled (contextual) Bradley-Terry: plain BT when style is flat, an independent optimiser
agrees, and a style-driven winner loses its lead."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from ranking.bt import ELO_SCALE, fit_bt, to_elo
from ranking.counts import CountsError, fold_pairs
from ranking.style import STYLE_FEATURES, fit_style_bt, zscore_columns

K = len(STYLE_FEATURES)


def _battles(rng: np.random.Generator, n_models: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    a = rng.integers(0, n_models, n)
    b = (a + rng.integers(1, n_models, n)) % n_models
    return a, b


def test_flat_style_gives_plain_bradley_terry() -> None:
    rng = np.random.default_rng(1)
    a, b = _battles(rng, 4, 600)
    strength = np.array([0.8, 0.2, -0.3, -0.7])
    p = 1 / (1 + np.exp(-(strength[a] - strength[b])))
    u = rng.random(600)
    y = np.where(u < 0.1, 0.5, (u < p).astype(float))
    flat = np.ones((600, K))
    fit = fit_style_bt(["m0", "m1", "m2", "m3"], a, b, y, flat, flat)
    wins = np.zeros((4, 4), dtype=np.int64)
    ties = np.zeros((4, 4), dtype=np.int64)
    np.add.at(wins, (a[y == 1], b[y == 1]), 1)
    np.add.at(wins, (b[y == 0], a[y == 0]), 1)
    np.add.at(ties, (a[y == 0.5], b[y == 0.5]), 1)
    np.add.at(ties, (b[y == 0.5], a[y == 0.5]), 1)
    plain = to_elo(fit_bt(fold_pairs(wins, ties, tie_policy="half")).theta)
    np.testing.assert_allclose(fit.ratings, plain, atol=1e-6)
    assert fit.converged and np.allclose(fit.beta, 0.0)


def test_agrees_with_an_independent_optimiser() -> None:
    rng = np.random.default_rng(7)
    a, b = _battles(rng, 3, 300)
    fa, fb = rng.normal(size=(300, K)), rng.normal(size=(300, K))
    y = (rng.random(300) < 0.5).astype(float)
    y[:30] = 0.5
    l2 = 2.0
    fit = fit_style_bt(["x", "y", "z"], a, b, y, fa, fb, l2=l2)
    z = zscore_columns(fa - fb)

    def loss(params: np.ndarray) -> float:
        theta = np.concatenate([[0.0], params[:2]])  # θ_0 fixed: the same model up to a shift
        eta = theta[a] - theta[b] + z @ params[2:]
        ll = y * -np.logaddexp(0, -eta) + (1 - y) * -np.logaddexp(0, eta)
        return float(-ll.sum() + 0.5 * l2 * params[2:] @ params[2:])

    ref = minimize(loss, np.zeros(2 + K), method="BFGS", options={"gtol": 1e-9})
    theta = np.concatenate([[0.0], ref.x[:2]])
    np.testing.assert_allclose(fit.ratings, to_elo(theta), atol=1e-3)
    np.testing.assert_allclose(fit.beta, ref.x[2:], atol=1e-5)


def test_a_model_that_wins_by_length_loses_its_lead() -> None:
    """Equal models; long replies win (β_length = 1.5 per sd). Plain BT ranks the long-winded model first;
    style control recovers β and puts the models level."""
    rng = np.random.default_rng(3)
    n = 6000
    a, b = _battles(rng, 3, n)
    typical_length = np.array([400.0, 100.0, 100.0])  # model 0 writes four times as much
    fa = np.zeros((n, K))
    fb = np.zeros((n, K))
    fa[:, 0] = typical_length[a] * rng.uniform(0.5, 1.5, n)
    fb[:, 0] = typical_length[b] * rng.uniform(0.5, 1.5, n)
    z = zscore_columns(fa - fb)
    y = (rng.random(n) < 1 / (1 + np.exp(-1.5 * z[:, 0]))).astype(float)
    styled = fit_style_bt(["verbose", "terse1", "terse2"], a, b, y, fa, fb, l2=0.0)
    flat = fit_style_bt(["verbose", "terse1", "terse2"], a, b, y, np.zeros((n, K)), np.zeros((n, K)))
    assert flat.ratings[0] - flat.ratings[1] > 100 and list(flat.ranks) == [1, 2, 2]  # fooled
    # Level within about two standard errors (~12 Elo here), and no longer ranked apart.
    assert abs(styled.ratings[0] - styled.ratings[1]) < 0.25 * ELO_SCALE and list(styled.ranks) == [1, 1, 1]
    assert styled.beta[0] == pytest.approx(1.5, abs=0.25) and 0 < styled.beta_se[0] < 0.2
    assert list(styled.beta[1:]) == [0.0, 0.0, 0.0]  # constant features stay out
    assert np.all(styled.ci_low < styled.ratings) and np.all(styled.ratings < styled.ci_high)


def test_bad_input_is_refused() -> None:
    one = np.zeros((1, K))
    with pytest.raises(CountsError, match="differ"):
        fit_style_bt(["m"], np.array([0]), np.array([0]), np.array([1.0]), one, one)
    with pytest.raises(CountsError, match="outcomes"):
        fit_style_bt(["m", "n"], np.array([0]), np.array([1]), np.array([0.3]), one, one)
    with pytest.raises(CountsError, match="agree"):
        fit_style_bt(["m", "n"], np.array([0]), np.array([1]), np.array([1.0]), np.zeros((1, 2)), one)
    empty = fit_style_bt(["m", "n"], np.array([], int), np.array([], int), np.array([]), np.zeros((0, K)),
                         np.zeros((0, K)))
    assert np.allclose(empty.ratings, 1000.0)
