"""The prior-aware pair sampler: it favours pairs whose outcome is uncertain and that at least one side
can play, keeps every enabled model at its minimum share, and in a seeded simulated arena puts more
battles where a side can play than uniform pairing does."""

from __future__ import annotations

import numpy as np
import pytest

from ranking.counts import CountsError
from ranking.sampler import draw_prior_pair, explore_for, prior_weights
from ranking.simulation import compare_pairing

FLAT = np.zeros((4, 4))


def test_a_pair_nobody_can_play_or_whose_outcome_is_known_scores_low() -> None:
    ratings = np.array([1000.0, 1010.0, 1400.0, 1000.0])
    weights = prior_weights(FLAT, ratings=ratings, sd=np.full(4, 30.0),
                            playable=np.array([0.9, 0.9, 0.9, 0.05]))
    assert weights[0, 1] > 3 * weights[0, 2], "a close match teaches more than a foregone one"
    weights = prior_weights(FLAT, ratings=np.full(4, 1000.0), sd=np.full(4, 30.0),
                            playable=np.array([0.05, 0.05, 0.9, 0.9]))
    assert weights[2, 3] > 5 * weights[0, 1], "two models that cannot play teach nothing"
    assert weights[0, 2] > 5 * weights[0, 1] and np.all(np.diagonal(weights) == 0)
    wide = prior_weights(FLAT, ratings=ratings, sd=np.full(4, 400.0), playable=np.full(4, 0.9))
    narrow = prior_weights(FLAT, ratings=ratings, sd=np.full(4, 1.0), playable=np.full(4, 0.9))
    assert wide[0, 2] / wide[0, 1] > narrow[0, 2] / narrow[0, 1], "an unsure prior keeps far pairs in play"


def test_every_enabled_model_keeps_its_minimum_share() -> None:
    rng = np.random.default_rng(0)
    n = 8
    playable = np.array([0.9] * 2 + [0.05] * 6)
    enabled = np.ones(n, dtype=bool)
    enabled[7] = False
    seen = np.zeros(n)
    draws = 4000
    for _ in range(draws):
        a, b = draw_prior_pair(np.zeros((n, n)), enabled, rng, ratings=np.full(n, 1000.0),
                               sd=np.full(n, 50.0), playable=playable, min_share=0.1)
        assert a != b and enabled[a] and enabled[b]
        seen[[a, b]] += 1
    share = seen / draws
    assert share[7] == 0 and np.all(share[:7] >= 0.1 * 0.9), share  # within sampling noise of 10%
    assert share[0] > 2 * share[5], "the models that can play are drawn far more"
    assert explore_for(0.1, 7) == pytest.approx(0.35) and explore_for(0.5, 8) == 1.0


def test_bad_input_is_refused() -> None:
    with pytest.raises(CountsError, match="one per model"):
        prior_weights(FLAT, ratings=np.zeros(4), sd=np.zeros(3), playable=np.zeros(4))
    with pytest.raises(CountsError, match="non-negative"):
        prior_weights(FLAT, ratings=np.zeros(4), sd=np.full(4, -1.0), playable=np.zeros(4))
    with pytest.raises(CountsError, match="min_share"):
        explore_for(1.5, 4)


def test_in_a_simulated_arena_more_battles_have_a_side_that_can_play() -> None:
    theta = np.array([1.2, 0.9, 0.6, 0.3, -0.8, -1.0, -1.1, -1.2])
    playable = theta > 0
    result = compare_pairing(theta, playable, target_width=120.0, trials=2, seed=3)
    assert result.uniform_playable_share == pytest.approx(22 / 28, abs=0.05)  # uniform: 6 of 28 pairs useless
    assert result.prior_playable_share > result.uniform_playable_share + 0.05
    assert result.prior_votes <= 1.5 * result.uniform_votes, "and ordering the models costs no more than half"
    assert compare_pairing(theta, playable, target_width=120.0, trials=2, seed=3) == result, "seeded"
