"""The admin page: a password gate, contestants on/off, flagging battles, live figures.

Moderation never deletes: a flagged battle keeps everything, its vote just leaves the leaderboard.
"""

from __future__ import annotations

import datetime as dt
import secrets

import pandas as pd
import streamlit as st

from webapp import context as run
from webapp import gateway_data, resources
from webapp.admin_gate import DatabaseLoginThrottle, admin_available, check_password
from webapp.context import Context

_OK = "admin_ok"
_SESSION = "admin_session"  # a random id per login: who did what in the moderation log
_TAB = "admin_tab_id"  # a random id per browser session: the key of its login back-off


def _throttle(database_url: str) -> DatabaseLoginThrottle:
    """The login back-off of the arena stored at ``database_url``: kept in its database, so it holds
    across every server process on it."""
    return DatabaseLoginThrottle(resources.engine(database_url))


def _throttle_keys() -> tuple[str, ...]:
    """This session's key and its address key's (every visitor of unknown address shares one); the
    throttle adds the global budget over everyone."""
    tab = st.session_state.setdefault(_TAB, secrets.token_hex(8))
    digest = run.address_digest(resources.settings())
    return (f"session:{tab}", f"address:{digest[:16]}")


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
        decision = check_password(
            settings, attempt, throttle=_throttle(settings.resolved_database_url), keys=_throttle_keys()
        )
        if decision.allowed:
            st.session_state[_OK] = True
            st.session_state[_SESSION] = secrets.token_hex(8)
            st.rerun()
        st.error(decision.reason)
    return False


def show() -> None:
    if not _login():
        return
    ctx = run.reader()
    st.button("Log out", key="admin_logout", on_click=lambda: st.session_state.pop(_OK, None))
    _contestants(ctx)
    _flagging(ctx)
    _moderation_log(ctx)
    _figures(ctx)


def _contestants(ctx: Context) -> None:
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
    gateway_data.set_enabled(run.reader(), slug=slug, enabled=enabled,
                             admin_session=str(st.session_state.get(_SESSION, "")))
    st.toast(f"{slug} {'enabled' if enabled else 'disabled'}")


def _flagging(ctx: Context) -> None:
    st.subheader("Recent battles")
    st.caption(
        "A flagged battle's vote leaves the leaderboard; nothing is deleted. Unflag restores the status "
        "it had. Every flag and unflag is logged with its reason and your login session."
    )
    battles = gateway_data.recent_battles(ctx)
    if not battles:
        st.caption("No battles yet.")
        return
    st.dataframe(
        pd.DataFrame(
            {
                "battle": b.id,
                "created": b.created_at,
                "mode": b.mode,
                "status": b.status,
                "models": " vs ".join(s for s in (b.contestant_a, b.contestant_b) if s),
                "messages": b.messages,
                "first request": b.first_request[:200],
                "flag reason": b.flag_reason or "",
            }
            for b in battles
        ),
        hide_index=True,
        key="admin_battles",
    )
    labels = {b.id: f"{b.id[:8]} · {b.status} · {b.first_request[:60]}" for b in battles}
    with st.form("admin_flag"):
        battle_id = st.selectbox("Battle", list(labels), format_func=labels.__getitem__, key="admin_flag_id")
        reason = st.text_input("Reason", key="admin_flag_reason", value="abuse")
        flag, unflag = st.columns(2)
        do_flag = flag.form_submit_button("Flag")
        do_unflag = unflag.form_submit_button("Unflag")
    if do_flag or do_unflag:
        outcome = gateway_data.flag(
            ctx, battle_id=str(battle_id), reason=reason, undo=do_unflag,
            admin_session=str(st.session_state.get(_SESSION, "")),
        )
        (st.success if outcome.startswith("Battle") else st.error)(outcome)


def _moderation_log(ctx: Context) -> None:
    events = gateway_data.moderation_log(ctx)
    with st.expander(f"Moderation log ({len(events)} latest)", expanded=False):
        if not events:
            st.caption("Nothing flagged or toggled yet.")
            return
        st.dataframe(
            pd.DataFrame(
                {
                    "time": e.created_at,
                    "action": e.action,
                    "battle": e.battle_id or "",
                    "contestant": e.contestant or "",
                    "reason": e.reason,
                    "admin session": e.admin_session,
                    "status before": e.prior_status or "",
                }
                for e in events
            ),
            hide_index=True,
            key="admin_moderation_log",
        )


def _figures(ctx: Context) -> None:
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
