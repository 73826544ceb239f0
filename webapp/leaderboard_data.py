"""Leaderboard numbers: db's GROUP BY counts fitted by ``ranking``, shaped into plain frames for the page.

Three boards: Votes (Bradley-Terry, optionally style-controlled), Fixing (``ranking.fixing`` over the
judgments of people, of the grader, or of the automatic arena) and the automatic arena's emoji tables.

Everything here takes plain values (an engine, a ``db.VoteFilters``) so the bench and the tests can call it
without Streamlit. The page turns its widgets into that one value once (:func:`board_filters`), with the
publication cut-off (:func:`publication_cutoff`); every board query takes its arguments from it
(``VoteFilters.vote_args`` / ``battle_args``), so none can forget the cut-off: a battle counts once closed
before ``closed_before`` (``db.VoteFilters.published``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sqlalchemy import Engine

import scenarios
from db import HUMAN_MODES, ModelCounts, PairCounts, VoteFilters
from db import actions as db_actions
from db import boards as db_boards
from ranking import fit_style_bt, fixing_table, leaderboard, tally, wilson_interval
from ranking.fixing import (
    TURN_BUCKETS,
    FixingCounts,
    fix_rate,
    kappa_from_table,
)
from ranking.outliers import OutlierResult, anomalous_visitors
from scenarios.metrics import RunTotals, run_totals
from scenarios.records import RunRecord
from scenarios.report import build_report, latest_runs, render_markdown
from scenarios.storage import load_runs

STYLE_COLUMNS = db_boards.STYLE_COLUMNS
HEATMAP_MODELS = 15  # heatmaps show the top models only: a 100 x 100 grid is unreadable
VOTE_MODES: dict[bool, tuple[str, ...]] = {True: ("anonymous",), False: ("anonymous", "named")}


def board_filters(
    *,
    scenario: str | None = None,
    anonymous_only: bool = True,
    corrections_only: bool = False,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    closed_before: dt.datetime | None = None,
) -> VoteFilters:
    """The Leaderboard's choices as the one filter value: "Anonymous only" picks the Votes board's modes
    (anonymous, or anonymous and named); ``closed_before`` is the publication cut-off."""
    return VoteFilters(scenario=scenario, modes=VOTE_MODES[anonymous_only], since=since, until=until,
                       corrections_only=corrections_only, closed_before=closed_before)


def publication_cutoff(delay_hours: float, now: dt.datetime | None = None) -> dt.datetime | None:
    """Battles closed before this time are public: ``ARENA_PUBLIC_EXPORT_DELAY_HOURS`` ago, rounded down to
    the minute so that one set of choices keeps one cache key for a while. None for a delay of 0: every
    closed battle at once. The Leaderboard and the Dataset page both take their cut-off from here."""
    if not delay_hours:
        return None
    moment = (now or dt.datetime.now(dt.UTC)) - dt.timedelta(hours=delay_hours)
    return moment.replace(second=0, microsecond=0)


@dataclass(frozen=True)
class Board:
    table: pd.DataFrame  # one row per rated model, best first
    win_rate: pd.DataFrame  # top models x top models, observed win rate of row over column
    battles: pd.DataFrame  # same shape, battle counts
    votes: int
    computed_at: dt.datetime
    dropped_votes: int = 0  # by the anomalous-voter test, when it was asked for
    dropped_visitors: int = 0
    tested_visitors: int = 0


def _without_anomalous_voters(engine: Engine, filters: VoteFilters) -> tuple[PairCounts, OutlierResult]:
    """Pair counts from the counted votes less those of visitors the sequential test flags."""
    votes = db_boards.counted_votes(engine, **filters.vote_args())
    known = votes.visitor >= 0
    result = anomalous_visitors(votes.model_a[known], votes.model_b[known], votes.outcome[known],
                                votes.visitor[known])
    keep = np.ones(votes.outcome.size, dtype=bool)
    keep[np.flatnonzero(known)[result.dropped]] = False
    wins, ties, both_bad = tally(votes.model_a[keep], votes.model_b[keep], votes.outcome[keep],
                                 n_models=len(votes.models))
    return PairCounts(models=votes.models, wins=wins, ties=ties, both_bad=both_bad), result


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


def build_board(
    engine: Engine, filters: VoteFilters, *, bootstrap: int = 0, drop_outliers: bool = False
) -> Board:
    """Counts (SQL) -> Bradley-Terry fit (sandwich intervals unless ``bootstrap`` rounds are asked).

    ``drop_outliers`` reads the counted votes one by one and leaves out those of visitors that
    ``ranking.outliers.anomalous_visitors`` flags (visitors with at least 5 votes are tested).
    """
    outliers: OutlierResult | None = None
    if drop_outliers:
        pairs, outliers = _without_anomalous_voters(engine, filters)
    else:
        pairs = db_boards.pairwise_counts(engine, **filters.vote_args())
    fixes = db_boards.fix_counts(engine, models=pairs.models, **filters.battle_args())
    first = db_boards.first_try_counts(engine, models=pairs.models, **filters.battle_args())
    names = {c.slug: c.display_name for c in db_actions.list_contestants(engine)}
    now = dt.datetime.now(dt.UTC)
    dropped = {} if outliers is None else {
        "dropped_votes": int(outliers.dropped.sum()), "dropped_visitors": len(outliers.flagged),
        "tested_visitors": outliers.tested,
    }
    empty = Board(pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), pairs.total, now, **dropped)
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
    return Board(table, win_rate, battles, pairs.total, now, **dropped)


# --- Votes board with style control ---------------------------------------------------------------


@dataclass(frozen=True)
class StyleBoard:
    table: pd.DataFrame  # Rank, Δ rank, Model, Rating, 95% low/high (style-controlled), best first
    coefficients: pd.DataFrame  # Feature, Coefficient, SE (log-odds per standard deviation)
    votes: int


STYLED_COLUMNS = ("Rank", "Rating", "95% low", "95% high")  # what style control replaces on the Votes board
RANK_DELTA = "Δ rank"


def rank_delta(before: int, after: int) -> str:
    """Places gained (``+2``) or lost (``−1``, a minus sign) going from rank ``before`` to ``after``."""
    change = before - after
    return f"+{change}" if change > 0 else f"−{-change}" if change < 0 else "0"


def style_ranked(plain: pd.DataFrame, styled: pd.DataFrame) -> pd.DataFrame:
    """The Votes board's table re-ranked by style control: rank, rating and interval from ``styled``, the
    rank change beside the rank, the plain board's other columns (votes, win rate, fix rate) kept.

    Rows follow ``styled``'s order; a model with no style-controlled rating (no vote with replies on both
    sides) keeps its row, last, with no rank.
    """
    if styled.empty:
        return plain
    rest = plain.drop(columns=list(STYLED_COLUMNS))
    ranked = styled.merge(rest, on="Model", how="left")
    unranked = rest[~rest["Model"].isin(styled["Model"])].assign(**{RANK_DELTA: "–"})
    table = pd.concat([ranked, unranked], ignore_index=True)
    table["Rank"] = table["Rank"].astype("Int64")
    columns = ["Rank", RANK_DELTA, *(c for c in plain.columns if c != "Rank")]
    return table[columns]


def build_style_board(engine: Engine, filters: VoteFilters) -> StyleBoard:
    """The contextual Bradley-Terry (``ranking.fit_style_bt``) on the votes the plain board counts, and each
    model's rank with style control and its change from the ranking without (the same fit with the style
    features set to zero: the same votes and intervals; ranks by interval overlap, as on the plain board)."""
    battles = db_boards.vote_style_features(engine, **filters.vote_args())
    names = {c.slug: c.display_name for c in db_actions.list_contestants(engine)}
    empty = StyleBoard(pd.DataFrame(), pd.DataFrame(), 0)
    if battles.outcome.size == 0:
        return empty
    played = np.union1d(battles.model_a, battles.model_b)
    remap = np.full(len(battles.models), -1, dtype=np.int64)
    remap[played] = np.arange(played.size)
    models = tuple(battles.models[i] for i in played)
    args = (models, remap[battles.model_a], remap[battles.model_b], battles.outcome)
    styled = fit_style_bt(*args, battles.features_a, battles.features_b, features=STYLE_COLUMNS)
    flat = np.zeros_like(battles.features_a)
    plain = fit_style_bt(*args, flat, flat, features=STYLE_COLUMNS)
    order = np.argsort(-styled.ratings, kind="stable")
    table = pd.DataFrame.from_records([
        {
            "Rank": int(styled.ranks[m]),
            RANK_DELTA: rank_delta(int(plain.ranks[m]), int(styled.ranks[m])),
            "Model": names.get(models[m], models[m]),
            "Rating": round(float(styled.ratings[m]), 1),
            "95% low": round(float(styled.ci_low[m]), 1),
            "95% high": round(float(styled.ci_high[m]), 1),
        }
        for m in order
    ])
    coefficients = pd.DataFrame({"Feature": list(styled.features), "Coefficient": styled.beta.round(3),
                                 "SE": styled.beta_se.round(3)})
    return StyleBoard(table, coefficients, int(battles.outcome.size))


# --- Fixing board ----------------------------------------------------------------------------------

FIXING_SOURCES: dict[str, str] = {"people": "People", "grader": "Grader", "auto": "Automatic arena"}
PASS_K = 5


@dataclass(frozen=True)
class FixingBoard:
    table: pd.DataFrame  # one row per model, best fix rate first
    rates: pd.DataFrame  # model, rating (fix rate %), lower, upper: for the interval chart
    turns: pd.DataFrame  # model, turns ("1", "2", "3+", "never"), corrections: for the stacked chart
    styles: pd.DataFrame  # automatic arena only: fix rate per correction style
    corrections: int
    computed_at: dt.datetime


def _human_modes(filters: VoteFilters) -> VoteFilters:
    """Corrections of every human mode count (anonymous, named, direct): a fix is judged on the reply,
    whoever wrote it, so the vote board's "Anonymous only" toggle does not apply here."""
    return dataclasses.replace(filters, modes=HUMAN_MODES)


def _totals(engine: Engine, filters: VoteFilters) -> db_boards.FixingTotals:
    return db_boards.fixing_totals(engine, **_human_modes(filters).battle_args())


def _judged_counts(
    totals: db_boards.FixingTotals, first: ModelCounts, judge: db_boards.Judge
) -> list[FixingCounts]:
    """One model's row from the per-side roll-up (one scan) and first-try counts (one scan)."""
    fixed, judged = totals.column(f"{judge}_fixed"), totals.column(f"{judge}_judged")
    flags = db_boards.flags_from_totals(totals)
    turns = db_boards.turns_from_totals(totals, judge)
    counts = []
    for m, model in enumerate(totals.models):
        correct, attempts = int(first.successes[m]), int(first.trials[m])
        counts.append(FixingCounts(
            model=model, fixed=fixed[m], judged=judged[m],
            first_correct=correct, first_attempts=attempts, tasks=((correct, attempts),),
            graded=flags.graded[m], regressions=flags.regressions[m], chatty=flags.chatty[m],
            recurrences=flags.recurrences[m], turns=turns.buckets[m],
        ))
    return counts


def _kappas(totals: db_boards.FixingTotals) -> dict[str, str]:
    cells = [totals.column(name) for name in ("both_fixed", "person_only_fixed", "grader_only_fixed",
                                              "neither_fixed")]
    return {model: kappa_from_table(*(c[m] for c in cells)).text() for m, model in enumerate(totals.models)}


def auto_records(engine: Engine, filters: VoteFilters) -> list[RunRecord]:
    """Stored automatic-arena runs of the filtered scenario (the calendar when none is chosen)."""
    scenario = scenarios.get_scenario(filters.scenario or "calendar")
    if not scenario.gradable:
        return []
    ids = db_boards.auto_battle_ids(engine, scenario=scenario.slug, since=filters.since, until=filters.until)
    return load_runs(engine, battle_ids=ids, scenario=scenario)


def _auto_counts(totals: list[RunTotals]) -> list[FixingCounts]:
    return [FixingCounts(
        model=t.model, fixed=t.fixed, judged=t.judged, first_correct=t.first_correct,
        first_attempts=t.first_attempts, tasks=tuple(t.tasks), graded=t.graded, regressions=t.regressions,
        recurrences=t.recurrences, chatty=t.chatty, turns=db_boards.turns_to_fix(t.links),
    ) for t in totals]


def build_fixing_board(engine: Engine, filters: VoteFilters, source: str) -> FixingBoard:
    """The Fixing board for one source of judgments: ``people``, ``grader`` or ``auto``."""
    if source not in FIXING_SOURCES:
        raise ValueError(f"unknown source {source!r}; expected one of {', '.join(FIXING_SOURCES)}")
    names = {c.slug: c.display_name for c in db_actions.list_contestants(engine)}
    styles = pd.DataFrame()
    kappas: dict[str, str] = {}
    if source == "auto":
        records = auto_records(engine, filters)
        counts = _auto_counts(run_totals(records))
        styles = pd.DataFrame.from_records([
            {"Model": names.get(t.model, t.model), "Correction style": t.style,
             "Fix rate": fix_rate(t.fixed, t.judged).text()}
            for t in run_totals(records, by_style=True)
        ])
    else:
        totals = _totals(engine, filters)
        human = _human_modes(filters).battle_args()
        first = db_boards.first_try_counts(engine, models=totals.models, **human)
        counts = _judged_counts(totals, first, "person" if source == "people" else "grader")
        kappas = _kappas(totals)
    rows = [r for r in fixing_table(counts, k=PASS_K) if r.fix_rate.n or r.pass_at_1.n]
    now = dt.datetime.now(dt.UTC)
    label = {r.model: names.get(r.model, r.model) for r in rows}
    table = pd.DataFrame.from_records([
        {
            "Rank": r.rank if r.fix_rate.n else None,
            "Model": label[r.model],
            "Fix rate": r.fix_rate.text(),
            "Corrections": r.fix_rate.n,
            "Turns to fix (1/2/3+/never)": " / ".join(str(r.turns_to_fix[b]) for b in TURN_BUCKETS),
            "First try (pass@1)": r.pass_at_1.text(),
            f"pass^{PASS_K}": r.pass_hat_k.text(),
            "Regression": r.regression.text(),
            "Recurrence": r.recurrence.text(),
            "Chatty": r.chatty.text(),
            **({"κ person–grader": kappas.get(r.model, "–")} if source != "auto" else {}),
        }
        for r in rows
    ])
    judged = [r for r in rows if r.fix_rate.n]
    rates = pd.DataFrame({
        "model": [label[r.model] for r in judged],
        "rating": [100 * r.fix_rate.rate for r in judged],
        "lower": [100 * r.fix_rate.low for r in judged],
        "upper": [100 * r.fix_rate.high for r in judged],
    })
    turns = pd.DataFrame.from_records([
        {"model": label[r.model], "turns": bucket, "corrections": r.turns_to_fix[bucket]}
        for r in judged for bucket in TURN_BUCKETS
    ])
    return FixingBoard(table, rates, turns, styles, sum(r.fix_rate.n for r in rows), now)


# --- Automatic arena tab ---------------------------------------------------------------------------


def automatic_arena_markdown(engine: Engine, filters: VoteFilters) -> str:
    """The study's three emoji tables from stored runs, as ``python -m scenarios report`` prints them
    (empty when no run is stored)."""
    records = auto_records(engine, filters)
    if not records:
        return ""
    scenario = scenarios.get_scenario(records[0].scenario)
    report = build_report(latest_runs(records), scenario=scenario)
    return render_markdown(report, scenario=scenario, cases=scenario.premade, title="Automatic arena")
