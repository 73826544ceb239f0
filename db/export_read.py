"""Reading the database for the export: filters, keyset pages of battles and everything hanging off them.

The export never loads the whole database. Battles are read in pages ordered by ``(created_at, id)``
and continued with a keyset condition (``> last key``), not ``OFFSET``, so each page costs the same
however deep into the data it is. For a page, conversations, messages, corrections and votes are read
with ``battle_id IN (page ids)``: each such query hits an index (``uq_conversations_battle_side``,
``uq_messages_conversation_position``, ``ix_corrections_battle_id``, ``uq_votes_battle_id``).

All pages are read inside one read transaction (``REPEATABLE READ`` on PostgreSQL; on SQLite a WAL
read transaction is a snapshot), so an export taken while visitors keep voting is consistent: no
battle appears without its vote because the vote landed between two pages.

Visitors are exported only as stable salted hashes of their anonymous id; network addresses (and their
hashes) are never selected at all.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import Connection, Engine, Select, and_, exists, func, or_, select

from db.errors import DBError
from db.models import Battle, Contestant, Conversation, Correction, Message, Visitor, Vote

DEFAULT_CHUNK_SIZE = 500  # battles per page: ~10k messages for typical battles, a few MB of Python rows


class ExportError(DBError, ValueError):
    """Bad export input (format, view, dates, salt, output path). The CLI turns it into exit 2."""


@dataclass(frozen=True, slots=True)
class ExportFilters:
    """Which battles to export. ``since`` is inclusive, ``until`` exclusive; both timezone-aware UTC.

    ``corrections_only`` keeps battles in which at least one correction was sent (either side).
    """

    scenario: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    corrections_only: bool = False

    def __post_init__(self) -> None:
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                raise ExportError(f"{name} is a naive datetime: pass a timezone-aware (UTC) one")
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ExportError("since must be before until")
        if self.scenario is not None and not self.scenario.strip():
            raise ExportError("scenario is empty")

    def describe(self) -> dict[str, Any]:
        """The filters as plain JSON-able values (for the dataset card)."""
        return {
            "scenario": self.scenario,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "corrections_only": self.corrections_only,
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


class BattleRow(NamedTuple):
    id: str
    created_at: dt.datetime
    updated_at: dt.datetime
    closed_at: dt.datetime | None
    mode: str
    scenario: str
    status: str
    revealed_before_vote: bool
    revealed_at: dt.datetime | None
    visitor: str | None  # salted hash


class VoteRow(NamedTuple):
    battle_id: str
    choice: str
    created_at: dt.datetime
    visitor: str | None  # salted hash
    revealed: bool
    flagged: bool
    with_corrections: bool


@dataclass(frozen=True, slots=True)
class Chunk:
    """One page of battles and all rows that belong to them, as SQLAlchemy rows (named tuples).

    ``conversations`` are ordered by (battle, side), ``messages`` by (conversation, position),
    ``corrections`` by id. Visitor columns already hold salted hashes.
    """

    battles: Sequence[BattleRow]
    conversations: Sequence[Any]
    messages: Sequence[Any]
    corrections: Sequence[Any]
    votes: Sequence[VoteRow]


def _battle_query(filters: ExportFilters) -> Select[Any]:
    query = select(
        Battle.id,
        Battle.created_at,
        Battle.updated_at,
        Battle.closed_at,
        Battle.mode,
        Battle.scenario,
        Battle.status,
        Battle.revealed_before_vote,
        Battle.revealed_at,
        Visitor.anon_id.label("visitor"),
    ).outerjoin(Visitor, Visitor.id == Battle.visitor_id)
    return query.where(*_conditions(filters))  # type: ignore[return-value]


def _conditions(filters: ExportFilters) -> list[Any]:
    conditions: list[Any] = []
    if filters.scenario is not None:
        conditions.append(Battle.scenario == filters.scenario)
    if filters.since is not None:
        conditions.append(Battle.created_at >= filters.since)
    if filters.until is not None:
        conditions.append(Battle.created_at < filters.until)
    if filters.corrections_only:
        conditions.append(exists().where(Correction.battle_id == Battle.id))
    return conditions


def count_battles(conn: Connection, filters: ExportFilters) -> int:
    """How many battles the filters select (for the progress bar and the dataset card)."""
    query = select(func.count()).select_from(Battle).where(*_conditions(filters))
    return int(conn.scalar(query) or 0)


def _related(conn: Connection, battle_ids: list[str], salt: str) -> Chunk:
    conversations = conn.execute(
        select(
            Conversation.id,
            Conversation.battle_id,
            Conversation.side,
            Contestant.slug.label("contestant"),
            Contestant.display_name.label("contestant_name"),
            Contestant.family,
            Conversation.system_prompt,
            Conversation.params,
        )
        .join(Contestant, Contestant.id == Conversation.contestant_id)
        .where(Conversation.battle_id.in_(battle_ids))
        .order_by(Conversation.battle_id, Conversation.side)
    ).all()
    messages = conn.execute(
        select(
            Message.id,
            Message.conversation_id,
            Message.position,
            Message.role,
            Message.kind,
            Message.content,
            Message.created_at,
            Message.first_try,
            Message.superseded,
            Message.ttft_ms,
            Message.total_ms,
            Message.prompt_tokens,
            Message.completion_tokens,
            Message.finish_reason,
            Message.error,
            Message.grader_label,
            Message.grader_mistakes,
        )
        .join(Conversation, Conversation.id == Message.conversation_id)
        .where(Conversation.battle_id.in_(battle_ids))
        .order_by(Message.conversation_id, Message.position)
    ).all()
    corrections = conn.execute(
        select(
            Correction.id,
            Correction.battle_id,
            Correction.conversation_id,
            Correction.faulty_message_id,
            Correction.feedback_message_id,
            Correction.next_reply_message_id,
            Correction.outcome,
            Correction.judged_by,
            Correction.created_at,
            Correction.judged_at,
        )
        .where(Correction.battle_id.in_(battle_ids))
        .order_by(Correction.id)
    ).all()
    vote_rows = conn.execute(
        select(
            Vote.battle_id,
            Vote.choice,
            Vote.created_at,
            Visitor.anon_id.label("visitor"),
            Vote.revealed,
            Vote.flagged,
            Vote.with_corrections,
        )
        .outerjoin(Visitor, Visitor.id == Vote.visitor_id)
        .where(Vote.battle_id.in_(battle_ids))
    ).all()
    votes = [VoteRow(*row[:3], visitor_hash(row[3], salt=salt), *row[4:]) for row in vote_rows]
    return Chunk(battles=(), conversations=conversations, messages=messages, corrections=corrections,
                 votes=votes)


def iter_chunks(
    conn: Connection, *, filters: ExportFilters, salt: str, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> Iterator[Chunk]:
    """Pages of at most ``chunk_size`` battles, oldest first, each with all its rows.

    ``conn`` should be inside one read transaction (see :func:`snapshot`) so pages are consistent.
    """
    if not salt:
        raise ExportError("hash salt is empty: visitor ids are exported only as salted hashes")
    if chunk_size < 1:
        raise ExportError("chunk size must be >= 1")
    base = _battle_query(filters).order_by(Battle.created_at, Battle.id).limit(chunk_size)
    last: tuple[dt.datetime, str] | None = None
    while True:
        query = base
        if last is not None:
            query = query.where(
                or_(Battle.created_at > last[0], and_(Battle.created_at == last[0], Battle.id > last[1]))
            )
        rows = conn.execute(query).all()
        if not rows:
            return
        battles = [BattleRow(*row[:-1], visitor_hash(row[-1], salt=salt)) for row in rows]
        related = _related(conn, [row.id for row in rows], salt)
        yield Chunk(battles=battles, conversations=related.conversations, messages=related.messages,
                    corrections=related.corrections, votes=related.votes)
        if len(rows) < chunk_size:
            return
        last = (rows[-1].created_at, rows[-1].id)


def snapshot(engine: Engine) -> Connection:
    """A connection for one consistent read of many pages (close it, or use it as a context manager)."""
    conn = engine.connect()
    if engine.dialect.name == "postgresql":
        conn = conn.execution_options(isolation_level="REPEATABLE READ")
    conn.begin()
    return conn
