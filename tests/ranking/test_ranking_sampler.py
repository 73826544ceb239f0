"""Pair sampler: valid pairs only, fair sides, information-seeking choices, and the simulated saving."""

from __future__ import annotations

import numpy as np
import pytest

from ranking import CountsError, pair_gains, sample_pair, sampler
from ranking.simulation import compare_strategies
from ranking.synthetic import true_strengths


def test_never_a_model_against_itself_and_only_enabled_models() -> None:
    rng = np.random.default_rng(0)
    counts = np.zeros((6, 6))
    enabled = np.array([True, False, True, True, False, True])
    seen = set()
    for _ in range(500):
        i, j = sample_pair(counts, enabled, rng)
        assert i != j and enabled[i] and enabled[j]
        seen.add((i, j))
    assert (0, 2) in seen and (2, 0) in seen  # random left/right
    assert {m for pair in seen for m in pair} == {0, 2, 3, 5}  # every enabled model is exposed


def test_prefers_the_least_known_model() -> None:
    counts = np.full((5, 5), 40.0)
    np.fill_diagonal(counts, 0)
    counts[4, :] = counts[:, 4] = 1.0
    counts[4, 4] = 0
    rng = np.random.default_rng(1)
    draws = [sample_pair(counts, np.ones(5, dtype=bool), rng) for _ in range(300)]
    share = np.mean([4 in pair for pair in draws])
    assert share > 0.7  # uniform sampling would involve model 4 in 40% of pairs


def test_gains_match_brute_force_covariance_update() -> None:
    # gain(i, j) = power · Σ_k var_k^(power−1) · Δvar_k, with Δvar_k from recomputing Σ after the battle.
    rng = np.random.default_rng(3)
    n, power = 5, 6.0
    counts = rng.integers(0, 30, size=(n, n)).astype(float)
    counts = np.triu(counts, 1) + np.triu(counts, 1).T
    ratings = np.array([1000.0, 1050.0, 900.0, 1300.0, 980.0])
    gains = pair_gains(counts, ratings=ratings, power=power)

    def covariance(c: np.ndarray) -> np.ndarray:
        p = 1.0 / (1.0 + 10.0 ** ((ratings[None, :] - ratings[:, None]) / 400.0))
        wts = c * p * (1 - p) + sampler.PRIOR_INFORMATION / (n - 1)
        np.fill_diagonal(wts, 0.0)
        return np.linalg.pinv(np.diag(wts.sum(axis=1)) - wts)

    before = np.diagonal(covariance(counts))
    for i, j in [(0, 1), (2, 3), (1, 4)]:
        more = counts.copy()
        more[i, j] += 1
        more[j, i] += 1
        drop = before - np.diagonal(covariance(more))
        assert np.all(drop >= -1e-12)
        expected = power * np.sum(before ** (power - 1) * drop)
        assert gains[i, j] == pytest.approx(expected, rel=1e-6)
        assert gains[j, i] == pytest.approx(gains[i, j])
    assert np.all(np.diagonal(gains) == 0.0)


def test_bad_input() -> None:
    rng = np.random.default_rng(2)
    with pytest.raises(CountsError, match="two enabled"):
        sample_pair(np.zeros((3, 3)), np.array([True, False, False]), rng)
    with pytest.raises(CountsError, match="disagree"):
        sample_pair(np.zeros((3, 3)), np.ones(4, dtype=bool), rng)
    with pytest.raises(CountsError, match="ratings"):
        sample_pair(np.zeros((3, 3)), np.ones(3, dtype=bool), rng, ratings=[1.0, np.nan, 2.0])


@pytest.mark.slow
def test_active_sampling_saves_at_least_a_fifth_of_votes() -> None:
    theta = true_strengths(20, rng=np.random.default_rng(5))
    result = compare_strategies(theta, target_width=80.0, trials=6, seed=0)
    assert result.saving >= 0.2, result
