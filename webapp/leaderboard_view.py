"""The leaderboard page: filters, then one of three boards (tabs): Votes (Bradley-Terry, optional style
control and bootstrap intervals), Fixing (fix rates and their metrics from people, the grader or the
automatic arena, or the fixing suites' figures over generated dialogues) and Automatic arena (the study's
emoji tables from stored runs).

Every board is cached for a short TTL keyed by the database URL and the choices, so a burst of visitors
costs one computation (a bootstrap is computed once per filter set); the page says when it was computed
and over how many votes or corrections.
"""

from __future__ import annotations

import datetime as dt

import streamlit as st

from db import VoteFilters
from webapp import charts, context, resources
from webapp.flows import open_battle
from webapp.leaderboard_data import (
    FIXING_SOURCES,
    Board,
    FixingBoard,
    StyleBoard,
    automatic_arena_markdown,
    board_filters,
    build_board,
    build_fixing_board,
    build_style_board,
    publication_cutoff,
)
from webapp.leaderboard_suites import SuiteBoard, build_suite_board

CACHE_TTL_S = 60
SUITES = "suites"
SOURCES = {**FIXING_SOURCES, SUITES: "Fixing suites"}
BOARDS = {"votes": "🗳️ Votes", "fixing": "🛠️ Fixing", "auto": "🤖 Automatic arena"}
BOOTSTRAP_ROUNDS = 1000
INTERVALS = {"sandwich": "Sandwich (analytic)", "bootstrap": f"Bootstrap ({BOOTSTRAP_ROUNDS} rounds)"}
_CHART_COLUMNS = {"Model": "model", "Rating": "rating", "95% low": "lower", "95% high": "upper"}


def filters() -> VoteFilters:
    choices = {"": "All scenarios", **open_battle.scenario_choices()}
    c1, c2, c3, c4 = st.columns([2, 1, 1, 2])
    scenario = c1.selectbox("Scenario", list(choices), format_func=choices.__getitem__, key="lb_scenario")
    anonymous = c2.toggle("Anonymous only", value=True, key="lb_anonymous")
    corrections = c3.toggle(
        "Corrections only",
        value=False,
        key="lb_corrections",
        help="Only battles in which someone sent a correction: who fixes best.",
    )
    dates = c4.date_input("Date range", value=[], key="lb_dates")
    since = until = None
    if isinstance(dates, tuple | list) and len(dates) == 2:
        since = dt.datetime.combine(dates[0], dt.time(), tzinfo=dt.UTC)
        until = dt.datetime.combine(dates[1], dt.time(), tzinfo=dt.UTC) + dt.timedelta(days=1)
    cutoff = publication_cutoff(resources.settings().public_export_delay_hours)
    return board_filters(scenario=scenario or None, anonymous_only=anonymous, corrections_only=corrections,
                         since=since, until=until, closed_before=cutoff)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner="Computing the leaderboard…")
def compute(url: str, chosen: VoteFilters, bootstrap: int = 0, drop_outliers: bool = False) -> Board:
    return build_board(resources.engine(url), chosen, bootstrap=bootstrap, drop_outliers=drop_outliers)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner="Fitting the style-controlled board…")
def compute_style(url: str, chosen: VoteFilters) -> StyleBoard:
    return build_style_board(resources.engine(url), chosen)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner="Computing the Fixing board…")
def compute_fixing(url: str, chosen: VoteFilters, source: str) -> FixingBoard:
    return build_fixing_board(resources.engine(url), chosen, source)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner="Reading the stored fixing suites…")
def compute_suites(url: str, chosen: VoteFilters) -> SuiteBoard:
    return build_suite_board(resources.engine(url), chosen)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner="Reading the automatic arena's runs…")
def compute_auto(url: str, chosen: VoteFilters) -> str:
    return automatic_arena_markdown(resources.engine(url), chosen)


def _computed(count: int, noun: str, at: dt.datetime) -> None:
    st.caption(f"Computed over {count:,} {noun}{'' if count == 1 else 's'} at {at:%H:%M} UTC.")


def show() -> None:
    ctx = context.reader()
    chosen = filters()
    url = ctx.settings.resolved_database_url
    # A selector, not st.tabs: Streamlit runs every tab's code on every render, and the Fixing board
    # reads per-reply rows (seconds at a million replies); only the board on screen is computed.
    board = st.radio("Board", list(BOARDS), format_func=BOARDS.__getitem__, horizontal=True,
                     key="lb_board", label_visibility="collapsed")
    {"votes": _votes, "fixing": _fixing, "auto": _automatic}[board](url, chosen)
    cap = ctx.settings.votes_per_visitor_per_day
    if board == "votes" and cap:
        st.caption(f"Daily vote cap: {cap} votes per visitor per UTC day. Votes past the cap are refused "
                   "before anything is written, so none is stored to be set aside.")


def _votes(url: str, chosen: VoteFilters) -> None:
    left, middle, right = st.columns(3)
    style = left.toggle("Style control", value=False, key="lb_style",
                        help="Bradley-Terry with reply length, chatty text, apologies and multi-line replies "
                             "as covariates: ranks what people vote for once style is accounted for.")
    outliers = middle.toggle("Drop anomalous voters", value=False, key="lb_outliers",
                             help="A sequential test of each visitor's votes (5 or more) against everyone "
                                  "else's on the same pairs; flagged visitors' votes are left out.")
    interval = right.selectbox("Intervals", list(INTERVALS), format_func=INTERVALS.__getitem__,
                               key="lb_interval")
    board = compute(url, chosen, BOOTSTRAP_ROUNDS if interval == "bootstrap" else 0, outliers)
    _computed(board.votes, "vote", board.computed_at)
    if board.table.empty:
        st.info("No votes match these filters yet. Battles in the Arena fill this page.")
    else:
        st.dataframe(board.table, hide_index=True, width="stretch", key="lb_table")
    if outliers:  # under the board it changed
        st.caption(f"Anomalous-voter test: {board.dropped_votes:,} votes from {board.dropped_visitors} "
                   f"of {board.tested_visitors} tested visitors dropped.")
    if board.table.empty:
        return
    st.subheader("Ratings with 95% intervals")
    ratings = board.table.rename(columns=_CHART_COLUMNS)
    st.altair_chart(
        charts.ratings_chart(ratings), width="stretch", height=charts.ratings_height(len(ratings))
    )
    left, right = st.columns(2)
    size = charts.heatmap_height(len(board.win_rate))
    left.markdown("**Observed win rate** (row against column)")
    left.altair_chart(
        charts.matrix_heatmap(board.win_rate, title="win rate", value_format=".2f"), height=size
    )
    right.markdown("**Battles** per pair")
    right.altair_chart(charts.matrix_heatmap(board.battles, title="battles", value_format="d"), height=size)
    st.caption(
        "Ties count half a win to each side; 'both bad' counts as a tie. Named side-by-side votes, flagged "
        "battles and battles whose models revealed their names are left out unless a filter says otherwise."
    )
    if style:
        _style(url, chosen)


def _style(url: str, chosen: VoteFilters) -> None:
    styled = compute_style(url, chosen)
    st.subheader("Style-controlled ratings")
    if styled.table.empty:
        st.info("No vote with replies on both sides matches these filters.")
        return
    st.dataframe(styled.table, hide_index=True, width="stretch", key="lb_style_table")
    st.caption("Contextual Bradley-Terry (sandwich 95% intervals): each feature is the z-scored difference "
               "between the two sides; L2 penalty on the style coefficients only. A positive coefficient "
               "means votes favour more of that feature.")
    st.dataframe(styled.coefficients, hide_index=True, key="lb_style_coefficients")


def _fixing(url: str, chosen: VoteFilters) -> None:
    source = st.radio("Judged by", list(SOURCES), format_func=SOURCES.__getitem__,
                      horizontal=True, key="lb_fix_source")
    if source == SUITES:
        _suites(url, chosen)
        return
    board = compute_fixing(url, chosen, source)
    _computed(board.corrections, "judged correction", board.computed_at)
    if board.table.empty:
        st.info("No judged correction matches these filters yet.")
        return
    st.dataframe(board.table, hide_index=True, width="stretch", key="lb_fix_table")
    if not board.rates.empty:
        st.subheader("Fix rate with 95% intervals")
        st.altair_chart(charts.ratings_chart(board.rates, x_title="fix rate % (95% Wilson interval)"),
                        width="stretch", height=charts.ratings_height(len(board.rates)))
        st.subheader("Turns to fix")
        models = board.turns["model"].nunique()
        st.altair_chart(charts.turns_to_fix_chart(board.turns), width="stretch",
                        height=charts.turns_height(models))
    if not board.styles.empty:
        st.markdown("**Fix rate per correction style** (automatic arena)")
        st.dataframe(board.styles, hide_index=True, key="lb_fix_styles")
    st.caption(
        "Rank = 1 + the models whose fix-rate interval lies wholly above. Fix rate: corrections judged "
        "fixed over those judged (people: the visitor's ✓/✗; grader: the next reply graded correct in the "
        "dialogue's context). pass@1: first replies correct; pass^5: five first tries all correct "
        "(τ-bench). Regression, recurrence, chatty: share of graded replies. κ: person–grader agreement."
    )


def _suites(url: str, chosen: VoteFilters) -> None:
    board = compute_suites(url, chosen)
    if board.table.empty:
        st.info(f"No fixing suite of {board.scenario!r} is stored yet: `python -m scenarios run "
                f"{board.scenario} --models all --dialogues 50` plays one.")
        return
    _computed(board.dialogues, "generated dialogue", board.computed_at)
    st.dataframe(board.table, hide_index=True, width="stretch", key="lb_suite_table")
    st.caption(
        f"Each model played generated dialogues of {board.scenario!r} (`python -m scenarios run "
        "--dialogues`); intervals are 95% cluster-bootstrap intervals over dialogues, n the events counted. "
        "Rank = 1 + the models whose *Fixed within 2* interval lies wholly above: overlapping intervals, "
        f"no real difference. pass^k: {board.k} fresh tries at each dialogue's first turn, all correct "
        "(τ-bench). Maintained: replies to a false correction that kept the right call (FB-Bench)."
    )


def _automatic(url: str, chosen: VoteFilters) -> None:
    markdown = compute_auto(url, chosen)
    if not markdown:
        st.info("No automatic run is stored yet: `python -m scenarios run calendar --models all` "
                "fills this tab.")
        return
    st.markdown(markdown)
