"""The rate limits' reads: battles, votes and messages of one visitor, or of one address, since a moment.

The web app's flows check these before an action (battles per hour, the daily vote cap, messages per
minute); each is one ``COUNT`` over an index. The generation counts (every reply from its start) are the
ledger's own, in :mod:`db.actions.generations`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Engine, func, select

from db.checks import require_aware, require_int, require_text, retry_read
from db.engine import read_session
from db.errors import InvalidInput
from db.models import Battle, Conversation, Message, Visitor, Vote

__all__ = ["count_battles_since", "count_messages_since", "count_votes_since"]


def _whose(
    visitor_id: int | None, address_hash: str | None, column: Any = Battle.visitor_id
) -> ColumnElement[bool]:
    """Rows (battles unless ``column`` says otherwise) of one visitor, or of every visitor seen from one
    address hash (exactly one given)."""
    if (visitor_id is None) == (address_hash is None):
        raise InvalidInput("give exactly one of visitor_id and address_hash")
    if visitor_id is not None:
        require_int(visitor_id, what="visitor id")
        return column == visitor_id
    require_text(address_hash or "", what="address hash", max_chars=128)
    same_address = select(Visitor.id).where(Visitor.address_hash == address_hash)
    return column.in_(same_address)


def _count_since(
    engine: Engine, table: Any, *, since: dt.datetime, visitor_id: int | None, address_hash: str | None
) -> int:
    """Rows of ``table`` (battles or votes) created at or after ``since`` by the visitor or the address."""
    require_aware(since, what="since")
    whose = _whose(visitor_id, address_hash, table.visitor_id)
    with read_session(engine) as session:
        return int(session.scalar(select(func.count()).where(whose, table.created_at >= since)) or 0)


@retry_read
def count_battles_since(
    engine: Engine, *, since: dt.datetime, visitor_id: int | None = None, address_hash: str | None = None
) -> int:
    """Battles opened at or after ``since`` by the visitor, or from the address (battles-per-hour limit)."""
    return _count_since(engine, Battle, since=since, visitor_id=visitor_id, address_hash=address_hash)


@retry_read
def count_votes_since(
    engine: Engine, *, since: dt.datetime, visitor_id: int | None = None, address_hash: str | None = None
) -> int:
    """Votes cast at or after ``since`` by the visitor, or from the address (the daily vote cap)."""
    return _count_since(engine, Vote, since=since, visitor_id=visitor_id, address_hash=address_hash)


def _count_messages(
    engine: Engine, *, kinds: Sequence[str], whose: ColumnElement[bool], since: dt.datetime
) -> int:
    require_aware(since, what="since")
    query = (
        select(func.count())
        .select_from(Message)
        .join(Conversation, Conversation.id == Message.conversation_id)
        .join(Battle, Battle.id == Conversation.battle_id)
        .where(whose, Message.kind.in_(list(kinds)), Message.created_at >= since)
    )
    with read_session(engine) as session:
        return int(session.scalar(query) or 0)


@retry_read
def count_messages_since(engine: Engine, *, visitor_id: int, since: dt.datetime) -> int:
    """Messages the visitor wrote (requests and corrections) at or after ``since``.

    A turn sent to both sides is two messages (one per side): callers set limits accordingly.
    """
    whose = _whose(visitor_id, None)
    return _count_messages(engine, kinds=("request", "correction"), whose=whose, since=since)
