"""Leaderboard numbers: db's GROUP BY counts fitted by ``ranking``, shaped into plain frames for the page.

Everything here takes plain values (an engine, filter values) so the bench and the tests can call it
without Streamlit.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sqlalchemy import Engine

from db import repository as db_repo
from ranking import leaderboard, wilson_interval

HEATMAP_MODELS = 15  # heatmaps show the top models only: a 100 x 100 grid is unreadable


@dataclass(frozen=True)
class Filters:
    scenario: str | None = None
    anonymous_only: bool = True
    corrections_only: bool = False
    since: dt.datetime | None = None
    until: dt.datetime | None = None

    @property
    def modes(self) -> tuple[str, ...]:
        return ("anonymous",) if self.anonymous_only else ("anonymous", "named")


@dataclass(frozen=True)
class Board:
    table: pd.DataFrame  # one row per rated model, best first
    win_rate: pd.DataFrame  # top models x top models, observed win rate of row over column
    battles: pd.DataFrame  # same shape, battle counts
    votes: int
    computed_at: dt.datetime


def wilson(successes: np.ndarray, trials: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rate and ranking's 95% Wilson interval per model (rate NaN where there were no trials)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(trials > 0, successes / np.maximum(trials, 1), np.nan)
    low, high = wilson_interval(successes, trials)
    return rate, np.asarray(low), np.asarray(high)


def _interval_text(rate: float, low: float, high: float, trials: int) -> str:
    if trials == 0 or math.isnan(rate):
        return "–"
    return f"{100 * rate:.0f}% ({100 * low:.0f}–{100 * high:.0f}, n={trials})"


def build_board(engine: Engine, filters: Filters, *, bootstrap: int = 0) -> Board:
    """Counts (SQL) -> Bradley-Terry fit (sandwich intervals unless ``bootstrap`` rounds are asked)."""
    f = filters
    pairs = db_repo.pairwise_counts(
        engine,
        scenario=f.scenario,
        modes=f.modes,
        since=f.since,
        until=f.until,
        corrections_only=f.corrections_only,
    )
    fixes = db_repo.fix_counts(
        engine, scenario=f.scenario, modes=f.modes, since=f.since, until=f.until, models=pairs.models
    )
    first = db_repo.first_try_counts(
        engine, scenario=f.scenario, modes=f.modes, since=f.since, until=f.until, models=pairs.models
    )
    names = {c.slug: c.display_name for c in db_repo.list_contestants(engine)}
    now = dt.datetime.now(dt.UTC)
    empty = Board(pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), pairs.total, now)
    if pairs.total == 0:
        return empty
    board = leaderboard(
        pairs.models,
        pairs.wins,
        pairs.ties,
        pairs.both_bad,
        interval="bootstrap" if bootstrap else "sandwich",
        bootstrap=bootstrap,
    )
    if not board.rows:
        return empty
    index = {m: i for i, m in enumerate(pairs.models)}
    fix_p, fix_lo, fix_hi = wilson(fixes.successes, fixes.trials)
    ft_p, ft_lo, ft_hi = wilson(first.successes, first.trials)
    records = []
    for row in board.rows:
        i = index[row.model]
        records.append(
            {
                "Rank": row.rank,
                "Model": names.get(row.model, row.model),
                "Rating": round(row.rating, 1),
                "95% low": round(row.ci_low, 1),
                "95% high": round(row.ci_high, 1),
                "Votes": row.battles,
                "Win rate %": round(100 * (row.wins + 0.5 * row.ties) / row.battles, 1)
                if row.battles
                else None,
                "Fix rate": _interval_text(fix_p[i], fix_lo[i], fix_hi[i], int(fixes.trials[i])),
                "First-try accuracy": _interval_text(ft_p[i], ft_lo[i], ft_hi[i], int(first.trials[i])),
            }
        )
    table = pd.DataFrame.from_records(records)
    top = [index[r.model] for r in board.rows[:HEATMAP_MODELS]]
    labels = [names.get(pairs.models[i], pairs.models[i]) for i in top]
    win_rate = pd.DataFrame(board.observed_win_rate[np.ix_(top, top)], index=labels, columns=labels)
    battles = pd.DataFrame(board.battle_counts[np.ix_(top, top)], index=labels, columns=labels)
    return Board(table, win_rate, battles, pairs.total, now)
