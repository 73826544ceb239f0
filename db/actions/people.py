"""Contestants and visitors: who plays and who visits.

Conventions (every module of :mod:`db.actions`): the first argument is the :class:`~sqlalchemy.Engine`,
everything else is keyword-only; each visitor action is ONE transaction, committed (durable) before the
function returns; refusals raise a typed error from :mod:`db.errors` and leave nothing half-written;
results are frozen views (:mod:`db.views`), never ORM objects.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError

from db.checks import contestant_by_slug, contestant_view, require_text, retry_read
from db.engine import read_session, write_session
from db.errors import InvalidInput
from db.models import Contestant, ModerationEvent, Visitor, utcnow
from db.views import ContestantView, VisitorView

__all__ = [
    "get_contestant",
    "get_or_create_visitor",
    "hash_address",
    "list_contestants",
    "set_contestant_enabled",
    "upsert_contestant",
]


# --- contestants -------------------------------------------------------------------------------------


def upsert_contestant(
    engine: Engine,
    *,
    slug: str,
    display_name: str,
    family: str = "",
    source: str = "",
    params: dict[str, Any] | None = None,
    enabled: bool | None = None,
) -> ContestantView:
    """Create a contestant or update its descriptive fields (``enabled`` kept unless given).

    App servers started together on a fresh database register the same catalogue at once: the loser of
    the unique-slug race updates the winner's row instead.
    """
    require_text(slug, what="slug", max_chars=100)
    require_text(display_name, what="display name", max_chars=200)
    require_text(family, what="family", max_chars=100, allow_empty=True)
    require_text(source, what="source", max_chars=500, allow_empty=True)
    fields = {"display_name": display_name, "family": family, "source": source, "params": dict(params or {})}
    for _attempt in range(2):
        try:
            return _upsert_contestant(engine, slug=slug, enabled=enabled, fields=fields)
        except IntegrityError:
            continue
    raise InvalidInput(f"could not register contestant {slug!r}")  # pragma: no cover - needs a third racer


def _upsert_contestant(
    engine: Engine, *, slug: str, enabled: bool | None, fields: dict[str, Any]
) -> ContestantView:
    with write_session(engine) as session:
        row = session.scalar(select(Contestant).where(Contestant.slug == slug))
        if row is None:
            row = Contestant(slug=slug, enabled=True if enabled is None else enabled)
            session.add(row)
        elif enabled is not None:
            row.enabled = enabled
        for name, value in fields.items():
            setattr(row, name, value)
        row.updated_at = utcnow()
        session.flush()
        return contestant_view(row)


@retry_read
def list_contestants(engine: Engine, *, enabled_only: bool = False) -> list[ContestantView]:
    """All contestants ordered by slug (the same order the count arrays use)."""
    with read_session(engine) as session:
        query = select(Contestant).order_by(Contestant.slug)
        if enabled_only:
            query = query.where(Contestant.enabled.is_(True))
        return [contestant_view(row) for row in session.scalars(query)]


@retry_read
def get_contestant(engine: Engine, *, slug: str) -> ContestantView:
    with read_session(engine) as session:
        return contestant_view(contestant_by_slug(session, slug))


def set_contestant_enabled(
    engine: Engine, *, slug: str, enabled: bool, reason: str = "", admin_session: str = ""
) -> ContestantView:
    """Enable or disable a contestant (disabled ones keep their history and leave the pair sampler).

    A change is an admin action: it is appended to the moderation log (action ``enable``/``disable``,
    the reason and the admin's session) in the same transaction. Setting the state it already has
    writes nothing."""
    require_text(reason, what="reason", max_chars=2_000, allow_empty=True)
    require_text(admin_session, what="admin session", max_chars=64, allow_empty=True)
    with write_session(engine) as session:
        row = contestant_by_slug(session, slug)
        if row.enabled != enabled:
            now = utcnow()
            row.enabled = enabled
            row.updated_at = now
            session.add(ModerationEvent(
                contestant_id=row.id, action="enable" if enabled else "disable", reason=reason,
                admin_session=admin_session, prior_status=None, created_at=now,
            ))
            session.flush()
        return contestant_view(row)


# --- visitors ----------------------------------------------------------------------------------------


def hash_address(address: str, *, salt: str) -> str:
    """A stable salted hash of a network address (HMAC-SHA256, hex). The policy of *when* lives outside."""
    if not salt:
        raise InvalidInput("salt is empty")
    require_text(address, what="address", max_chars=200)
    return hmac.new(salt.encode(), address.encode(), hashlib.sha256).hexdigest()


def _visitor_view(row: Visitor) -> VisitorView:
    return VisitorView(
        id=row.id, anon_id=row.anon_id, address_hash=row.address_hash, created_at=row.created_at
    )


def get_or_create_visitor(engine: Engine, *, anon_id: str, address_hash: str | None = None) -> VisitorView:
    """The visitor with this anonymous id, created on first sight; refreshes its last-seen time and hash.

    Two tabs of a new visitor may race here: the loser of the unique-key race simply reads the winner's row.
    """
    require_text(anon_id, what="anonymous id", max_chars=64)
    if address_hash is not None:
        require_text(address_hash, what="address hash", max_chars=128)
    for _attempt in range(2):
        try:
            with write_session(engine) as session:
                row = session.scalar(select(Visitor).where(Visitor.anon_id == anon_id))
                now = utcnow()
                if row is None:
                    row = Visitor(anon_id=anon_id, address_hash=address_hash)
                    row.created_at = row.last_seen_at = now
                    session.add(row)
                else:
                    row.last_seen_at = now
                    if address_hash is not None:
                        row.address_hash = address_hash
                session.flush()
                return _visitor_view(row)
        except IntegrityError:
            continue
    raise InvalidInput(f"could not create visitor {anon_id!r}")  # pragma: no cover - needs a third racer
