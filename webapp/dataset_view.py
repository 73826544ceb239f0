"""The dataset page: counts, filters, downloads (built by ``db.export`` only when a button is clicked),
the schema and the licence (the export's own dataset card)."""

from __future__ import annotations

import datetime as dt
import functools

import streamlit as st

from db import VoteFilters
from webapp import context, gateway_data
from webapp.flows import open_battle

EXPORT_MODES = ("anonymous", "named", "direct", "auto")  # db.MODES, as the export CLI lists them
DOWNLOADS = (
    # (label, format, view, file name)
    ("Dialogues (JSONL)", "jsonl", "dialogues", "fixit-arena-dialogues.jsonl"),
    ("Dialogues (Parquet)", "parquet", "dialogues", "fixit-arena-dialogues.parquet"),
    ("Tables (CSV, zipped)", "csv", "dialogues", "fixit-arena-tables.zip"),
    ("Battles, one row per vote (CSV, for ranking fit)", "csv", "battles", "fixit-arena-battles.csv"),
    ("Preference pairs (JSONL)", "jsonl", "preferences", "fixit-arena-preferences.jsonl"),
    ("Correction triples (JSONL)", "jsonl", "corrections", "fixit-arena-corrections.jsonl"),
)


def _filters(ctx: context.Context) -> VoteFilters:
    choices = {"": "All scenarios", **open_battle.scenario_choices()}
    c1, c2, c3, c4 = st.columns([2, 2, 1, 2])
    scenario = c1.selectbox("Scenario", list(choices), format_func=choices.__getitem__, key="ds_scenario")
    modes = c2.multiselect("Modes", list(EXPORT_MODES), default=list(EXPORT_MODES), key="ds_modes",
                           help="as `python -m db export --mode`")
    corrections = c3.toggle("Corrections only", value=False, key="ds_corrections")
    dates = c4.date_input("Date range", value=[], key="ds_dates")
    since = until = None
    if isinstance(dates, tuple | list) and len(dates) == 2:
        since = dt.datetime.combine(dates[0], dt.time(), tzinfo=dt.UTC)
        until = dt.datetime.combine(dates[1], dt.time(), tzinfo=dt.UTC) + dt.timedelta(days=1)
    return gateway_data.public_filters(
        ctx.settings, scenario=scenario or None, since=since, until=until, corrections_only=corrections,
        modes=None if set(modes) == set(EXPORT_MODES) or not modes else tuple(modes),
    )


METRICS = (("Battles", "battles"), ("Messages", "messages"), ("Corrections", "corrections"),
           ("Votes", "votes"))


def show() -> None:
    ctx = context.reader()
    cols = st.columns(len(METRICS))  # filled once the filters below are known: they count the download
    st.subheader("Download")
    chosen = _filters(ctx)
    counts = gateway_data.dataset_counts(ctx, chosen)
    for col, (label, table) in zip(cols, METRICS, strict=True):
        col.metric(label, f"{counts.get(table, 0):,}", help="in the download with the filters below")
    delay = ctx.settings.public_export_delay_hours
    st.caption(
        f"{counts.get('battles', 0):,} battles match these filters. Open battles and battles flagged by "
        f"moderation are never published, and a closed battle appears {delay:g} hours after it ended."
    )
    for i, (label, fmt, view, name) in enumerate(DOWNLOADS):
        st.download_button(
            label,
            data=functools.partial(gateway_data.dataset_bytes, ctx, chosen, fmt=fmt, view=view),
            file_name=name,
            key=f"ds_download_{i}",
            on_click="ignore",
        )
    with st.expander("Schema and licence (the dataset card)", expanded=False):
        st.markdown(gateway_data.dataset_card(chosen))
