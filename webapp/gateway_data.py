"""The admin and dataset pages' door to ``db`` (moderation, live figures, exports).

Export modules are imported when used, so a page that never exports does not load them.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from db import errors as db_errors
from db import repository as db_repo
from webapp import resources
from webapp.gateway import Context

if TYPE_CHECKING:
    from db.export import ExportFilters


# --- admin --------------------------------------------------------------------------------------------


def all_contestants(ctx: Context) -> list[Any]:
    resources.ensure_contestants(ctx)
    return list(db_repo.list_contestants(ctx.engine))


def set_enabled(ctx: Context, *, slug: str, enabled: bool) -> None:
    db_repo.set_contestant_enabled(ctx.engine, slug=slug, enabled=enabled)


def flag(ctx: Context, *, battle_id: str, reason: str, undo: bool) -> str:
    """Flag (or unflag) a battle; returns a sentence for the admin."""
    try:
        if undo:
            view = db_repo.unflag_battle(ctx.engine, battle_id=battle_id)
            return f"Battle {view.id} unflagged (now {view.status})."
        view = db_repo.flag_battle(ctx.engine, battle_id=battle_id, reason=reason)
    except db_errors.DBError as exc:
        return f"Refused: {exc}"
    return f"Battle {view.id} flagged: its vote no longer counts."


def admin_figures(ctx: Context, *, since: dt.datetime) -> tuple[list[Any], list[Any]]:
    return (
        db_repo.admin_battles_per_hour(ctx.engine, since=since),
        db_repo.admin_latency(ctx.engine, since=since),
    )


def table_counts(ctx: Context) -> dict[str, int]:
    return dict(db_repo.table_counts(ctx.engine))


# --- dataset ------------------------------------------------------------------------------------------


def dataset_filters(**values: Any) -> ExportFilters:
    from db.export import ExportFilters

    return ExportFilters(**values)


def dataset_count(ctx: Context, filters: ExportFilters) -> int:
    from db.export_read import count_battles, snapshot

    with snapshot(ctx.engine) as conn:
        return count_battles(conn, filters)


def dataset_bytes(ctx: Context, filters: ExportFilters, *, fmt: str, view: str) -> bytes:
    """One export in memory (called lazily when the download button is clicked)."""
    from db.export import export_bytes

    salt = ctx.settings.hash_salt.get_secret_value()
    return export_bytes(ctx.engine, fmt=fmt, view=view, salt=salt, filters=filters).data


def dataset_card(filters: ExportFilters) -> str:
    """The export's dataset card (schema, privacy, licence) as Markdown, for the page."""
    from db.export_card import render_card

    text = render_card(fmt="jsonl", view="battles", files={}, counts={}, filters=filters.describe())
    return text.split("\n", 1)[1]  # drop the HTML comment marker line
