"""The Fixing board's *Replay* and *Ratings* sources.

Replay: every correction a person wrote, answered by other models (``python -m scenarios replay``), one
row per model: its fix rate on other models' mistakes and on its own, and its regressions, each with a
95% Wilson interval and n. Ratings: three Bradley-Terry columns side by side (``ranking.composite``,
robust sandwich intervals) — people only (the counted votes the Votes board fits), automatic only
(replay's and the suites' pairwise outcomes: the model that fixed a correction, or every mistake of a
generated dialogue within two corrections, beats one that did not) and the composite of both, weighted by
``ARENA_COMPOSITE_AUTOMATIC_WEIGHT`` — with Kendall's τ between the people's and the automatic ratings.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from db import VoteFilters
from db import actions as db_actions
from db import boards as db_boards
from ranking import wilson_interval
from ranking.composite import HUMAN, Source, composite_board
from scenarios.suite_counts import suite_pairs
from webapp.leaderboard_data import auto_records

RATINGS_BOOTSTRAP = 200
RATING_COLUMNS = {"human": "People", "automatic": "Automatic (replay, suites)", "composite": "Composite"}


@dataclass(frozen=True)
class ReplayBoard:
    table: pd.DataFrame
    answers: int
    computed_at: dt.datetime


@dataclass(frozen=True)
class RatingsBoard:
    table: pd.DataFrame
    tau: str  # Kendall's τ with its interval, in words
    votes: int
    outcomes: int
    weight: float
    computed_at: dt.datetime


def rate_text(successes: int, trials: int) -> str:
    """``"62% (41–79, n=24)"``; an en dash with no trial."""
    if not trials:
        return "–"
    low, high = wilson_interval(successes, trials)
    return f"{100 * successes / trials:.0f}% ({100 * float(low):.0f}–{100 * float(high):.0f}, n={trials})"


def build_replay_board(engine: Engine, filters: VoteFilters) -> ReplayBoard:
    """Replay's outcomes per model (the filters' scenario; replay has no date or mode of its own)."""
    names = {c.slug: c.display_name for c in db_actions.list_contestants(engine)}
    counts = db_boards.replay_counts(engine, scenario=filters.scenario)
    now = dt.datetime.now(dt.UTC)
    if not counts:
        return ReplayBoard(pd.DataFrame(), 0, now)
    per_model: dict[str, dict[bool, db_boards.ReplayCounts]] = {}
    for row in counts:
        per_model.setdefault(row.model, {})[row.own] = row
    keyed: list[tuple[float, str, dict[str, object]]] = []
    for model, sides in per_model.items():
        other, own = sides.get(False), sides.get(True)
        answered = sum(c.answered for c in sides.values())
        rate = (other.fixed / other.answered) if other and other.answered else -1.0
        keyed.append((-rate, names.get(model, model), {
            "Model": names.get(model, model),
            "Fixed (others' mistakes)": rate_text(other.fixed, other.answered) if other else "–",
            "Fixed (own mistakes)": rate_text(own.fixed, own.answered) if own else "–",
            "Regression": rate_text(sum(c.regression for c in sides.values()), answered),
            "Answered": answered,
        }))
    table = pd.DataFrame([row for *_, row in sorted(keyed, key=lambda k: (k[0], k[1]))])
    return ReplayBoard(table, int(table["Answered"].sum()), now)


def suite_source(engine: Engine, filters: VoteFilters, models: tuple[str, ...]) -> Source:
    """The stored suites' pairwise outcomes (``scenarios.suite_counts.suite_pairs``) on ``models``: the
    same generated dialogue played by two models, the one that fixed every mistake within two
    corrections beating one that did not."""
    n = len(models)
    wins, ties = np.zeros((n, n), dtype=np.int64), np.zeros((n, n), dtype=np.int64)
    index = {m: i for i, m in enumerate(models)}
    for a, b, winner, _ in suite_pairs(auto_records(engine, filters)):
        if a not in index or b not in index:
            continue
        i, j = index[a], index[b]
        if winner == "tie":
            ties[i, j] += 1
            ties[j, i] += 1
        elif winner == "a":
            wins[i, j] += 1
        else:
            wins[j, i] += 1
    return Source("suite", wins, ties)


def build_ratings_board(engine: Engine, filters: VoteFilters, *, weight: float,
                        bootstrap: int = RATINGS_BOOTSTRAP) -> RatingsBoard:
    """People, automatic and composite ratings on the models of either signal."""
    human = db_boards.pairwise_counts(engine, **filters.vote_args())
    replay = db_boards.replay_pair_counts(engine, scenario=filters.scenario)
    suite = suite_source(engine, filters, human.models)
    now = dt.datetime.now(dt.UTC)
    assert human.models == replay.models, "both count over every contestant in slug order"
    votes, outcomes = human.total, replay.total + int(suite.wins.sum() + suite.ties.sum() // 2)
    if not votes and not outcomes:
        return RatingsBoard(pd.DataFrame(), "–", 0, 0, weight, now)
    sources = [Source(HUMAN, human.wins, human.ties + human.both_bad),
               Source("replay", replay.wins, replay.ties), suite]
    board = composite_board(human.models, sources, weights={"replay": weight, "suite": weight},
                            bootstrap=bootstrap, interval="sandwich")
    names = {c.slug: c.display_name for c in db_actions.list_contestants(engine)}
    composite = board.columns["composite"]
    rated = [m for m in range(len(board.models)) if not math.isnan(composite.ratings[m])]
    rated.sort(key=lambda m: (int(composite.ranks[m]), -float(composite.ratings[m])))
    rows = []
    for m in rated:
        slug = board.models[m]
        row: dict[str, object] = {"Rank": int(composite.ranks[m]), "Model": names.get(slug, slug)}
        for key, label in RATING_COLUMNS.items():
            column = board.columns[key]
            row[label] = ("–" if math.isnan(column.ratings[m]) else
                          f"{column.ratings[m]:.0f} ({column.ci_low[m]:.0f}–{column.ci_high[m]:.0f})")
        rows.append(row)
    tau = "–" if math.isnan(board.kendall_tau) else (
        f"{board.kendall_tau:.2f} (95% {board.tau_low:.2f} to {board.tau_high:.2f})")
    return RatingsBoard(pd.DataFrame(rows), tau, votes, outcomes, weight, now)

