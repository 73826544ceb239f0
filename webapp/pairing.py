"""What the Arena's pair sampler knows before a battle: each model's composite fixing rating and its
uncertainty (people's votes and replay's outcomes, ``ranking.composite`` with its analytic intervals:
a battle's start must not wait for a bootstrap), and its chance of playing the
scenario at all (the grader's first-try rate on the scenario, automatic runs and suites included, so a
model people have not voted on yet is known from its suites). ``ranking.sampler.draw_prior_pair`` draws
the pair from it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlalchemy import Engine

from db import boards as db_boards
from ranking.composite import HUMAN, Source, composite_board
from ranking.sampler import UNKNOWN_PLAYABLE

UNRATED = (1000.0, 400.0)  # a model without votes or replay outcomes: the scale's centre, very unsure


@dataclass(frozen=True)
class PairingPrior:
    ratings: np.ndarray  # Elo scale, one per slug
    sd: np.ndarray
    playable: np.ndarray  # chance in [0, 1] that the model plays the scenario


def pairing_prior(engine: Engine, *, scenario: str, slugs: tuple[str, ...], weight: float) -> PairingPrior:
    """The prior over ``slugs`` (in that order) for a battle in ``scenario``."""
    human = db_boards.pairwise_counts(engine, models=list(slugs), modes=None, scenario=scenario)
    replay = db_boards.replay_pair_counts(engine, scenario=scenario)
    pick = [replay.models.index(s) for s in slugs]
    sources = [Source(HUMAN, human.wins, human.ties + human.both_bad),
               Source("replay", replay.wins[np.ix_(pick, pick)], replay.ties[np.ix_(pick, pick)])]
    ratings, sd = np.full(len(slugs), UNRATED[0]), np.full(len(slugs), UNRATED[1])
    if human.total or replay.total:
        column = composite_board(slugs, sources, weights={"replay": weight}, bootstrap=0,
                                 interval="sandwich").columns["composite"]
        rated = ~np.isnan(column.ratings)
        ratings[rated] = column.ratings[rated]
        sd[rated] = np.maximum((column.ci_high[rated] - column.ci_low[rated]) / (2 * 1.96), 1.0)
    first = db_boards.first_try_counts(engine, models=list(slugs), modes=None, scenario=scenario)
    playable = np.array([(s + 0.5) / (t + 1.0) if t else UNKNOWN_PLAYABLE
                         for s, t in zip(first.successes, first.trials, strict=True)])
    return PairingPrior(ratings=ratings, sd=sd, playable=playable)
