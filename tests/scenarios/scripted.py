"""A test double for the runner's own logic: a ChatModel that answers from a script, not a network.

``respond`` sees the whole chat (as a real model would) and returns the reply text; it streams in two
deltas and ends with a GenerationResult, exactly like the protocol requires.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from inference.protocol import (
    CancelToken,
    ChatMessage,
    GenerationParams,
    GenerationResult,
    StreamEvent,
    TextDelta,
)
from scenarios import get_scenario

CALENDAR = get_scenario("calendar")
Responder = Callable[[Sequence[ChatMessage]], str]


class ScriptedModel:
    def __init__(self, slug: str, respond: Responder, *, fail: bool = False) -> None:
        self._slug = slug
        self.respond = respond
        self.fail = fail
        self.calls: list[tuple[list[ChatMessage], GenerationParams]] = []

    @property
    def slug(self) -> str:
        return self._slug

    def stream(
        self, messages: Sequence[ChatMessage], params: GenerationParams, *, cancel: CancelToken | None = None
    ) -> Iterator[StreamEvent]:
        self.calls.append((list(messages), params))
        if self.fail:
            raise RuntimeError("device lost")
        text = self.respond(messages)
        half = len(text) // 2
        yield TextDelta(text[:half])
        yield TextDelta(text[half:])
        prompt = sum(len(m.content) for m in messages)
        yield GenerationResult(text=text, finish_reason="stop", prompt_tokens=prompt, new_tokens=len(text),
                               ttft_ms=1.0, total_ms=2.0)


def current_turn(messages: Sequence[ChatMessage]) -> int:
    """The latest scripted turn the chat has reached (corrections keep the turn)."""
    users = [t.user for t in CALENDAR.turns]
    turn = 1
    for message in messages:
        if message.role == "user" and message.content in users:
            turn = users.index(message.content) + 1
    return turn


def perfect(messages: Sequence[ChatMessage]) -> str:
    return CALENDAR.turn(current_turn(messages)).expected


def chatty_then_fixed(messages: Sequence[ChatMessage]) -> str:
    """Chatty on every new turn, clean after "Just the API call please."."""
    expected = perfect(messages)
    if messages[-1].content == "Just the API call please.":
        return expected
    return f"Sure! Here you go:\n{expected}"


def always_chatty(messages: Sequence[ChatMessage]) -> str:
    return f"Sure! Here you go:\n{perfect(messages)}"


def guesses_durations(messages: Sequence[ChatMessage]) -> str:
    """The Qwen2.5-Coder run of the issue: a new event without a duration; "Duration is required." gets
    60, "Wrong duration." 45; only "Use the default duration." gets the prompt's 30."""
    expected = perfect(messages)
    if current_turn(messages) != 3:
        return expected
    guesses = {"Duration is required.": "60", "Wrong duration.": "45", "Use the default duration.": "30"}
    last = messages[-1].content
    if last in guesses:
        return expected.replace("duration=30", f"duration={guesses[last]}")
    return expected.replace(", duration=30", "")
