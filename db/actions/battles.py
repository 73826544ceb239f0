"""Battle actions: open, append messages, corrections and outcomes, grader labels, reveal, abandon.

Moderation (flag, unflag, its log, the admin's list of recent battles) lives in :mod:`db.actions.moderation`.

Each function is one transaction. Writers lock the battle row first (``SELECT ... FOR UPDATE`` on
PostgreSQL; on SQLite the whole write transaction is ``BEGIN IMMEDIATE``), so two tabs or two replicas
acting on the same battle queue up instead of both passing a check and both writing. The unique
constraint on ``votes.battle_id`` is the last line of defence behind that.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from sqlalchemy import Engine, exists, func, select, update
from sqlalchemy.orm import Session

from db.actions.reading import battle_view, correction_view, get_battle, message_view, resume_open_battle
from db.boards.reply_stats import refresh_side_stats
from db.checks import (
    contestant_by_slug,
    optional_text,
    require_aware,
    require_battle_id,
    require_choice,
    require_duration,
    require_int,
    require_text,
)
from db.engine import write_session
from db.errors import BattleClosed, InvalidInput, NotFound
from db.models import (
    GRADER_LABELS,
    JUDGED_BY,
    MESSAGE_KINDS,
    MODES,
    OUTCOMES,
    SIDES,
    Battle,
    Conversation,
    Correction,
    Message,
    SideStats,
    Visitor,
    Vote,
    utcnow,
)
from db.views import BattleView, CorrectionView, MessageView

__all__ = [  # get_battle / resume_open_battle live in db.actions.reading; kept importable from here too
    "abandon_battle",
    "abandon_stale_battles",
    "append_message",
    "append_turn",
    "get_battle",
    "mark_revealed",
    "open_battle",
    "record_correction",
    "resume_open_battle",
    "set_correction_outcome",
    "set_grader_label",
]

DEFAULT_MAX_CHARS = 12_000
MAX_DIALOGUE_CHARS = 64_000  # a generated dialogue: 4 to 8 turns of a few hundred characters
ROLE_OF_KIND = {"request": "user", "correction": "user", "reply": "assistant"}
SINGLE_SIDED_MODES = ("direct", "auto")


# --- writing -----------------------------------------------------------------------------------------


def lock_battle(session: Session, battle_id: str) -> Battle:
    require_battle_id(battle_id)
    battle = session.scalar(select(Battle).where(Battle.id == battle_id).with_for_update())
    if battle is None:
        raise NotFound(f"no battle {battle_id!r}")
    return battle


def _conversation(session: Session, battle_id: str, side: str) -> Conversation:
    conv = session.scalar(
        select(Conversation).where(Conversation.battle_id == battle_id, Conversation.side == side)
    )
    if conv is None:
        raise NotFound(f"battle {battle_id} has no side {side!r}")
    return conv


def _side_of(session: Session, conversation_id: int) -> str:
    return session.scalar(select(Conversation.side).where(Conversation.id == conversation_id)) or "?"


def open_battle(
    engine: Engine,
    *,
    mode: str,
    scenario: str,
    contestant_a: str,
    contestant_b: str | None = None,
    visitor_id: int | None = None,
    system_prompt: str = "",
    system_prompt_b: str | None = None,
    params_a: dict[str, Any] | None = None,
    params_b: dict[str, Any] | None = None,
    first_request: str | None = None,
    first_request_sides: tuple[str, ...] | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
    dialogue: dict[str, Any] | None = None,
) -> BattleView:
    """Open a battle between two enabled contestants (one for ``direct``/``auto`` modes).

    ``system_prompt`` goes to both sides unless ``system_prompt_b`` differs; params are the sampling
    settings each side uses (stored for the dataset). ``first_request`` (sent to ``first_request_sides``,
    default every side) is written in the same transaction: a refused first message leaves no empty
    battle behind. ``dialogue`` is the generated dialogue both sides play (stored as given, at most
    ``MAX_DIALOGUE_CHARS`` of JSON).
    """
    require_choice(mode, MODES, what="mode")
    _check_dialogue(dialogue)
    require_text(scenario, what="scenario", max_chars=100)
    require_text(system_prompt, what="system prompt", max_chars=50_000, allow_empty=True)
    if contestant_b is None and mode not in SINGLE_SIDED_MODES:
        raise InvalidInput(f"a {mode} battle needs two contestants")
    if contestant_b is not None and contestant_b == contestant_a:
        raise InvalidInput("a contestant cannot battle itself")
    require_int(visitor_id, what="visitor id")
    for slug in (contestant_a, contestant_b):
        if slug is not None:
            require_text(slug, what="contestant slug", max_chars=100)
    optional_text(system_prompt_b, what="system prompt", max_chars=50_000)
    with write_session(engine) as session:
        if visitor_id is not None and session.get(Visitor, visitor_id) is None:
            raise NotFound(f"no visitor {visitor_id}")
        picks = [("a", contestant_a, system_prompt, params_a)]
        if contestant_b is not None:
            picks.append(("b", contestant_b, system_prompt_b or system_prompt, params_b))
        now = utcnow()
        battle = Battle(mode=mode, scenario=scenario, visitor_id=visitor_id, created_at=now, updated_at=now,
                        dialogue=dict(dialogue) if dialogue is not None else None)
        session.add(battle)
        session.flush()
        for side, slug, prompt, params in picks:
            contestant = contestant_by_slug(session, slug)
            if not contestant.enabled:
                raise InvalidInput(f"contestant {slug!r} is disabled")
            session.add(
                Conversation(
                    battle_id=battle.id,
                    side=side,
                    contestant_id=contestant.id,
                    system_prompt=prompt,
                    params=dict(params or {}),
                )
            )
        session.flush()
        if first_request is not None:
            for side in first_request_sides or tuple(side for side, *_ in picks):
                _append(
                    session, battle_id=battle.id, side=side, kind="request", content=first_request,
                    max_chars=max_chars,
                )
            session.flush()
        return battle_view(session, battle)


def _check_dialogue(dialogue: dict[str, Any] | None) -> None:
    """A dialogue is a JSON object with a text ``id`` and a list of ``turns``, of bounded size."""
    if dialogue is None:
        return
    if not isinstance(dialogue, dict) or not isinstance(dialogue.get("id"), str) \
            or not isinstance(dialogue.get("turns"), list):
        raise InvalidInput("a dialogue must be an object with an id and a list of turns")
    try:
        size = len(json.dumps(dialogue, ensure_ascii=False))
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"a dialogue must be JSON ({exc})") from exc
    if size > MAX_DIALOGUE_CHARS:
        raise InvalidInput(f"a dialogue is at most {MAX_DIALOGUE_CHARS} characters of JSON")


def _check_reply_fields(reply_fields: dict[str, Any]) -> None:
    """Timings finite and >= 0, token counts 32-bit, texts storable (the same refusal on both backends)."""
    for name in ("ttft_ms", "total_ms"):
        require_duration(reply_fields.get(name), what=name)
    for name in ("prompt_tokens", "completion_tokens"):
        require_int(reply_fields.get(name), what=name)
    optional_text(reply_fields.get("finish_reason"), what="finish reason", max_chars=32)
    optional_text(reply_fields.get("error"), what="error text", max_chars=10_000)
    for mistake in reply_fields.get("grader_mistakes") or ():
        require_text(mistake, what="grader mistake", max_chars=2_000)
    for note in reply_fields.get("grader_notes") or ():
        require_text(note, what="grader note", max_chars=2_000)


_LISTS = frozenset({"grader_mistakes", "grader_notes"})  # reply fields stored as JSON lists


def _append(
    session: Session,
    *,
    battle_id: str,
    side: str,
    kind: str,
    content: str,
    max_chars: int,
    replaces_message_id: int | None = None,
    **reply_fields: Any,
) -> tuple[Message, Correction | None]:
    require_choice(side, SIDES, what="side")
    require_choice(kind, MESSAGE_KINDS, what="kind")
    errored = kind == "reply" and bool(reply_fields.get("error"))
    require_text(content, what=f"{kind} text", max_chars=max_chars, allow_empty=errored)
    reply_only = replaces_message_id is not None or any(v is not None for v in reply_fields.values())
    if kind != "reply" and reply_only:
        raise InvalidInput("timing, tokens, errors, grader labels and retries belong to replies only")
    _check_reply_fields(reply_fields)
    require_int(replaces_message_id, what="replaced message id")
    if reply_fields.get("grader_label") is not None:
        require_choice(reply_fields["grader_label"], GRADER_LABELS, what="grader label")
    battle = lock_battle(session, battle_id)
    if battle.status != "open":
        raise BattleClosed(battle.id, battle.status)
    conv = _conversation(session, battle_id, side)
    last_position = session.scalar(
        select(func.max(Message.position)).where(Message.conversation_id == conv.id)
    )
    standing_replies = select(Message).where(
        Message.conversation_id == conv.id, Message.kind == "reply", Message.superseded.is_(False)
    )
    now = utcnow()
    message = Message(
        conversation_id=conv.id,
        position=0 if last_position is None else last_position + 1,
        role=ROLE_OF_KIND[kind],
        kind=kind,
        content=content,
        created_at=now,
        **{k: (list(v) if k in _LISTS and v is not None else v) for k, v in reply_fields.items()},
    )
    correction: Correction | None = None
    if kind == "correction":
        faulty = session.scalar(standing_replies.order_by(Message.position.desc()).limit(1))
        if faulty is None:
            raise InvalidInput(f"side {side} has no reply to correct yet")
        session.add(message)
        session.flush()
        correction = Correction(
            battle_id=battle_id,
            conversation_id=conv.id,
            faulty_message_id=faulty.id,
            feedback_message_id=message.id,
            created_at=now,
        )
        session.add(correction)
    elif kind == "reply":
        any_reply = session.scalar(
            select(exists().where(Message.conversation_id == conv.id, Message.kind == "reply"))
        )
        message.first_try = not any_reply
        replaced: Message | None = None
        if replaces_message_id is not None:
            replaced = session.get(Message, replaces_message_id)
            if replaced is None or replaced.conversation_id != conv.id or replaced.kind != "reply":
                raise InvalidInput(f"message {replaces_message_id} is not a reply of side {side}")
            if replaced.superseded:
                raise InvalidInput(f"message {replaces_message_id} was already replaced")
            replaced.superseded = True
        session.add(message)
        session.flush()
        pending = select(Correction).where(Correction.conversation_id == conv.id)
        if replaced is not None:
            pending = pending.where(
                (Correction.next_reply_message_id == replaced.id) | Correction.next_reply_message_id.is_(None)
            )
        else:
            pending = pending.where(Correction.next_reply_message_id.is_(None))
        for corr in session.scalars(pending):
            corr.next_reply_message_id = message.id
        refresh_side_stats(session, conv.id)
    else:
        session.add(message)
        session.flush()
    battle.updated_at = now
    return message, correction


def append_message(
    engine: Engine,
    *,
    battle_id: str,
    side: str,
    kind: str,
    content: str,
    max_chars: int = DEFAULT_MAX_CHARS,
    ttft_ms: float | None = None,
    total_ms: float | None = None,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    finish_reason: str | None = None,
    error: str | None = None,
    grader_label: str | None = None,
    grader_mistakes: list[str] | tuple[str, ...] | None = None,
    grader_notes: list[str] | tuple[str, ...] | None = None,
    replaces_message_id: int | None = None,
) -> MessageView:
    """Append one turn to one side of an open battle.

    ``kind='correction'`` also records the correction event (faulty reply = that side's latest standing
    reply). A ``reply`` completes any pending correction of its side. ``replaces_message_id`` marks a
    retried reply superseded (kept, never deleted) and hands its correction link to the new reply.
    A failed generation is a reply with ``error`` set (its text may be empty). ``grader_notes``: the
    grader's mistakes in words, as the visitor read them.
    """
    with write_session(engine) as session:
        message, _ = _append(
            session,
            battle_id=battle_id,
            side=side,
            kind=kind,
            content=content,
            max_chars=max_chars,
            replaces_message_id=replaces_message_id,
            ttft_ms=ttft_ms,
            total_ms=total_ms,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            finish_reason=finish_reason,
            error=error,
            grader_label=grader_label,
            grader_mistakes=grader_mistakes,
            grader_notes=grader_notes,
        )
        return message_view(message, side)


def append_turn(
    engine: Engine,
    *,
    battle_id: str,
    sides: tuple[str, ...],
    kind: str,
    content: str,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> list[MessageView]:
    """One visitor turn (a request or a correction) to several sides at once, in one transaction: both
    sides get it or neither does."""
    if not sides or len(set(sides)) != len(sides):
        raise InvalidInput("a turn goes to one or more distinct sides")
    if kind not in ("request", "correction"):
        raise InvalidInput("a visitor turn is a request or a correction")
    with write_session(engine) as session:
        written = [
            _append(session, battle_id=battle_id, side=s, kind=kind, content=content, max_chars=max_chars)[0]
            for s in sides
        ]
        session.flush()
        return [message_view(message, side) for message, side in zip(written, sides, strict=True)]


def record_correction(
    engine: Engine, *, battle_id: str, side: str, content: str, max_chars: int = DEFAULT_MAX_CHARS
) -> CorrectionView:
    """Send feedback on a side's latest reply: the feedback message and the correction event, together."""
    with write_session(engine) as session:
        _, correction = _append(
            session, battle_id=battle_id, side=side, kind="correction", content=content, max_chars=max_chars
        )
        assert correction is not None
        session.flush()
        return correction_view(correction, side)


def set_correction_outcome(
    engine: Engine, *, correction_id: int, outcome: str, judged_by: str, visitor_id: int | None = None
) -> CorrectionView:
    """Record whether the reply after a correction fixed the mistake, and who judged it.

    Judging ``fixed``/``not_fixed`` needs the reply that followed; ``unknown`` can be set any time.
    A person's verdict is taken only while the battle is open (:class:`BattleClosed` once it is voted,
    abandoned or flagged: a stale tab cannot judge after the names were shown) and, with
    ``visitor_id``, only from the battle's owner (:class:`InvalidInput` otherwise). The battle row is
    locked first, so a verdict and a vote racing on one battle are decided one after the other.
    """
    require_choice(outcome, OUTCOMES, what="outcome")
    require_choice(judged_by, JUDGED_BY, what="judged_by")
    require_int(correction_id, what="correction id")
    require_int(visitor_id, what="visitor id")
    with write_session(engine) as session:
        battle_id = session.scalar(select(Correction.battle_id).where(Correction.id == correction_id))
        if battle_id is None:
            raise NotFound(f"no correction {correction_id}")
        battle = lock_battle(session, battle_id)
        if judged_by == "person" and battle.status != "open":
            raise BattleClosed(battle.id, battle.status)
        if visitor_id is not None and battle.visitor_id != visitor_id:
            raise InvalidInput("this battle belongs to another visitor")
        corr = session.scalar(select(Correction).where(Correction.id == correction_id).with_for_update())
        if corr is None:  # pragma: no cover - corrections are never deleted
            raise NotFound(f"no correction {correction_id}")
        if outcome != "unknown" and corr.next_reply_message_id is None:
            raise InvalidInput("no reply followed this correction yet: nothing to judge")
        corr.outcome = outcome
        corr.judged_by = judged_by
        corr.judged_at = utcnow()
        refresh_side_stats(session, corr.conversation_id)
        return correction_view(corr, _side_of(session, corr.conversation_id))


def set_grader_label(
    engine: Engine, *, message_id: int, label: str, mistakes: list[str] | tuple[str, ...] | None = None
) -> MessageView:
    """Attach the grader's label (and the mistakes it found) to a reply, at any time."""
    require_choice(label, GRADER_LABELS, what="grader label")
    require_int(message_id, what="message id")
    for mistake in mistakes or ():
        require_text(mistake, what="grader mistake", max_chars=2_000)
    with write_session(engine) as session:
        msg = session.get(Message, message_id)
        if msg is None:
            raise NotFound(f"no message {message_id}")
        if msg.kind != "reply":
            raise InvalidInput("only replies carry grader labels")
        msg.grader_label = label
        msg.grader_mistakes = list(mistakes) if mistakes is not None else None
        refresh_side_stats(session, msg.conversation_id)
        return message_view(msg, _side_of(session, msg.conversation_id))


def mark_revealed(engine: Engine, *, battle_id: str) -> BattleView:
    """Record that the contestants' names were shown; before a vote this makes the vote not count."""
    with write_session(engine) as session:
        battle = lock_battle(session, battle_id)
        now = utcnow()
        has_vote = session.scalar(select(exists().where(Vote.battle_id == battle_id)))
        if not has_vote:
            battle.revealed_before_vote = True
        if battle.revealed_at is None:
            battle.revealed_at = now
        battle.updated_at = now
        session.flush()
        return battle_view(session, battle)


def abandon_battle(engine: Engine, *, battle_id: str, visitor_id: int | None = None) -> BattleView:
    """Close an open battle without a vote ("Skip this battle"); its rows stay, it is never a vote.

    With ``visitor_id`` only that visitor's battle may be skipped (:class:`InvalidInput` otherwise).
    """
    require_int(visitor_id, what="visitor id")
    with write_session(engine) as session:
        battle = lock_battle(session, battle_id)
        if visitor_id is not None and battle.visitor_id != visitor_id:
            raise InvalidInput("this battle belongs to another visitor")
        if battle.status != "open":
            raise BattleClosed(battle.id, battle.status)
        now = utcnow()
        battle.status, battle.closed_at, battle.updated_at = "abandoned", now, now
        _close_sides(session, [battle.id], now)
        session.flush()
        return battle_view(session, battle)


def abandon_stale_battles(engine: Engine, *, older_than: dt.datetime) -> int:
    """Close open battles with no activity since ``older_than``; returns how many were closed."""
    require_aware(older_than, what="older_than")
    with write_session(engine) as session:
        now = utcnow()
        stale = list(session.scalars(
            select(Battle.id).where(Battle.status == "open", Battle.updated_at < older_than).with_for_update()
        ))
        for start in range(0, len(stale), 500):
            chunk = stale[start:start + 500]
            session.execute(
                update(Battle)
                .where(Battle.id.in_(chunk), Battle.status == "open")
                .values(status="abandoned", closed_at=now)
                .execution_options(synchronize_session=False)
            )
            _close_sides(session, chunk, now)
        return len(stale)


def _close_sides(session: Session, battle_ids: list[str], now: dt.datetime) -> None:
    """Copy a closing time into the battles' side roll-ups (the public boards count closed sides only)."""
    session.execute(
        update(SideStats).where(SideStats.battle_id.in_(battle_ids)).values(closed_at=now)
        .execution_options(synchronize_session=False)
    )
