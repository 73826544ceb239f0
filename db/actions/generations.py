"""The generation ledger: every reply a visitor asks for is a row BEFORE it streams, and limits count rows.

Counting stored replies let an interrupted generation escape every limit (a click, a reload or a closed
tab cancels the stream before anything is stored). Here a turn first calls :func:`start_generations`,
which checks the limits and writes one row per side in ONE write transaction, and only then streams;
:func:`finish_generations` marks the rows done however the stream ended. So:

- the per-minute limits (per visitor, per address hash) count generations from their start;
- one turn in flight per visitor, and at most ``in_flight_per_address`` generations in flight per address
  hash, hold across every server process that shares the database;
- a row holds its slot until finished or until ``lease_until`` passes, so a crashed process frees it.

Concurrent starts are decided one after the other: SQLite's write transaction is exclusive, and on
PostgreSQL the transaction takes advisory locks on the visitor and the address (in a fixed order, so two
starts cannot deadlock) before it counts.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import ColumnElement, Engine, func, select, text, update
from sqlalchemy.orm import Session

from db.checks import require_aware, require_battle_id, require_choice, require_int, require_text, retry_read
from db.engine import read_session, write_session
from db.errors import DBError, InvalidInput
from db.models import SIDES, Generation, utcnow

__all__ = [
    "GenerationLimits",
    "GenerationRefused",
    "count_generations_since",
    "count_side_generations",
    "finish_generations",
    "generations_in_flight",
    "start_generations",
]

Refusal = Literal["busy", "rate_visitor", "rate_address", "in_flight_address"]


class GenerationRefused(DBError):
    """A turn's generations refused before anything was written; ``reason`` is machine-readable and
    ``count`` is the figure that hit its limit (the visitor's or the address's)."""

    def __init__(self, reason: Refusal, count: int) -> None:
        super().__init__(f"generation refused: {reason} ({count})")
        self.reason: Refusal = reason
        self.count = count


@dataclass(frozen=True)
class GenerationLimits:
    """The limits one start is checked against (the web app builds it from its settings)."""

    per_minute_visitor: int
    per_minute_address: int
    in_flight_address: int
    lease: dt.timedelta

    def __post_init__(self) -> None:
        for name in ("per_minute_visitor", "per_minute_address", "in_flight_address"):
            require_int(getattr(self, name), what=name, minimum=1)
        if self.lease <= dt.timedelta(0):
            raise InvalidInput("lease must be positive")


def _in_flight(now: dt.datetime) -> ColumnElement[bool]:
    return (Generation.finished_at.is_(None)) & (Generation.lease_until > now)


def _lock_key(name: str) -> int:
    """A signed 64-bit advisory-lock key for ``name`` (stable across processes, unlike ``hash``)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)


def _take_turns(session: Session, visitor_id: int, address_hash: str) -> None:
    """Serialise starts of one visitor and of one address (PostgreSQL; SQLite's writer is exclusive)."""
    if session.get_bind().dialect.name != "postgresql":
        return
    keys = {_lock_key(f"generation-visitor:{visitor_id}"), _lock_key(f"generation-address:{address_hash}")}
    for key in sorted(keys):
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})


def _count(session: Session, *conditions: ColumnElement[bool]) -> int:
    return int(session.scalar(select(func.count()).select_from(Generation).where(*conditions)) or 0)


def start_generations(
    engine: Engine,
    *,
    visitor_id: int,
    address_hash: str,
    battle_id: str,
    sides: Sequence[str],
    limits: GenerationLimits,
) -> tuple[int, ...]:
    """Check the limits and record one generation per side, committed before it returns; the row ids.

    Refused (:class:`GenerationRefused`, nothing written) when the visitor already has a generation in
    flight (``busy``), or when the last minute's generations plus these would pass the visitor's or the
    address's per-minute limit, or the address's in-flight cap.
    """
    require_int(visitor_id, what="visitor id")
    require_text(address_hash, what="address hash", max_chars=128)
    require_battle_id(battle_id)
    if not sides or len(set(sides)) != len(sides):
        raise InvalidInput("sides must be distinct and not empty")
    for side in sides:
        require_choice(side, SIDES, what="side")
    planned = len(sides)
    with write_session(engine) as session:
        _take_turns(session, visitor_id, address_hash)
        now = utcnow()
        minute_ago = now - dt.timedelta(minutes=1)
        mine = Generation.visitor_id == visitor_id
        network = Generation.address_hash == address_hash
        busy = _count(session, mine, _in_flight(now))
        if busy:
            raise GenerationRefused("busy", busy)
        recent = _count(session, mine, Generation.started_at >= minute_ago)
        if recent + planned > limits.per_minute_visitor:
            raise GenerationRefused("rate_visitor", recent)
        recent = _count(session, network, Generation.started_at >= minute_ago)
        if recent + planned > limits.per_minute_address:
            raise GenerationRefused("rate_address", recent)
        flying = _count(session, network, _in_flight(now))
        if flying + planned > limits.in_flight_address:
            raise GenerationRefused("in_flight_address", flying)
        rows = [
            Generation(visitor_id=visitor_id, address_hash=address_hash, battle_id=battle_id, side=side,
                       started_at=now, lease_until=now + limits.lease)
            for side in sides
        ]
        session.add_all(rows)
        session.flush()
        return tuple(row.id for row in rows)


def finish_generations(engine: Engine, *, ids: Sequence[int]) -> None:
    """Mark generations done (however they ended), freeing their in-flight slots. Idempotent."""
    for row_id in ids:
        require_int(row_id, what="generation id")
    if not ids:
        return
    with write_session(engine) as session:
        session.execute(
            update(Generation)
            .where(Generation.id.in_(list(ids)), Generation.finished_at.is_(None))
            .values(finished_at=utcnow())
            .execution_options(synchronize_session=False)
        )


def _whose(visitor_id: int | None, address_hash: str | None) -> ColumnElement[bool]:
    if (visitor_id is None) == (address_hash is None):
        raise InvalidInput("give exactly one of visitor_id and address_hash")
    if visitor_id is not None:
        require_int(visitor_id, what="visitor id")
        return Generation.visitor_id == visitor_id
    require_text(address_hash or "", what="address hash", max_chars=128)
    return Generation.address_hash == address_hash


@retry_read
def count_generations_since(
    engine: Engine, *, since: dt.datetime, visitor_id: int | None = None, address_hash: str | None = None
) -> int:
    """Generations started at or after ``since`` for the visitor, or from the address hash: every side,
    every retry, finished, failed or cut short."""
    require_aware(since, what="since")
    with read_session(engine) as session:
        return _count(session, _whose(visitor_id, address_hash), Generation.started_at >= since)


@retry_read
def generations_in_flight(
    engine: Engine, *, visitor_id: int | None = None, address_hash: str | None = None
) -> int:
    """Generations of the visitor, or of the address hash, neither finished nor past their lease."""
    with read_session(engine) as session:
        return _count(session, _whose(visitor_id, address_hash), _in_flight(utcnow()))


@retry_read
def count_side_generations(engine: Engine, *, battle_id: str, side: str) -> int:
    """Generations ever started for one side of a battle (stored, failed or cut short): what the
    per-side retry cap counts, so a retry interrupted before its reply was stored still counts."""
    require_battle_id(battle_id)
    require_choice(side, SIDES, what="side")
    with read_session(engine) as session:
        return _count(session, Generation.battle_id == battle_id, Generation.side == side)
