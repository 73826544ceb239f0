"""Battle screen rules: when voting opens, what each model sees, which fixes await a verdict."""

from __future__ import annotations

import datetime as dt

from db import MessageView
from webapp.views import (
    ShownBattle,
    ShownCorrection,
    ShownSide,
    awaiting_verdict,
    history_for_retry,
    model_history,
    turns_taken,
    vote_problem,
)


def _side(side: str, *messages: MessageView) -> ShownSide:
    return ShownSide(
        side=side,
        contestant=f"m-{side}",
        display_name=f"M {side}",
        family="llama",
        system_prompt="SYS",
        messages=tuple(messages),
    )


_AT = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _user(i: int, text: str, kind: str = "request") -> MessageView:
    return MessageView(id=i, conversation_id=1, side="a", position=i, role="user", kind=kind, content=text,
                       created_at=_AT)


def _reply(i: int, text: str, error: str | None = None) -> MessageView:
    return MessageView(
        id=i,
        conversation_id=1,
        side="a",
        position=i,
        role="assistant",
        kind="reply",
        content=text,
        created_at=_AT,
        error=error,
        finish_reason="error" if error else "stop",
    )


def _battle(a: ShownSide, b: ShownSide, *, vote: str | None = None, corrections=()) -> ShownBattle:
    return ShownBattle(
        id="x",
        mode="anonymous",
        scenario="calendar",
        status="open" if vote is None else "voted",
        identity_revealed=False,
        vote=vote,
        sides={"a": a, "b": b},
        corrections=tuple(corrections),
    )


def test_vote_needs_a_good_reply_on_both_sides() -> None:
    a = _side("a", _user(1, "hi"), _reply(2, "hello"))
    assert vote_problem(_battle(a, _side("b", _user(3, "hi")))) is not None
    assert vote_problem(_battle(a, _side("b", _user(3, "hi"), _reply(4, "", error="boom")))) is not None
    assert vote_problem(_battle(a, _side("b", _user(3, "hi"), _reply(4, "yo")))) is None
    assert "already" in (vote_problem(_battle(a, a, vote="a")) or "")


def test_history_keeps_the_last_retry_and_skips_errors() -> None:
    side = _side(
        "a",
        _user(1, "q1"),
        _reply(2, "first"),
        _reply(3, "retried"),
        _user(4, "fix it", "correction"),
        _reply(5, "", error="boom"),
    )
    history = model_history(side)
    assert [(m.role, m.content) for m in history] == [
        ("system", "SYS"),
        ("user", "q1"),
        ("assistant", "retried"),
        ("user", "fix it"),
    ]
    assert history_for_retry(_side("a", _user(1, "q1"), _reply(2, "first")))[-1].content == "q1"


def test_a_send_after_a_failed_reply_joins_the_user_turns() -> None:
    """Found by the load test: chat templates refuse two user turns in a row (TemplateError)."""
    side = _side("a", _user(1, "q1"), _reply(2, "", error="busy"), _user(3, "q2"))
    assert [(m.role, m.content) for m in model_history(side)] == [("system", "SYS"), ("user", "q1\n\nq2")]


def test_turns_and_pending_verdicts() -> None:
    a = _side("a", _user(1, "q"), _reply(2, "r"), _user(3, "c", "correction"), _reply(4, "r2"))
    b = _side("b", _user(5, "q"), _reply(6, "r"))
    corr = ShownCorrection(
        id=9, side="a", faulty_reply_id=2, feedback_message_id=3, reply_id=4, outcome="unknown"
    )
    battle = _battle(a, b, corrections=[corr])
    assert turns_taken(battle) == 2
    assert awaiting_verdict(battle, "a") == corr
    assert awaiting_verdict(battle, "b") is None
    judged = ShownCorrection(
        id=9, side="a", faulty_reply_id=2, feedback_message_id=3, reply_id=4, outcome="fixed"
    )
    assert awaiting_verdict(_battle(a, b, corrections=[judged]), "a") is None
