"""Reading battles back as frozen views: for rendering, resuming after a reload, and the export."""

from __future__ import annotations

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from db.checks import contestant_view, require_battle_id, require_choice, require_int, retry_read
from db.engine import read_session
from db.errors import NotFound
from db.models import MODES, Battle, Contestant, Conversation, Correction, Message, Vote
from db.views import BattleView, ConversationView, CorrectionView, MessageView, VoteView

__all__ = ["battle_view", "correction_view", "get_battle", "message_view", "resume_open_battle"]


def message_view(row: Message, side: str) -> MessageView:
    return MessageView(
        id=row.id,
        conversation_id=row.conversation_id,
        side=side,
        position=row.position,
        role=row.role,
        kind=row.kind,
        content=row.content,
        created_at=row.created_at,
        first_try=row.first_try,
        superseded=row.superseded,
        ttft_ms=row.ttft_ms,
        total_ms=row.total_ms,
        prompt_tokens=row.prompt_tokens,
        completion_tokens=row.completion_tokens,
        finish_reason=row.finish_reason,
        error=row.error,
        grader_label=row.grader_label,
        grader_mistakes=tuple(row.grader_mistakes) if row.grader_mistakes is not None else None,
        grader_notes=tuple(row.grader_notes) if row.grader_notes is not None else None,
    )


def correction_view(row: Correction, side: str) -> CorrectionView:
    return CorrectionView(
        id=row.id,
        battle_id=row.battle_id,
        side=side,
        faulty_message_id=row.faulty_message_id,
        feedback_message_id=row.feedback_message_id,
        next_reply_message_id=row.next_reply_message_id,
        outcome=row.outcome,
        judged_by=row.judged_by,
        created_at=row.created_at,
        judged_at=row.judged_at,
    )


def vote_view(row: Vote) -> VoteView:
    return VoteView(
        id=row.id,
        battle_id=row.battle_id,
        choice=row.choice,
        visitor_id=row.visitor_id,
        created_at=row.created_at,
        revealed=row.revealed,
        flagged=row.flagged,
    )


def battle_view(session: Session, battle: Battle) -> BattleView:
    conversations = session.execute(
        select(Conversation, Contestant)
        .join(Contestant, Contestant.id == Conversation.contestant_id)
        .where(Conversation.battle_id == battle.id)
        .order_by(Conversation.side)
    ).all()
    side_of = {conv.id: conv.side for conv, _ in conversations}
    messages: dict[int, list[MessageView]] = {conv.id: [] for conv, _ in conversations}
    for msg in session.scalars(
        select(Message)
        .where(Message.conversation_id.in_(list(side_of)))
        .order_by(Message.conversation_id, Message.position)
    ):
        messages[msg.conversation_id].append(message_view(msg, side_of[msg.conversation_id]))
    corrections: dict[int, list[CorrectionView]] = {conv.id: [] for conv, _ in conversations}
    for corr in session.scalars(
        select(Correction).where(Correction.battle_id == battle.id).order_by(Correction.id)
    ):
        corrections[corr.conversation_id].append(correction_view(corr, side_of[corr.conversation_id]))
    vote = session.scalar(select(Vote).where(Vote.battle_id == battle.id))
    sides = {
        conv.side: ConversationView(
            id=conv.id,
            side=conv.side,
            contestant=contestant_view(contestant),
            system_prompt=conv.system_prompt,
            params=dict(conv.params or {}),
            messages=tuple(messages[conv.id]),
            corrections=tuple(corrections[conv.id]),
        )
        for conv, contestant in conversations
    }
    return BattleView(
        id=battle.id,
        mode=battle.mode,
        scenario=battle.scenario,
        status=battle.status,
        visitor_id=battle.visitor_id,
        revealed_before_vote=battle.revealed_before_vote,
        revealed_at=battle.revealed_at,
        flag_reason=battle.flag_reason,
        created_at=battle.created_at,
        updated_at=battle.updated_at,
        closed_at=battle.closed_at,
        sides=sides,
        vote=vote_view(vote) if vote is not None else None,
        dialogue=dict(battle.dialogue) if battle.dialogue is not None else None,
    )


@retry_read
def get_battle(engine: Engine, *, battle_id: str) -> BattleView:
    """The whole battle (both conversations, corrections, vote), for rendering and resuming."""
    require_battle_id(battle_id)
    with read_session(engine) as session:
        battle = session.get(Battle, battle_id)
        if battle is None:
            raise NotFound(f"no battle {battle_id!r}")
        return battle_view(session, battle)


@retry_read
def resume_open_battle(engine: Engine, *, visitor_id: int, mode: str | None = None) -> BattleView | None:
    """The visitor's most recently active open battle (of ``mode`` if given), or None."""
    if mode is not None:
        require_choice(mode, MODES, what="mode")
    require_int(visitor_id, what="visitor id")
    with read_session(engine) as session:
        query = select(Battle).where(Battle.visitor_id == visitor_id, Battle.status == "open")
        if mode is not None:
            query = query.where(Battle.mode == mode)
        battle = session.scalar(query.order_by(Battle.updated_at.desc(), Battle.created_at.desc()).limit(1))
        return battle_view(session, battle) if battle is not None else None
