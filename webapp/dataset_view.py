"""The dataset page: what is published and when (in words), counts, filters, downloads (built by
``db.export`` only when a button is clicked, disabled while they would be empty), the schema and the
licence (the export's own dataset card)."""

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
    ("Replay items: every correction as a test for any model (JSONL, for `scenarios replay --from`)", "jsonl",
     "replay", "fixit-arena-replay.jsonl"),
    ("Replay pairs: two models on the same correction (CSV)", "csv", "replay_pairs",
     "fixit-arena-replay-pairs.csv"),
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


def _battles(n: int) -> str:
    return f"{n:,} battle" + ("" if n == 1 else "s")


def _when(moment: dt.datetime, now: dt.datetime) -> str:
    """``14:05 UTC``, with ``tomorrow`` or the date when it is not today (UTC)."""
    moment = moment.astimezone(dt.UTC)
    days = (moment.date() - now.astimezone(dt.UTC).date()).days
    day = "" if days <= 0 else " tomorrow" if days == 1 else f" on {moment:%Y-%m-%d}"
    return f"{moment:%H:%M} UTC{day}"


def publication_message(pub: gateway_data.Publication, *, now: dt.datetime) -> str:
    """What is published and when, e.g. "7 battles recorded; 0 published yet: a battle is published 24 h
    after it closes; the next one at 14:05 UTC." The next one is the earliest closed battle still waiting
    for the delay; without one the sentence says none is waiting."""
    yet = " yet" if pub.next_at else ""
    counts = f"{_battles(pub.recorded)} recorded; {pub.published:,} published{yet}"
    if not pub.delay_hours:
        return f"{counts}: closed battles are published at once."
    rule = f"a battle is published {pub.delay_hours:g} h after it closes"
    then = f"the next one at {_when(pub.next_at, now)}" if pub.next_at else "no closed battle is waiting"
    return f"{counts}: {rule}; {then}."


def _empty_reason(pub: gateway_data.Publication, *, now: dt.datetime) -> str:
    reason = "Nothing to download yet: no published battle matches these filters"
    return reason + (f"; the next one is published at {_when(pub.next_at, now)}." if pub.next_at else ".")


def show() -> None:
    ctx = context.reader()
    message = st.empty()  # the publication sentence, first on the page; filled once the filters are known
    cols = st.columns(len(METRICS))  # filled once the filters below are known: they count the download
    st.subheader("Download")
    chosen = _filters(ctx)
    counts = gateway_data.dataset_counts(ctx, chosen)
    pub = gateway_data.publication(ctx, chosen)
    now = dt.datetime.now(dt.UTC)
    message.info(publication_message(pub, now=now))
    for col, (label, table) in zip(cols, METRICS, strict=True):
        col.metric(label, f"{counts.get(table, 0):,}", help="in the download with the filters below")
    matching = counts.get("battles", 0)
    st.caption(
        f"{_battles(matching)} {'matches' if matching == 1 else 'match'} these filters. An open battle waits "
        "until it closes (voted, skipped or left idle); battles flagged by moderation are never published."
    )
    empty = pub.published == 0
    for i, (label, fmt, view, name) in enumerate(DOWNLOADS):
        st.download_button(
            label,
            data=functools.partial(gateway_data.dataset_bytes, ctx, chosen, fmt=fmt, view=view),
            file_name=name,
            key=f"ds_download_{i}",
            on_click="ignore",
            disabled=empty,
            help=_empty_reason(pub, now=now) if empty else None,
        )
    with st.expander("Schema and licence (the dataset card)", expanded=False):
        st.markdown(gateway_data.dataset_card(chosen))
