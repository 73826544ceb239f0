"""Active vs uniform pair sampling: votes needed until every rating's 95% interval is narrow enough.

A simulated arena draws each next pair either uniformly or with :func:`ranking.sampler.sample_pair`,
plays it against known true strengths (BT with ties), refits every ``batch`` votes (sandwich
intervals, which are cheap) and stops when the widest interval is at most ``target_width`` Elo points.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from ranking.blas import single_threaded_blas
from ranking.counts import A_WINS, TIE, FloatArray
from ranking.leaderboard import leaderboard
from ranking.sampler import draw_pair

Strategy = Literal["uniform", "active"]


@dataclass(frozen=True)
class SimulationResult:
    """Votes each strategy needed, averaged over ``trials`` arenas with the same true strengths."""

    uniform_votes: float
    active_votes: float
    saving: float  # 1 − active / uniform
    trials: int
    target_width: float


def _play(theta: FloatArray, a: int, b: int, tie_share: float, rng: np.random.Generator) -> int:
    sigma = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b])))
    p_tie = tie_share * 4.0 * sigma * (1.0 - sigma)
    u = rng.random()
    if u < sigma - p_tie / 2.0:
        return A_WINS
    return TIE if u < sigma + p_tie / 2.0 else 1


def votes_to_target(
    theta: FloatArray,
    *,
    strategy: Strategy,
    target_width: float,
    rng: np.random.Generator,
    batch: int = 100,
    max_votes: int = 200_000,
    tie_share: float = 0.15,
) -> int:
    """Votes until the widest sandwich 95% interval is ≤ ``target_width`` (or ``max_votes``)."""
    with single_threaded_blas():
        return _votes_to_target(
            theta,
            strategy=strategy,
            target_width=target_width,
            rng=rng,
            batch=batch,
            max_votes=max_votes,
            tie_share=tie_share,
        )


def _votes_to_target(
    theta: FloatArray,
    *,
    strategy: Strategy,
    target_width: float,
    rng: np.random.Generator,
    batch: int,
    max_votes: int,
    tie_share: float,
) -> int:
    n = theta.size
    names = tuple(f"m{k}" for k in range(n))
    wins = np.zeros((n, n), dtype=np.int64)
    ties = np.zeros((n, n), dtype=np.int64)
    zeros = np.zeros((n, n), dtype=np.int64)
    enabled = np.ones(n, dtype=bool)
    ratings: FloatArray | None = None
    votes = 0
    while votes < max_votes:
        counts = wins + wins.T + ties
        for _ in range(batch):
            if strategy == "uniform":
                a, b = (int(x) for x in rng.choice(n, size=2, replace=False))
            else:
                a, b = draw_pair(counts, enabled, rng, ratings=ratings)
            outcome = _play(theta, a, b, tie_share, rng)
            if outcome == TIE:
                ties[a, b] += 1
                ties[b, a] += 1
            elif outcome == A_WINS:
                wins[a, b] += 1
            else:
                wins[b, a] += 1
            counts[a, b] += 1
            counts[b, a] += 1
        votes += batch
        board = leaderboard(names, wins, ties, zeros, interval="sandwich")
        if board.unrated or board.ridge > 0:
            continue
        widths = np.array([r.ci_high - r.ci_low for r in board.rows])
        if widths.max() <= target_width:
            return votes
        by_name = {r.model: r.rating for r in board.rows}
        ratings = np.array([by_name[m] for m in names])
    return max_votes


def compare_strategies(
    theta: FloatArray, *, target_width: float, trials: int, seed: int, batch: int = 100
) -> SimulationResult:
    """Average votes-to-target of uniform and active sampling over ``trials`` seeded arenas."""
    seeds = np.random.SeedSequence(seed).spawn(trials)
    uniform, active = [], []
    for s in seeds:
        s_uniform, s_active = s.spawn(2)
        uniform.append(
            votes_to_target(
                theta,
                strategy="uniform",
                target_width=target_width,
                rng=np.random.default_rng(s_uniform),
                batch=batch,
            )
        )
        active.append(
            votes_to_target(
                theta,
                strategy="active",
                target_width=target_width,
                rng=np.random.default_rng(s_active),
                batch=batch,
            )
        )
    u, a = float(np.mean(uniform)), float(np.mean(active))
    return SimulationResult(
        uniform_votes=u, active_votes=a, saving=1.0 - a / u, trials=trials, target_width=target_width
    )
