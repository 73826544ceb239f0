"""The web layer's one set of battle views: what a page needs, as plain frozen values built from ``db``'s
read model (``db.BattleView``) in one place, ``shown_battle``. A message stays ``db``'s
:class:`db.MessageView` (the standing ones only); the model's history is ``inference``'s ``ChatMessage``.

Pure functions here decide what the UI offers (vote enabled? which corrections await a verdict? what
history does a side's model see?), so the rules are testable without Streamlit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from db import BattleView, MessageView
from inference.protocol import ChatMessage

SIDES = ("a", "b")
VOTE_CHOICES = ("a", "b", "tie", "both_bad")


@dataclass(frozen=True)
class ShownCorrection:
    id: int
    side: str
    faulty_reply_id: int | None
    feedback_message_id: int
    reply_id: int | None
    outcome: str  # "fixed" | "not_fixed" | "unknown"


@dataclass(frozen=True)
class ShownSide:
    side: str
    contestant: str  # slug
    display_name: str
    family: str
    system_prompt: str
    messages: tuple[MessageView, ...] = ()  # the standing ones (superseded retries left out)
    generated: int = 0  # every reply this side generated, superseded retries and failures included


@dataclass(frozen=True)
class ShownBattle:
    id: str
    mode: str
    scenario: str
    status: str  # "open" | "voted" | "abandoned" | "flagged"
    identity_revealed: bool
    vote: str | None
    sides: dict[str, ShownSide]
    corrections: tuple[ShownCorrection, ...] = field(default_factory=tuple)
    dialogue: dict[str, Any] | None = None  # the generated dialogue both sides play (None: free chat, older)

    @property
    def is_open(self) -> bool:
        return self.status == "open" and self.vote is None


def shown_battle(battle: BattleView) -> ShownBattle:
    """The page's view of a stored battle (``db``'s read model): standing messages only, corrections by id."""
    sides: dict[str, ShownSide] = {}
    corrections: list[ShownCorrection] = []
    for side, conv in battle.sides.items():
        messages = tuple(m for m in conv.messages if not m.superseded)
        sides[side] = ShownSide(
            side=side,
            contestant=conv.contestant.slug,
            display_name=conv.contestant.display_name,
            family=conv.contestant.family,
            system_prompt=conv.system_prompt,
            messages=messages,
            generated=sum(1 for m in conv.messages if m.kind == "reply"),
        )
        corrections += [
            ShownCorrection(
                id=c.id,
                side=side,
                faulty_reply_id=c.faulty_message_id,
                feedback_message_id=c.feedback_message_id,
                reply_id=c.next_reply_message_id,
                outcome=c.outcome,
            )
            for c in conv.corrections
        ]
    return ShownBattle(
        id=battle.id,
        mode=battle.mode,
        scenario=battle.scenario,
        status=battle.status,
        identity_revealed=battle.revealed_before_vote,
        vote=battle.vote.choice if battle.vote is not None else None,
        sides=sides,
        dialogue=battle.dialogue,
        corrections=tuple(sorted(corrections, key=lambda c: c.id)),
    )


def last_reply(side: ShownSide) -> MessageView | None:
    """The side's newest reply if it is the newest message (a retry replaces it in the history)."""
    if side.messages and side.messages[-1].kind == "reply":
        return side.messages[-1]
    return None


def has_good_reply(side: ShownSide) -> bool:
    return any(m.kind == "reply" and m.error is None and m.finish_reason != "error" for m in side.messages)


def vote_problem(battle: ShownBattle) -> str | None:
    """Why a vote cannot be cast now (None: it can)."""
    if battle.vote is not None or battle.status != "open":
        return "This battle already has a vote."
    missing = [s.upper() for s in SIDES if s in battle.sides and not has_good_reply(battle.sides[s])]
    if len(battle.sides) < 2 or missing:
        return "Both models must reply before you vote (waiting for Model " + " and ".join(missing) + ")."
    return None


def turns_taken(battle: ShownBattle) -> int:
    """Visitor turns so far: the larger side's count of visitor messages (a message to both is one turn)."""
    return max((sum(1 for m in s.messages if m.role == "user") for s in battle.sides.values()), default=0)


def awaiting_verdict(battle: ShownBattle, side: str) -> ShownCorrection | None:
    """The side's latest correction that has its reply but no person's verdict yet."""
    pending = [
        c for c in battle.corrections if c.side == side and c.reply_id is not None and c.outcome == "unknown"
    ]
    return pending[-1] if pending else None


def model_history(side: ShownSide) -> list[ChatMessage]:
    """The conversation the side's model sees: system prompt, then user turns and each turn's final reply.

    A retried reply is superseded by the next reply to the same turn; failed replies are left out, and
    the user turns around a failed reply are joined into one (chat templates refuse two user turns in a
    row: a send after a failed reply would otherwise fail too).
    """
    history: list[ChatMessage] = []
    if side.system_prompt:
        history.append(ChatMessage("system", side.system_prompt))
    for message in side.messages:
        if message.role == "user":
            if history and history[-1].role == "user":
                history[-1] = ChatMessage("user", f"{history[-1].content}\n\n{message.content}")
            else:
                history.append(ChatMessage("user", message.content))
        elif message.error is None and message.finish_reason != "error":
            if history and history[-1].role == "assistant":
                history[-1] = ChatMessage("assistant", message.content)
            else:
                history.append(ChatMessage("assistant", message.content))
    return history


def history_for_retry(side: ShownSide) -> list[ChatMessage]:
    """The history to regenerate the last reply: everything up to and including the last user turn."""
    history = model_history(side)
    while history and history[-1].role == "assistant":
        history.pop()
    return history
