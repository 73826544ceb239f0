"""The Fixing board's *Fixing suites* source: the stored suite runs of the chosen scenario (``python -m
scenarios run S --dialogues N``), one row per model and setting (greedy or a temperature, and the
correction style: ``scenarios.suite_counts.SuiteKey``), every figure with its 95% interval over dialogues,
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
from ranking.suites import SuiteEstimate
from scenarios.suite_counts import MEANS, METRICS, SuiteKey, sample_count, stored_suite_figures
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


def _ranks(ranked: dict[SuiteKey, SuiteEstimate]) -> dict[SuiteKey, int]:
    """Rank by interval overlap among the suites of one setting (temperature and correction style) whose
    models had something to fix (the others have no rank): a greedy suite is not ranked against a
    sampled one."""
    out: dict[SuiteKey, int] = {}
    for setting in sorted({(key.temperature, key.style) for key in ranked}):
        counted = {key: e for key, e in ranked.items()
                   if (key.temperature, key.style) == setting and not math.isnan(e.value)}
        if not counted:
            continue
        low = np.array([e.low for e in counted.values()])
        high = np.array([e.high for e in counted.values()])
        ranks = interval_ranks(low, high)
        out.update({key: int(r) for key, r in zip(counted, ranks, strict=True)})
    return out


def build_suite_board(engine: Engine, filters: VoteFilters) -> SuiteBoard:
    """The suites of the filtered scenario (the calendar when none is chosen): one row per model and
    setting (greedy, temperature 0.7, ...), each suite's figures from its own runs."""
    slug = filters.scenario or "calendar"
    records = [r for r in auto_records(engine, filters) if r.protocol in ("suite", "first_try")]
    k = sample_count(records)
    per_suite = {key: figures for key, (_, figures) in stored_suite_figures(records).items()}
    now = dt.datetime.now(dt.UTC)
    if not per_suite:
        return SuiteBoard(slug, pd.DataFrame(), 0, k, now)
    names = {c.slug: c.display_name for c in db_actions.list_contestants(engine)}
    ranks = _ranks({key: figures[RANKED_BY] for key, figures in per_suite.items()})
    rows: list[dict[str, Any]] = []
    for key, figures in per_suite.items():
        rank = ranks.get(key)
        rows.append({"_order": (key.temperature, key.style, rank or len(ranks) + 1),
                     "Rank": "–" if rank is None else str(rank), "Model": names.get(key.model, key.model),
                     "Sampling": key.sampling, "Dialogues": figures["pass_at_1"].dialogues,
                     **{COLUMNS[name]: cell(name, figures[name]) for name in METRICS}})
    rows.sort(key=lambda row: (row["_order"], row["Model"]))
    table = pd.DataFrame([{k: v for k, v in row.items() if k != "_order"} for row in rows])
    return SuiteBoard(scenarios.get_scenario(slug).slug, table, int(table["Dialogues"].sum()), k, now)
