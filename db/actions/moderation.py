"""Moderation: flag and unflag battles, the append-only moderation log, the admin's list of battles, and
when the next closed battle becomes public (:func:`next_publication_close`).

Enabling or disabling a contestant (``db.actions.people.set_contestant_enabled``) is logged here too.

Moderation never deletes: a flagged battle keeps every row, its vote only leaves the leaderboard.
Every flag and unflag is one :class:`~db.models.ModerationEvent` row (time, reason, admin session,
the status before), written in the same transaction as the status change; nothing updates or
deletes those rows.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from sqlalchemy import Engine, exists, func, select, update

from db.actions.battles import lock_battle
from db.actions.reading import battle_view
from db.checks import require_int, require_text, retry_read
from db.engine import read_session, write_session
from db.errors import InvalidInput
from db.export.filters import conditions
from db.models import Battle, Contestant, Conversation, Message, ModerationEvent, SideStats, Vote, utcnow
from db.views import BattleSummaryView, BattleView, ModerationEventView
from db.vote_filters import VoteFilters

__all__ = ["flag_battle", "moderation_log", "next_publication_close", "recent_battles", "unflag_battle"]


def flag_battle(engine: Engine, *, battle_id: str, reason: str, admin_session: str = "") -> BattleView:
    """Moderation: take a battle (and its vote) out of the leaderboard. Nothing is deleted.

    The flag, its reason, the admin's session and the battle's status before it go into the append-only
    moderation log (:func:`unflag_battle` restores that status). A flagged battle is refused: its first
    reason is kept, not overwritten.
    """
    require_text(reason, what="reason", max_chars=2_000)
    require_text(admin_session, what="admin session", max_chars=64, allow_empty=True)
    with write_session(engine) as session:
        battle = lock_battle(session, battle_id)
        if battle.status == "flagged":
            raise InvalidInput(f"battle {battle_id} is already flagged")
        now = utcnow()
        session.add(
            ModerationEvent(
                battle_id=battle.id, action="flag", reason=reason, admin_session=admin_session,
                prior_status=battle.status, created_at=now,
            )
        )
        battle.status = "flagged"
        battle.flag_reason = reason
        battle.updated_at = now
        session.execute(update(Vote).where(Vote.battle_id == battle_id).values(flagged=True))
        session.execute(update(SideStats).where(SideStats.battle_id == battle_id).values(flagged=True))
        session.flush()
        return battle_view(session, battle)


def unflag_battle(
    engine: Engine, *, battle_id: str, reason: str = "", admin_session: str = ""
) -> BattleView:
    """Undo a flag: the battle gets back the status it had when flagged (an open battle reopens)."""
    require_text(reason, what="reason", max_chars=2_000, allow_empty=True)
    require_text(admin_session, what="admin session", max_chars=64, allow_empty=True)
    with write_session(engine) as session:
        battle = lock_battle(session, battle_id)
        if battle.status != "flagged":
            raise InvalidInput(f"battle {battle_id} is not flagged")
        flagged_from = session.scalar(
            select(ModerationEvent.prior_status)
            .where(ModerationEvent.battle_id == battle_id, ModerationEvent.action == "flag")
            .order_by(ModerationEvent.id.desc())
            .limit(1)
        )
        if flagged_from is None:  # flagged before the log existed: the old rule
            has_vote = session.scalar(select(exists().where(Vote.battle_id == battle_id)))
            flagged_from = "voted" if has_vote else "abandoned"
        now = utcnow()
        session.add(
            ModerationEvent(
                battle_id=battle.id, action="unflag", reason=reason, admin_session=admin_session,
                prior_status="flagged", created_at=now,
            )
        )
        battle.status = flagged_from
        battle.flag_reason = None
        battle.updated_at = now
        session.execute(update(Vote).where(Vote.battle_id == battle_id).values(flagged=False))
        session.execute(update(SideStats).where(SideStats.battle_id == battle_id).values(flagged=False))
        session.flush()
        return battle_view(session, battle)


@retry_read
def moderation_log(engine: Engine, *, limit: int = 100) -> list[ModerationEventView]:
    """The newest moderation events first."""
    require_int(limit, what="limit", minimum=1)
    with read_session(engine) as session:
        rows = session.execute(
            select(ModerationEvent, Contestant.slug)
            .outerjoin(Contestant, Contestant.id == ModerationEvent.contestant_id)
            .order_by(ModerationEvent.id.desc()).limit(limit)
        ).all()
        return [
            ModerationEventView(
                id=r.id, battle_id=r.battle_id, action=r.action, reason=r.reason,
                admin_session=r.admin_session, prior_status=r.prior_status, created_at=r.created_at,
                contestant=slug,
            )
            for r, slug in rows
        ]


@retry_read
def recent_battles(engine: Engine, *, limit: int = 20) -> list[BattleSummaryView]:
    """The newest battles with their contestants and first request, for the admin to flag by click."""
    require_int(limit, what="limit", minimum=1)
    with read_session(engine) as session:
        battles = list(session.scalars(select(Battle).order_by(Battle.created_at.desc()).limit(limit)))
        ids = [b.id for b in battles]
        sides: dict[str, dict[str, str]] = {i: {} for i in ids}
        for battle_id, side, slug in session.execute(
            select(Conversation.battle_id, Conversation.side, Contestant.slug)
            .join(Contestant, Contestant.id == Conversation.contestant_id)
            .where(Conversation.battle_id.in_(ids))
        ):
            sides[battle_id][side] = slug
        first = (
            select(Conversation.battle_id, func.min(Message.id).label("first_id"))
            .join(Message, Message.conversation_id == Conversation.id)
            .where(Conversation.battle_id.in_(ids), Message.role == "user")
            .group_by(Conversation.battle_id)
            .subquery()
        )
        texts: dict[str, str] = {
            battle_id: text
            for battle_id, text in session.execute(
                select(first.c.battle_id, Message.content).join(Message, Message.id == first.c.first_id)
            )
        }
        counts: dict[str, int] = {
            battle_id: int(count)
            for battle_id, count in session.execute(
                select(Conversation.battle_id, func.count(Message.id))
                .join(Message, Message.conversation_id == Conversation.id)
                .where(Conversation.battle_id.in_(ids))
                .group_by(Conversation.battle_id)
            )
        }
        return [
            BattleSummaryView(
                id=b.id, mode=b.mode, scenario=b.scenario, status=b.status, created_at=b.created_at,
                contestant_a=sides[b.id].get("a", ""), contestant_b=sides[b.id].get("b"),
                first_request=texts.get(b.id, ""), messages=counts.get(b.id, 0),
                flag_reason=b.flag_reason,
            )
            for b in battles
        ]


@retry_read
def next_publication_close(engine: Engine, *, filters: VoteFilters) -> dt.datetime | None:
    """When the first battle still held back by the publication delay closed: of the battles an export
    with ``filters`` would hold without ``closed_before`` (closed, and unflagged if ``exclude_flagged``),
    the earliest that closed at or after ``filters.closed_before``. None when nothing waits (or there is
    no delay). The closing time is the export's own (``closed_at``, else ``updated_at`` for old rows)."""
    if filters.closed_before is None:
        return None
    waiting = dataclasses.replace(filters, closed_before=None, include_open=False)
    closed = func.coalesce(Battle.closed_at, Battle.updated_at)
    query = select(func.min(closed)).where(*conditions(waiting), closed >= filters.closed_before)
    with read_session(engine) as session:
        return session.scalar(query)
