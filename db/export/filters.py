"""What an export selects: filters, dates, visitor hashing and the SQL conditions they make.

Shared by the readers (:mod:`db.export.read` for the dialogues, :mod:`db.export.pairwise` for the
battles view) and by the command line, which parses dates and modes into :class:`ExportFilters`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, exists, func

from db.errors import DBError
from db.models import MODES, Battle, Correction


class ExportError(DBError, ValueError):
    """Bad export input (format, view, dates, salt, output path). The CLI turns it into exit 2."""


@dataclass(frozen=True, slots=True)
class ExportFilters:
    """Which battles to export. ``since`` is inclusive, ``until`` exclusive; both timezone-aware UTC.

    ``corrections_only`` keeps battles in which at least one correction was sent (either side).
    Open battles are left out unless ``include_open``: a live anonymous battle's contestants would be
    public before its visitor voted. ``closed_before`` (the public page's delay) also leaves out battles
    closed at or after that time. Flagged battles (``status = flagged``) are kept unless
    ``include_flagged`` is False: the operator's export (``python -m db export``) keeps them, marked, and
    the public Dataset page leaves them out (``webapp.gateway_data.public_filters``).
    """

    scenario: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    corrections_only: bool = False
    include_open: bool = False
    closed_before: dt.datetime | None = None
    modes: tuple[str, ...] | None = None  # battle modes to keep (None: every mode)
    include_flagged: bool = True  # False: flagged battles are left out (every public download)

    def __post_init__(self) -> None:
        for name in ("since", "until", "closed_before"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                raise ExportError(f"{name} is a naive datetime: pass a timezone-aware (UTC) one")
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ExportError("since must be before until")
        if self.scenario is not None and not self.scenario.strip():
            raise ExportError("scenario is empty")
        if self.modes is not None:
            unknown = [m for m in self.modes if m not in MODES]
            if unknown or not self.modes:
                raise ExportError(f"unknown mode(s) {', '.join(unknown) or '(none)'}: use {','.join(MODES)}")

    def describe(self) -> dict[str, Any]:
        """The filters as plain JSON-able values (for the dataset card)."""
        return {
            "scenario": self.scenario,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "corrections_only": self.corrections_only,
            "include_open": self.include_open,
            "closed_before": self.closed_before.isoformat() if self.closed_before else None,
            "modes": list(self.modes) if self.modes is not None else None,
            "include_flagged": self.include_flagged,
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



def conditions(filters: ExportFilters) -> list[Any]:
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
    if not filters.include_flagged:  # db.moderation sets the status and the vote's flag together
        conditions.append(Battle.status != "flagged")
    if filters.closed_before is not None:
        # closed_at is set by every close (vote, skip, expiry); updated_at covers rows from before that.
        closed = func.coalesce(Battle.closed_at, Battle.updated_at)
        conditions.append(and_(Battle.status != "open", closed < filters.closed_before))
    return conditions
