"""What an export selects: the filter value (:class:`db.VoteFilters`), dates, modes, visitor hashing and
the SQL conditions they make.

Shared by the readers (:mod:`db.export.read` for the dialogues, :mod:`db.export.pairwise` for the
battles view) and by the command line, which parses dates and modes into a :class:`~db.VoteFilters`.
An export reads these fields of the value: ``scenario``, ``modes``, ``since`` (inclusive) and ``until``
(exclusive) on the battle's start, ``corrections_only`` (battles with at least one correction, either
side), ``include_open`` (open battles are left out unless set: a live anonymous battle's contestants
would be public before its visitor voted), ``closed_before`` (the public page's delay: battles closed at
or after it are left out, through :meth:`~db.VoteFilters.published`) and ``exclude_flagged`` (flagged
battles, ``status = flagged``: the operator's export, ``python -m db export``, keeps them, marked, unless
``--exclude-flagged``; the public Dataset page always leaves them out,
``webapp.gateway_data.public_filters``). The battles view counts only counted votes whatever
``exclude_revealed`` says.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
from typing import Any

from sqlalchemy import and_, exists, func

from db.errors import DBError
from db.models import MODES, Battle, Correction
from db.vote_filters import VoteFilters

EXPORT_DEFAULTS = VoteFilters(modes=None, exclude_flagged=False)
"""An export's filters when none are given (``python -m db export`` without a filter flag): every closed
battle of every mode, flagged ones kept."""


class ExportError(DBError, ValueError):
    """Bad export input (format, view, dates, salt, output path). The CLI turns it into exit 2."""


def check(filters: VoteFilters) -> VoteFilters:
    """What an export refuses beyond the value's own checks: an empty window, a blank scenario, no mode."""
    if filters.since is not None and filters.until is not None and filters.since >= filters.until:
        raise ExportError("since must be before until")
    if filters.scenario is not None and not filters.scenario.strip():
        raise ExportError("scenario is empty")
    if filters.modes is not None:
        check_modes(tuple(filters.modes))
    return filters


def check_modes(modes: tuple[str, ...]) -> tuple[str, ...]:
    """``modes`` if every one is a battle mode (and there is one), else :class:`ExportError`."""
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise ExportError(f"unknown mode(s) {', '.join(unknown) or '(none)'}: use {','.join(MODES)}")
    return modes


def describe_filters(filters: VoteFilters) -> dict[str, Any]:
    """The filters an export read, as plain JSON-able values (for the dataset card)."""
    return {
        "scenario": filters.scenario,
        "since": filters.since.isoformat() if filters.since else None,
        "until": filters.until.isoformat() if filters.until else None,
        "corrections_only": filters.corrections_only,
        "include_open": filters.include_open,
        "closed_before": filters.closed_before.isoformat() if filters.closed_before else None,
        "modes": list(filters.modes) if filters.modes is not None else None,
        "include_flagged": not filters.exclude_flagged,
    }


def parse_date(text: str, *, end: bool = False) -> dt.datetime:
    """``YYYY-MM-DD`` or an ISO 8601 datetime, as aware UTC (naive values are taken as UTC).

    A bare date used as an upper bound (``end=True``) means the end of that day, so ``--until
    2026-11-30`` includes the 30th: that is what a person typing a date means.
    """
    try:
        if len(text.strip()) == 10:
            day = dt.date.fromisoformat(text.strip())
            start = dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)
            return start + dt.timedelta(days=1) if end else start
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise ExportError(f"bad date {text!r}: use YYYY-MM-DD or an ISO 8601 datetime") from exc
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def visitor_hash(anon_id: str | None, *, salt: str) -> str | None:
    """A stable salted hash of a visitor's anonymous id (HMAC-SHA256, 32 hex chars); None stays None.

    The ``visitor:`` domain prefix keeps these hashes unrelated to the address hashes the app stores
    with the same salt, so an exported hash can never be matched against an address hash.
    """
    if anon_id is None:
        return None
    digest = hmac.new(salt.encode(), b"visitor:" + anon_id.encode(), hashlib.sha256)
    return digest.hexdigest()[:32]



def conditions(filters: VoteFilters) -> list[Any]:
    """The battles an export with ``filters`` holds, as conditions on ``battles`` (refused as
    :func:`check` says)."""
    check(filters)
    conditions: list[Any] = []
    if filters.scenario is not None:
        conditions.append(Battle.scenario == filters.scenario)
    if filters.modes is not None:
        conditions.append(Battle.mode.in_(list(filters.modes)))
    if filters.since is not None:
        conditions.append(Battle.created_at >= filters.since)
    if filters.until is not None:
        conditions.append(Battle.created_at < filters.until)
    if filters.corrections_only:
        conditions.append(exists().where(Correction.battle_id == Battle.id))
    if not filters.include_open:
        conditions.append(Battle.status != "open")
    if filters.exclude_flagged:  # db.actions.moderation sets the status and the vote's flag together
        conditions.append(Battle.status != "flagged")
    if filters.closed_before is not None:
        # closed_at is set by every close (vote, skip, expiry); updated_at covers rows from before that.
        closed = func.coalesce(Battle.closed_at, Battle.updated_at)
        conditions.append(and_(Battle.status != "open", filters.published(closed)))
    return conditions
