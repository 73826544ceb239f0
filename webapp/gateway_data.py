"""The admin and dataset pages' door to ``db`` (moderation, live figures, exports).

Export modules are imported when used, so a page that never exports does not load them.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import streamlit as st

from db import DBError, VoteFilters
from db import actions as db_actions
from db import boards as db_boards
from settings import Settings
from webapp import context as run
from webapp.context import Context

_LOG = logging.getLogger(__name__)


# --- admin --------------------------------------------------------------------------------------------


def all_contestants(ctx: Context) -> list[Any]:
    run.ensure_contestants(ctx)
    return list(db_actions.list_contestants(ctx.engine))


def set_enabled(ctx: Context, *, slug: str, enabled: bool, admin_session: str = "") -> None:
    """An admin's toggle: stored with its moderation-log row, and logged for the operator."""
    db_actions.set_contestant_enabled(ctx.engine, slug=slug, enabled=enabled, admin_session=admin_session,
                                      reason="admin toggle")
    _LOG.warning("admin %s contestant %s (admin session %s)", "enabled" if enabled else "disabled", slug,
                 admin_session or "-")


def flag(ctx: Context, *, battle_id: str, reason: str, undo: bool, admin_session: str) -> str:
    """Flag (or unflag) a battle, logged with the admin's session; returns a sentence for the admin."""
    try:
        if undo:
            view = db_actions.unflag_battle(
                ctx.engine, battle_id=battle_id, reason=reason, admin_session=admin_session
            )
            return f"Battle {view.id} unflagged (now {view.status})."
        view = db_actions.flag_battle(
            ctx.engine, battle_id=battle_id, reason=reason, admin_session=admin_session
        )
    except DBError as exc:
        return f"Refused: {exc}"
    return f"Battle {view.id} flagged: its vote no longer counts."


def recent_battles(ctx: Context, *, limit: int = 20) -> list[Any]:
    return list(db_actions.recent_battles(ctx.engine, limit=limit))


def moderation_log(ctx: Context, *, limit: int = 50) -> list[Any]:
    return list(db_actions.moderation_log(ctx.engine, limit=limit))


def admin_figures(ctx: Context, *, since: dt.datetime) -> tuple[list[Any], list[Any]]:
    return (
        db_boards.admin_battles_per_hour(ctx.engine, since=since),
        db_boards.admin_latency(ctx.engine, since=since),
    )


def table_counts(ctx: Context) -> dict[str, int]:
    return dict(db_boards.table_counts(ctx.engine))


# --- dataset ------------------------------------------------------------------------------------------


def public_filters(
    settings: Settings,
    *,
    scenario: str | None,
    since: dt.datetime | None,
    until: dt.datetime | None,
    corrections_only: bool,
    now: dt.datetime | None = None,
    modes: tuple[str, ...] | None = None,
) -> VoteFilters:
    """The Dataset page's filters, as the one filter value: never an open battle, never a flagged one
    (those stay in the operator's ``python -m db export``), and only battles closed at least
    ``ARENA_PUBLIC_EXPORT_DELAY_HOURS`` ago (0: closed battles at once). The cut-off is rounded down to
    the minute, so one filter set keeps one cache key for a while instead of a new one per click.
    ``modes`` None: every mode."""
    from webapp.leaderboard_data import publication_cutoff

    cutoff = publication_cutoff(settings.public_export_delay_hours, now=now)
    return VoteFilters(
        scenario=scenario,
        since=since,
        until=until,
        corrections_only=corrections_only,
        include_open=False,
        exclude_flagged=True,
        closed_before=cutoff,
        modes=modes,
    )


def dataset_count(ctx: Context, filters: VoteFilters) -> int:
    from db.export import count_battles, snapshot

    with snapshot(ctx.engine) as conn:
        return count_battles(conn, filters)


def dataset_counts(ctx: Context, filters: VoteFilters) -> dict[str, int]:
    """Battles, messages, corrections and votes a download with ``filters`` holds (one snapshot)."""
    from db.export import count_selection, snapshot

    with snapshot(ctx.engine) as conn:
        return count_selection(conn, filters)


@dataclass(frozen=True)
class Publication:
    """What the Dataset page says about publication under one set of filters."""

    recorded: int  # battles in the database for these filters, published or not (open, flagged, waiting)
    published: int  # battles the downloads hold
    delay_hours: float  # ARENA_PUBLIC_EXPORT_DELAY_HOURS
    next_at: dt.datetime | None  # when the next closed battle is published (None: none is waiting)


def published_at(closed: dt.datetime, delay_hours: float) -> dt.datetime:
    """The first minute at which a battle closed at ``closed`` is public: the cut-off
    (:func:`~webapp.leaderboard_data.publication_cutoff`, now less the delay, rounded down to the minute)
    must be past ``closed``, so it is the minute after ``closed`` plus the delay, rounded up to a minute."""
    moment = closed.replace(second=0, microsecond=0) + dt.timedelta(minutes=1, hours=delay_hours)
    whole = moment.replace(second=0, microsecond=0)
    return whole if whole == moment else whole + dt.timedelta(minutes=1)


def publication(ctx: Context, filters: VoteFilters) -> Publication:
    """Battles recorded and published under the page's ``filters`` (one snapshot), and when the next
    closed, unflagged battle waiting for the delay is published. "Recorded" ignores publication: open,
    flagged and waiting battles count too."""
    from db.export import count_battles, snapshot

    everything = dataclasses.replace(filters, include_open=True, exclude_flagged=False, closed_before=None)
    with snapshot(ctx.engine) as conn:
        recorded, published = count_battles(conn, everything), count_battles(conn, filters)
    delay = ctx.settings.public_export_delay_hours
    closed = db_actions.next_publication_close(ctx.engine, filters=filters)
    return Publication(recorded=recorded, published=published, delay_hours=delay,
                       next_at=None if closed is None else published_at(closed, delay))


_BUILD_LOCK = threading.Lock()  # one public export build at a time in this process
BUILDS = collections.Counter[str]()  # builds per format/view since start (the cache's misses)


def dataset_bytes(ctx: Context, filters: VoteFilters, *, fmt: str, view: str) -> bytes:
    """One public download, built once per filter set and kept for ``DOWNLOAD_TTL_S``.

    Every visitor clicking the same download shares one build (the export runs on the models' CPU
    cores); builds of different filter sets queue on one lock instead of running side by side.
    """
    salt = ctx.settings.hash_salt.get_secret_value()
    url = ctx.settings.resolved_database_url
    return _cached_export(url, filters, fmt, view, _engine=ctx.engine, _salt=salt)


DOWNLOAD_TTL_S = 600


@st.cache_data(ttl=DOWNLOAD_TTL_S, max_entries=32, show_spinner="Preparing the download…")
def _cached_export(
    url: str, filters: VoteFilters, fmt: str, view: str, *, _engine: Any, _salt: str
) -> bytes:
    from db.export import export_bytes

    with _BUILD_LOCK:
        started = time.perf_counter()
        data = export_bytes(_engine, fmt=fmt, view=view, salt=_salt, filters=filters).data
        BUILDS[f"{fmt}/{view}"] += 1
        _LOG.info("public export %s/%s built in %.2f s (%d bytes)", fmt, view, time.perf_counter() - started,
                  len(data))
    return data


def dataset_card(filters: VoteFilters) -> str:
    """The export's dataset card (schema, privacy, licence) as Markdown, for the page."""
    from db.export import card_body, describe_filters, render_card

    card = render_card(fmt="jsonl", view="dialogues", files={}, counts={}, filters=describe_filters(filters))
    return card_body(card)
