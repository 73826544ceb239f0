"""The leaderboard page: filters, then one of three boards (tabs): Votes (Bradley-Terry with sandwich or
bootstrap intervals; style control re-ranks the same table, with each model's rank change), Fixing (fix
rates and their metrics from people, the grader or the automatic arena, or the fixing suites' figures over
generated dialogues) and Automatic arena (the study's emoji tables from stored runs). An empty board says
in words how it fills; the commands that fill the automatic ones are in docs/OPERATIONS.md.

Every board is cached for a short TTL keyed by the database URL and the choices, so a burst of visitors
costs one computation (a bootstrap is computed once per filter set); the page says when it was computed
and over how many votes or corrections.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pandas as pd
import streamlit as st

from db import VoteFilters
from webapp import charts, context, resources
from webapp.flows import open_battle
from webapp.leaderboard_data import (
    FIXING_SOURCES,
    RANK_DELTA,
    Board,
    FixingBoard,
    StyleBoard,
    automatic_arena_markdown,
    board_filters,
    build_board,
    build_fixing_board,
    build_style_board,
    publication_cutoff,
    style_ranked,
)
from webapp.leaderboard_kinds import kinds_table
from webapp.leaderboard_replay import RatingsBoard, ReplayBoard, build_ratings_board, build_replay_board
from webapp.leaderboard_suites import SuiteBoard, build_suite_board

CACHE_TTL_S = 60
SUITES, REPLAY, RATINGS = "suites", "replay", "ratings"
SOURCES = {**FIXING_SOURCES, SUITES: "Fixing suites", REPLAY: "Replay", RATINGS: "Ratings: people and grader"}
BOARDS = {"votes": "🗳️ Votes", "fixing": "🛠️ Fixing", "auto": "🤖 Automatic arena"}
BOOTSTRAP_ROUNDS = 1000
INTERVALS = {"sandwich": "Sandwich (analytic)", "bootstrap": f"Bootstrap ({BOOTSTRAP_ROUNDS} rounds)"}
_CHART_COLUMNS = {"Model": "model", "Rating": "rating", "95% low": "lower", "95% high": "upper"}
_STYLE_FIXES = "Off under style control: its fit counts every vote, with sandwich intervals."
# How each empty Fixing source fills, in a visitor's words (the commands are in docs/OPERATIONS.md).
_FILLS = {
    "people": "a visitor who corrects a reply and marks the next one ✓ or ✗ adds one.",
    "grader": "a correction in a gradable scenario adds one once the next reply is graded.",
    "auto": "an operator runs the automatic arena, and its corrections appear here.",
}


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


@st.cache_data(ttl=CACHE_TTL_S, show_spinner="Reading replay's answers…")
def compute_replay(url: str, chosen: VoteFilters) -> ReplayBoard:
    return build_replay_board(resources.engine(url), chosen)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner="Fitting the three ratings…")
def compute_ratings(url: str, chosen: VoteFilters, weight: float) -> RatingsBoard:
    return build_ratings_board(resources.engine(url), chosen, weight=weight)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner="Counting fixes per mistake kind…")
def compute_kinds(url: str, chosen: VoteFilters, source: str) -> pd.DataFrame:
    return kinds_table(resources.engine(url), chosen, source)


def _kinds(url: str, chosen: VoteFilters, source: str) -> None:
    """The source's fix rates per mistake kind, under its table: a read of the per-kind roll-ups kept on
    write (``side_kinds``, ``replay_tallies``), so it costs the board about what the side totals do."""
    table = compute_kinds(url, chosen, source)
    if table.empty:
        st.info("No judged correction of a reply with a named mistake matches these filters yet.")
        return
    st.subheader("Fix rate per mistake kind")
    _table(table, f"lb_kinds_{source}")
    st.caption("Corrections of a reply with each kind of mistake that the next reply fixed (95% Wilson "
               "interval, n). A reply with two mistakes counts for both kinds.")


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
                        help="Re-ranks the table by a Bradley-Terry fit with reply length, chatty text, "
                             "apologies and multi-line replies as covariates: what people vote for once "
                             "style is accounted for. Δ rank shows each model's move.")
    off = _STYLE_FIXES if style else ""
    outliers = middle.toggle("Drop anomalous voters", value=False, key="lb_outliers", disabled=style,
                             help="A sequential test of each visitor's votes (5 or more) against everyone "
                                  "else's on the same pairs; flagged visitors' votes are left out. " + off)
    interval = right.selectbox("Intervals", list(INTERVALS), format_func=INTERVALS.__getitem__,
                               key="lb_interval", disabled=style, help=off or None)
    outliers = outliers and not style
    board = compute(url, chosen, BOOTSTRAP_ROUNDS if interval == "bootstrap" and not style else 0, outliers)
    _computed(board.votes, "vote", board.computed_at)
    if board.table.empty:
        st.info("No votes match these filters yet: every vote cast in the Arena counts here once its "
                "battle is published.")
        return
    styled = compute_style(url, chosen) if style else None
    table = board.table if styled is None else style_ranked(board.table, styled.table)
    _table(table, "lb_table")
    if outliers:  # under the board it changed
        st.caption(f"Anomalous-voter test: {board.dropped_votes:,} votes from {board.dropped_visitors} "
                   f"of {board.tested_visitors} tested visitors dropped.")
    if styled is not None:
        _style_notes(styled)
    st.subheader("Ratings with 95% intervals" + (" (style-controlled)" if styled is not None else ""))
    ratings = table.dropna(subset=["Rating"]).rename(columns=_CHART_COLUMNS)
    st.altair_chart(
        charts.ratings_chart(ratings), width="stretch", height=charts.ratings_height(len(ratings))
    )
    _heatmaps(board)


def _heatmaps(board: Board) -> None:
    """Observed win rate and battles per pair, side by side (stacked on a phone), every model named."""
    left, right = st.columns(2)
    size = charts.heatmap_height(len(board.win_rate))
    left.markdown("**Observed win rate** (row against column)")
    left.altair_chart(charts.matrix_heatmap(board.win_rate, title="win rate", value_format=".2f"),
                      width="stretch", height=size)
    right.markdown("**Battles** per pair")
    right.altair_chart(charts.matrix_heatmap(board.battles, title="battles", value_format="d"),
                       width="stretch", height=size)
    st.caption(
        "Ties count half a win to each side; 'both bad' counts as a tie. Named side-by-side votes, flagged "
        "battles and battles whose models revealed their names are left out unless a filter says otherwise."
    )


def _style_notes(styled: StyleBoard) -> None:
    """What the re-ranked table means, and the style coefficients behind it (folded away)."""
    if styled.table.empty:
        st.info("Style control needs votes with replies on both sides; none matches these filters, so the "
                "table keeps the ranking without it.")
        return
    st.caption(f"Ranked with style control over {styled.votes:,} votes: a contextual Bradley-Terry whose "
               "features are the z-scored differences between the two sides' replies (L2 penalty on the "
               "style coefficients only; sandwich 95% intervals). Δ rank: places gained (+) or lost (−) "
               "against the same votes ranked without style control.")
    with st.expander("Style coefficients"):
        st.caption("Log-odds per standard deviation of the difference: a positive coefficient means votes "
                   "favour more of that feature.")
        st.dataframe(styled.coefficients, hide_index=True, key="lb_style_coefficients")


# Short headers for the widest tables (the full name becomes the column's help), and the columns pinned at
# the left: with eleven columns the Fixing table is wider than a laptop's page, and the rest of it scrolls
# inside its frame while the model's name stays in view.
_HEADERS: dict[str, tuple[str, str]] = {
    "Turns to fix (1/2/3+/never)": ("Turns to fix", "Corrections each mistake took: 1 / 2 / 3+ / never."),
    "First try (pass@1)": ("pass@1", "First try (pass@1): first replies graded correct."),
    "First-try accuracy": ("First try", "First-try accuracy: first replies graded correct."),
    "κ person–grader": ("κ", "Cohen's κ between people's ✓/✗ and the grader on the same corrections."),
    "Corrections per fix": ("Per fix", "Corrections per fix."),
}
_PINNED = ("Rank", RANK_DELTA, "Model")


def _table(frame: pd.DataFrame, key: str) -> None:
    """A board's table at the width of its frame, Rank and Model pinned, the rest scrolling inside it."""
    config: dict[str, Any] = {}
    for column in frame.columns:
        label, text = _HEADERS.get(column, (column, None))
        if column in _PINNED or column in _HEADERS:
            config[column] = st.column_config.Column(label, help=text, pinned=column in _PINNED)
    st.dataframe(frame, hide_index=True, width="stretch", column_config=config, key=key)


def _fixing(url: str, chosen: VoteFilters) -> None:
    source = st.radio("Judged by", list(SOURCES), format_func=SOURCES.__getitem__,
                      horizontal=True, key="lb_fix_source")
    if source in (SUITES, REPLAY, RATINGS):
        {SUITES: _suites, REPLAY: _replay, RATINGS: _ratings}[source](url, chosen)
        return
    board = compute_fixing(url, chosen, source)
    _computed(board.corrections, "judged correction", board.computed_at)
    if board.table.empty:
        st.info(f"No judged correction matches these filters yet: {_FILLS[source]}")
        return
    _table(board.table, "lb_fix_table")
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
        _table(board.styles, "lb_fix_styles")
    _kinds(url, chosen, source)
    st.caption(
        "Rank = 1 + the models whose fix-rate interval lies wholly above. Fix rate: corrections judged "
        "fixed over those judged (people: the visitor's ✓/✗; grader: the next reply graded correct in the "
        "dialogue's context). pass@1: first replies correct; pass^5: five first tries all correct "
        "(τ-bench). Regression, recurrence, chatty: share of graded replies. κ: person–grader agreement."
    )


def _suites(url: str, chosen: VoteFilters) -> None:
    board = compute_suites(url, chosen)
    if board.table.empty:
        st.info(f"No fixing suite of {board.scenario!r} is stored yet: an operator runs the suites, and "
                "each model's figures appear here.")
        return
    _computed(board.dialogues, "generated dialogue", board.computed_at)
    _table(board.table, "lb_suite_table")
    st.caption(
        f"Each model played the same generated dialogues of {board.scenario!r}; intervals are 95% "
        "cluster-bootstrap intervals over dialogues, n the events counted. "
        "Sampling: greedy or the temperature the suite ran at (and the correction style when not *fix*); "
        "each setting's suites are ranked among themselves. "
        "Rank = 1 + the models whose *Fixed within 2* interval lies wholly above: overlapping intervals, "
        f"no real difference. pass^k: {board.k} fresh tries at each dialogue's first turn, all correct "
        "(τ-bench). Maintained: replies to a false correction that kept the right call (FB-Bench)."
    )


def _replay(url: str, chosen: VoteFilters) -> None:
    board = compute_replay(url, chosen)
    if board.table.empty:
        st.info("No replayed correction yet: an operator replays the corrections people wrote to every "
                "model, and each model's fix rate on them appears here.")
        return
    _computed(board.answers, "replayed answer", board.computed_at)
    _table(board.table, "lb_replay_table")
    _kinds(url, chosen, REPLAY)
    st.caption(
        "Each correction a person wrote (the conversation up to the faulty reply, then the correction) was "
        "sent to other models, and the grader judged each answer in that context. Others' mistakes: the "
        "model fixes a mistake another model made; own mistakes: it answers its own again. Intervals are "
        "95% Wilson intervals; n the answers."
    )


def _ratings(url: str, chosen: VoteFilters) -> None:
    weight = resources.settings().composite_automatic_weight
    board = compute_ratings(url, chosen, weight)
    if board.table.empty:
        st.info("No vote and no replayed correction match these filters yet: votes and replay fill it.")
        return
    _computed(board.votes, "vote", board.computed_at)
    _table(board.table, "lb_ratings_table")
    st.markdown(f"**Agreement between people and the grader** (Kendall's τ over the models both rate): "
                f"{board.tau}")
    st.caption(
        f"Bradley-Terry ratings (Elo scale, 95% robust intervals). People: the counted votes, as on the "
        f"Votes board. Automatic ({board.outcomes:,} pairs): two models' answers to the same replayed "
        f"correction, or two models' plays of the same generated dialogue in the fixing suites; the one "
        f"that fixed it (every mistake within two corrections) beats the one that did not, both or neither "
        f"is a tie. Composite: "
        f"both together, one automatic outcome weighing {board.weight:g} of a vote. Rank: by the composite, "
        "1 + the models whose interval lies wholly above."
    )


def _automatic(url: str, chosen: VoteFilters) -> None:
    markdown = compute_auto(url, chosen)
    if not markdown:
        st.info("No automatic runs yet: an operator runs the automatic arena, which plays the scenario's "
                "scripted dialogue against every model, and its tables appear here.")
        return
    st.markdown(markdown)
