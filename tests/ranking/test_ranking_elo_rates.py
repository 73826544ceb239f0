"""Online Elo (hand-computed updates) and Wilson intervals / fix rates (known values)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ranking import CountsError, first_try_accuracy, fix_rates, online_elo, wilson_interval


def test_elo_first_updates_by_hand() -> None:
    # Equal ratings: E = ½, so a win moves ±K/2 = ±2. Then B (998) beats A (1002):
    # E_B = 1/(1 + 10^(4/400)) = 0.494246..., B gains 4·(1 − E_B).
    r = online_elo(np.array([0, 1]), np.array([1, 0]), np.array([0, 0]), n_models=2)
    e_b = 1.0 / (1.0 + 10 ** (4 / 400))
    assert r[1] == pytest.approx(998.0 + 4 * (1 - e_b), abs=1e-12)
    assert r[0] == pytest.approx(1002.0 - 4 * (1 - e_b), abs=1e-12)
    assert r.sum() == pytest.approx(2000.0)


def test_elo_ties_and_both_bad_score_half_and_k_is_configurable() -> None:
    r = online_elo(np.array([0, 0]), np.array([1, 2]), np.array([2, 3]), n_models=3, k=32)
    np.testing.assert_allclose(r, [1000.0, 1000.0, 1000.0])
    r = online_elo(np.array([0]), np.array([2]), np.array([1]), n_models=3, k=32)
    np.testing.assert_allclose(r, [984.0, 1000.0, 1016.0])


def test_elo_depends_on_order_unlike_bradley_terry() -> None:
    a = np.array([0, 0, 0, 0])
    b = np.array([1, 1, 1, 1])
    o = np.array([0, 0, 1, 1])
    forward = online_elo(a, b, o, n_models=2, k=32)
    backward = online_elo(a, b, o[::-1], n_models=2, k=32)
    assert forward[0] != pytest.approx(backward[0])


def test_elo_rejects_bad_streams() -> None:
    with pytest.raises(CountsError, match="itself"):
        online_elo(np.array([1]), np.array([1]), np.array([0]), n_models=2)
    with pytest.raises(CountsError, match="range"):
        online_elo(np.array([0]), np.array([5]), np.array([0]), n_models=2)
    with pytest.raises(CountsError, match="outcome"):
        online_elo(np.array([0]), np.array([1]), np.array([7]), n_models=2)


def test_wilson_known_values() -> None:
    # 8 of 10 at z = 1.96: (0.4902, 0.9433) — the textbook example.
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-4)
    assert high == pytest.approx(0.9433, abs=1e-4)
    centre = (8 + 1.96**2 / 2) / (10 + 1.96**2)
    assert (low + high) / 2 == pytest.approx(centre, abs=1e-12)


def test_wilson_edges_never_nan() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(0, 5)
    assert low == 0.0 and 0 < high < 1
    low, high = wilson_interval(5, 5)
    assert high == 1.0 and 0 < low < 1
    lows, highs = wilson_interval(np.array([0, 3, 9]), np.array([0, 10, 9]))
    assert lows.shape == (3,) and not np.any(np.isnan(lows)) and not np.any(np.isnan(highs))
    with pytest.raises(CountsError):
        wilson_interval(4, 3)


def test_wilson_coverage_close_to_nominal() -> None:
    rng = np.random.default_rng(0)
    p, n = 0.3, 40
    s = rng.binomial(n, p, size=20_000)
    low, high = wilson_interval(s, np.full_like(s, n))
    coverage = np.mean((low <= p) & (p <= high))
    assert 0.93 <= coverage <= 0.97


def test_fix_rates_and_first_try_accuracy_tables() -> None:
    rows = fix_rates(("a", "b", "c"), np.array([3, 0, 9]), np.array([4, 0, 10]))
    assert [r.model for r in rows] == ["c", "a", "b"]
    assert rows[0].rate == pytest.approx(0.9) and rows[0].successes == 9 and rows[0].trials == 10
    assert rows[2].rate == 0.0 and (rows[2].ci_low, rows[2].ci_high) == (0.0, 1.0)
    acc = first_try_accuracy(("x", "y"), [5, 1], [5, 4])
    assert acc[0].model == "x" and acc[0].ci_high == 1.0 and not math.isnan(acc[1].ci_low)
    with pytest.raises(CountsError):
        fix_rates(("a",), [1, 2], [3, 4])
