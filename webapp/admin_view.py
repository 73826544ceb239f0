"""The admin page: a password gate, contestants on/off, flagging battles, live figures.

Moderation never deletes: a flagged battle keeps everything, its vote just leaves the leaderboard.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd
import streamlit as st

from webapp import gateway, gateway_data, resources
from webapp.admin_gate import admin_available, check_password

_OK = "admin_ok"


def _login() -> bool:
    settings = resources.settings()
    available = admin_available(settings)
    if not available.allowed:
        st.error(available.reason)
        return False
    if st.session_state.get(_OK):
        return True
    with st.form("admin_login"):
        attempt = st.text_input("Admin password", type="password", key="admin_password")
        submitted = st.form_submit_button("Log in")
    if submitted:
        decision = check_password(settings, attempt)
        if decision.allowed:
            st.session_state[_OK] = True
            st.rerun()
        st.error(decision.reason)
    return False


def show() -> None:
    if not _login():
        return
    ctx = gateway.reader()
    st.button("Log out", key="admin_logout", on_click=lambda: st.session_state.pop(_OK, None))
    _contestants(ctx)
    _flagging(ctx)
    _figures(ctx)


def _contestants(ctx: gateway.Context) -> None:
    st.subheader("Contestants")
    st.caption("Disabled contestants keep their history and leave the pair sampler.")
    ready = set(ctx.pool.ready_slugs())
    for contestant in gateway_data.all_contestants(ctx):
        state = "ready" if contestant.slug in ready else "not loaded"
        st.toggle(
            f"{contestant.display_name} (`{contestant.slug}`, {state})",
            value=contestant.enabled,
            key=f"admin_enable_{contestant.slug}",
            on_change=_toggle,
            args=(contestant.slug,),
        )


def _toggle(slug: str) -> None:
    enabled = bool(st.session_state[f"admin_enable_{slug}"])
    gateway_data.set_enabled(gateway.reader(), slug=slug, enabled=enabled)
    st.toast(f"{slug} {'enabled' if enabled else 'disabled'}")


def _flagging(ctx: gateway.Context) -> None:
    st.subheader("Flag a battle")
    st.caption("A flagged battle's vote leaves the leaderboard; nothing is deleted. Unflag to undo.")
    with st.form("admin_flag"):
        battle_id = st.text_input("Battle id", key="admin_flag_id")
        reason = st.text_input("Reason", key="admin_flag_reason", value="abuse")
        flag, unflag = st.columns(2)
        do_flag = flag.form_submit_button("Flag")
        do_unflag = unflag.form_submit_button("Unflag")
    if do_flag or do_unflag:
        outcome = gateway_data.flag(ctx, battle_id=battle_id.strip(), reason=reason, undo=do_unflag)
        (st.success if outcome.startswith("Battle") else st.error)(outcome)


def _figures(ctx: gateway.Context) -> None:
    st.subheader("Live figures (last 24 hours)")
    since = dt.datetime.now(dt.UTC) - dt.timedelta(hours=24)
    hours, latency = gateway_data.admin_figures(ctx, since=since)
    totals = gateway_data.table_counts(ctx)
    cols = st.columns(4)
    cols[0].metric("Battles", totals.get("battles", 0))
    cols[1].metric("Votes", totals.get("votes", 0))
    cols[2].metric("Replies (24 h)", sum(f.replies for f in latency))
    cols[3].metric("Errors (24 h)", sum(f.errors for f in latency))
    if hours:
        frame = pd.DataFrame({"hour": [h.hour for h in hours], "battles": [h.count for h in hours]})
        st.bar_chart(frame, x="hour", y="battles")
    if latency:
        st.dataframe(
            pd.DataFrame(
                {
                    "model": f.model,
                    "replies": f.replies,
                    "errors": f.errors,
                    "mean time to first token (ms)": f.mean_ttft_ms,
                    "mean latency (ms)": f.mean_total_ms,
                    "max latency (ms)": f.max_total_ms,
                    "tokens": f.completion_tokens,
                }
                for f in latency
            ),
            hide_index=True,
            key="admin_latency",
        )
    else:
        st.caption("No replies in the last 24 hours.")
