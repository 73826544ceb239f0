"""The Fixing board's *Fixing suites* source: the stored suite runs of the chosen scenario (``python -m
scenarios run S --dialogues N``), one row per model, every figure with its 95% interval over dialogues,
ranked by interval overlap on fix within two corrections (rank = 1 + the models whose interval lies
wholly above; models whose intervals overlap share a rank)."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine

import scenarios
from db import VoteFilters
from db import actions as db_actions
from ranking.intervals import interval_ranks
from ranking.suites import SuiteEstimate, suite_figures
from scenarios.suite_counts import MEANS, METRICS, sample_count, suite_units
from webapp.leaderboard_data import auto_records

RANKED_BY = "fix_within_2"
COLUMNS: dict[str, str] = {
    "pass_at_1": "pass@1", "pass_hat_k": "pass^k", "fix_within_1": "Fixed within 1",
    "fix_within_2": "Fixed within 2", "turns_to_fix": "Corrections per fix",
    "regression_rate": "Regression", "recurrence_rate": "Recurrence", "maintenance_rate": "Maintained",
}


@dataclass(frozen=True)
class SuiteBoard:
    scenario: str
    table: pd.DataFrame
    dialogues: int
    k: int
    computed_at: dt.datetime


def cell(name: str, estimate: SuiteEstimate) -> str:
    """``"62% (41–79, n=24)"``; corrections per fix as a plain number; an en dash when nothing was counted."""
    if math.isnan(estimate.value):
        return "–"
    n = int(estimate.n) if float(estimate.n).is_integer() else estimate.n
    if name in MEANS:
        return f"{estimate.value:.2f} ({estimate.low:.2f}–{estimate.high:.2f}, n={n})"
    return f"{100 * estimate.value:.0f}% ({100 * estimate.low:.0f}–{100 * estimate.high:.0f}, n={n})"


def _ranks(ranked: dict[str, SuiteEstimate]) -> dict[str, int]:
    """Rank by interval overlap among the models that had something to fix (the others have no rank)."""
    counted = {m: e for m, e in ranked.items() if not math.isnan(e.value)}
    if not counted:
        return {}
    low = np.array([e.low for e in counted.values()])
    high = np.array([e.high for e in counted.values()])
    ranks = interval_ranks(low, high)
    return {m: int(r) for m, r in zip(counted, ranks, strict=True)}


def build_suite_board(engine: Engine, filters: VoteFilters) -> SuiteBoard:
    """The suites of the filtered scenario (the calendar when none is chosen)."""
    slug = filters.scenario or "calendar"
    records = [r for r in auto_records(engine, filters) if r.protocol in ("suite", "first_try")]
    k = sample_count(records)
    per_model = {model: suite_figures(units, means=MEANS)
                 for model, units in suite_units(records, k=max(k, 1)).items()}
    now = dt.datetime.now(dt.UTC)
    if not per_model:
        return SuiteBoard(slug, pd.DataFrame(), 0, k, now)
    names = {c.slug: c.display_name for c in db_actions.list_contestants(engine)}
    ranks = _ranks({m: figures[RANKED_BY] for m, figures in per_model.items()})
    rows: list[dict[str, Any]] = []
    for model, figures in per_model.items():
        rank = ranks.get(model)
        rows.append({"_slug": model, "Rank": "–" if rank is None else str(rank),
                     "Model": names.get(model, model),
                     "Dialogues": figures["pass_at_1"].dialogues,
                     **{COLUMNS[name]: cell(name, figures[name]) for name in METRICS}})
    rows.sort(key=lambda row: (ranks.get(row["_slug"], len(ranks) + 1), row["Model"]))
    table = pd.DataFrame([{k: v for k, v in row.items() if k != "_slug"} for row in rows])
    return SuiteBoard(scenarios.get_scenario(slug).slug, table, int(table["Dialogues"].sum()), k, now)
