"""Active vs uniform pair sampling: votes needed until every rating's 95% interval is narrow enough.

A simulated arena draws each next pair either uniformly or with :func:`ranking.sampler.sample_pair`,
plays it against known true strengths (BT with ties), refits every ``batch`` votes (sandwich
intervals, which are cheap) and stops when the widest interval is at most ``target_width`` Elo points.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from ranking.blas import single_threaded_blas
from ranking.counts import A_WINS, TIE, FloatArray
from ranking.leaderboard import Leaderboard, leaderboard
from ranking.sampler import draw_pair, draw_prior_pair

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


def _record(wins: npt.NDArray[np.int64], ties: npt.NDArray[np.int64], counts: npt.NDArray[np.int64],
            a: int, b: int, outcome: int) -> None:
    """Count one played battle into the tallies."""
    if outcome == TIE:
        ties[a, b] += 1
        ties[b, a] += 1
    elif outcome == A_WINS:
        wins[a, b] += 1
    else:
        wins[b, a] += 1
    counts[a, b] += 1
    counts[b, a] += 1


def _fit(names: tuple[str, ...], wins: npt.NDArray[np.int64],
         ties: npt.NDArray[np.int64]) -> Leaderboard | None:
    """The sandwich fit, or None while some model is unrated or the fit needs a ridge."""
    board = leaderboard(names, wins, ties, np.zeros_like(wins), interval="sandwich")
    return None if board.unrated or board.ridge > 0 else board


def _widest(board: Leaderboard) -> float:
    return float(max(r.ci_high - r.ci_low for r in board.rows))


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
    enabled = np.ones(n, dtype=bool)

    def choose(counts: npt.NDArray[np.int64], board: Leaderboard | None) -> tuple[int, int]:
        if strategy == "uniform":
            a, b = (int(x) for x in rng.choice(n, size=2, replace=False))
            return a, b
        return draw_pair(counts, enabled, rng, ratings=None if board is None else _ratings(board))

    return _arena(theta, choose, target_width=target_width, rng=rng, batch=batch, max_votes=max_votes,
                  tie_share=tie_share)


def _ratings(board: Leaderboard) -> FloatArray:
    """The fitted Elo ratings in model order (``m0``, ``m1``, …)."""
    by_name = {r.model: r.rating for r in board.rows}
    return np.array([by_name[f"m{k}"] for k in range(len(by_name))])


def _arena(
    theta: FloatArray,
    choose: Callable[[npt.NDArray[np.int64], Leaderboard | None], tuple[int, int]],
    *,
    target_width: float,
    rng: np.random.Generator,
    batch: int,
    max_votes: int,
    tie_share: float,
    seen: Callable[[int, int], None] | None = None,
) -> int:
    """Play battles ``batch`` at a time, each pair from ``choose(counts so far, latest usable fit)``, and
    refit after each batch; the votes played when the widest interval is at most ``target_width`` (or
    ``max_votes``). ``seen`` is told every pair played."""
    n = theta.size
    names = tuple(f"m{k}" for k in range(n))
    wins = np.zeros((n, n), dtype=np.int64)
    ties = np.zeros((n, n), dtype=np.int64)
    board: Leaderboard | None = None
    votes = 0
    while votes < max_votes:
        counts = wins + wins.T + ties
        for _ in range(batch):
            a, b = choose(counts, board)
            if seen is not None:
                seen(a, b)
            _record(wins, ties, counts, a, b, _play(theta, a, b, tie_share, rng))
        votes += batch
        fitted = _fit(names, wins, ties)
        if fitted is None:
            continue
        if _widest(fitted) <= target_width:
            return votes
        board = fitted
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


@dataclass(frozen=True)
class PairingResult:
    """Uniform pairing against the prior sampler (:func:`ranking.sampler.draw_prior_pair`), averaged over
    ``trials`` seeded arenas: votes until the widest 95% interval is at most ``target_width``, and the
    share of battles in which at least one side can play the scenario."""

    uniform_votes: float
    prior_votes: float
    uniform_playable_share: float
    prior_playable_share: float
    trials: int
    target_width: float

    def as_json(self) -> dict[str, float | int]:
        return {"uniform_votes": self.uniform_votes, "prior_votes": self.prior_votes,
                "uniform_playable_share": round(self.uniform_playable_share, 4),
                "prior_playable_share": round(self.prior_playable_share, 4),
                "trials": self.trials, "target_width": self.target_width}


def pairing_run(
    theta: FloatArray,
    playable: npt.NDArray[np.bool_],
    *,
    strategy: Literal["uniform", "prior"],
    prior_ratings: FloatArray,
    prior_sd: FloatArray,
    prior_playable: FloatArray,
    target_width: float,
    rng: np.random.Generator,
    batch: int = 100,
    max_votes: int = 100_000,
    tie_share: float = 0.15,
) -> tuple[int, float]:
    """One arena: votes to the target width and the share of battles with a side that can play. The prior
    sampler starts from the prior (what the suites and replay said) and, once the votes have a fit, uses
    the fitted ratings and their sandwich uncertainty; whether a model can play stays the prior's."""
    n = theta.size
    enabled = np.ones(n, dtype=bool)
    useful = 0

    def choose(counts: npt.NDArray[np.int64], board: Leaderboard | None) -> tuple[int, int]:
        if strategy == "uniform":
            a, b = (int(x) for x in rng.choice(n, size=2, replace=False))
            return a, b
        ratings, sd = prior_ratings, prior_sd
        if board is not None:
            rows = {r.model: r for r in board.rows}
            ratings = _ratings(board)
            sd = np.array([(rows[f"m{k}"].ci_high - rows[f"m{k}"].ci_low) / (2 * 1.96) for k in range(n)])
        return draw_prior_pair(counts, enabled, rng, ratings=ratings, sd=sd, playable=prior_playable)

    def seen(a: int, b: int) -> None:
        nonlocal useful
        useful += int(playable[a] or playable[b])

    with single_threaded_blas():
        votes = _arena(theta, choose, target_width=target_width, rng=rng, batch=batch, max_votes=max_votes,
                       tie_share=tie_share, seen=seen)
    return votes, useful / max(votes, 1)


def compare_pairing(
    theta: FloatArray,
    playable: npt.NDArray[np.bool_],
    *,
    target_width: float,
    trials: int,
    seed: int,
    prior_sd: float = 100.0,
    batch: int = 100,
) -> PairingResult:
    """Uniform pairing and the prior sampler on the same arenas. The prior is what the suites would
    say: each true Elo rating plus noise of ``prior_sd``, with that uncertainty, and a model that can play
    passes 90% of its first tries, one that cannot 5%."""
    n = theta.size
    truth_elo = 1000.0 + 400.0 / np.log(10.0) * (theta - theta.mean())
    results: dict[str, list[tuple[int, float]]] = {"uniform": [], "prior": []}
    for trial in np.random.SeedSequence(seed).spawn(trials):
        prior_seed, *runs = trial.spawn(3)
        noise = np.random.default_rng(prior_seed).normal(0.0, prior_sd, size=n)
        for strategy, run_seed in zip(("uniform", "prior"), runs, strict=True):
            results[strategy].append(pairing_run(
                theta, playable, strategy=strategy,  # type: ignore[arg-type]
                prior_ratings=truth_elo + noise, prior_sd=np.full(n, prior_sd),
                prior_playable=np.where(playable, 0.9, 0.05), target_width=target_width,
                rng=np.random.default_rng(run_seed), batch=batch))
    mean = {k: (float(np.mean([v for v, _ in r])), float(np.mean([s for _, s in r])))
            for k, r in results.items()}
    return PairingResult(uniform_votes=mean["uniform"][0], prior_votes=mean["prior"][0],
                         uniform_playable_share=mean["uniform"][1], prior_playable_share=mean["prior"][1],
                         trials=trials, target_width=target_width)
