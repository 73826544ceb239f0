"""The leaderboard page: filters, then the cached board (db counts fitted by ranking), a table, charts.

The expensive part is cached for a short TTL keyed by the database URL and the filter values, so a burst
of visitors costs one computation; the page says when it was computed and over how many votes.
"""

from __future__ import annotations

import datetime as dt

import streamlit as st

from webapp import charts, gateway, resources
from webapp.leaderboard_data import Board, Filters, build_board

CACHE_TTL_S = 60
_CHART_COLUMNS = {"Model": "model", "Rating": "rating", "95% low": "lower", "95% high": "upper"}


def filters() -> Filters:
    choices = {"": "All scenarios", **gateway.scenario_choices()}
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
    return Filters(scenario or None, anonymous, corrections, since, until)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner="Computing the leaderboard…")
def compute(url: str, chosen: Filters) -> Board:
    return build_board(resources.engine(url), chosen)


def show() -> None:
    ctx = gateway.reader()
    chosen = filters()
    board = compute(ctx.settings.resolved_database_url, chosen)
    noun = "vote" if board.votes == 1 else "votes"
    st.caption(f"Computed over {board.votes:,} {noun} at {board.computed_at:%H:%M} UTC.")
    if board.table.empty:
        st.info("No votes match these filters yet. Battles in the Arena fill this page.")
        return
    st.dataframe(board.table, hide_index=True, width="stretch", key="lb_table")
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
