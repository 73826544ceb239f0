"""The chat-model protocol: the only face of ``inference`` that ``scenarios`` and ``webapp`` see.

A model streams a reply as a sequence of events: zero or more :class:`TextDelta` followed by exactly one
:class:`GenerationResult` (also when generation failed or was cancelled: ``finish_reason`` says so).
Local keras-hub models, the pool and remote OpenAI-compatible engines all implement :class:`ChatModel`.
Models that run in this process also implement :class:`BatchingChatModel`, what the pool's workers use.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

Role = Literal["system", "user", "assistant"]
FinishReason = Literal["stop", "length", "cancelled", "error"]

REPLACEMENT_CHARACTER = "\ufffd"
# What UTF-8 cannot encode (lone surrogates, e.g. from a JSON "\\ud800" escape) and what PostgreSQL text
# cannot store (NUL).
_UNENCODABLE = re.compile("[\ud800-\udfff\x00]")


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate and NUL replaced by U+FFFD, so it can be drawn and stored.

    Every text that leaves a model stream goes through it (the remote engine's deltas, results and
    errors); the web app cleans again before drawing and storing. Valid text comes back unchanged.
    """
    return _UNENCODABLE.sub(REPLACEMENT_CHARACTER, text)


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class GenerationParams:
    """Per-request sampling settings. ``temperature == 0`` means greedy decoding."""

    max_new_tokens: int = 128
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # 0: no top-k cut
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be >= 1")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise ValueError("temperature must be a finite number >= 0")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if self.top_k < 0:
            raise ValueError("top_k must be >= 0")


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class GenerationResult:
    text: str
    finish_reason: FinishReason
    prompt_tokens: int
    new_tokens: int
    ttft_ms: float | None
    total_ms: float
    error: str | None = None


StreamEvent = TextDelta | GenerationResult
Emit = Callable[[StreamEvent], None]


def error_text(exc: BaseException) -> str:
    """How a failure reads in ``GenerationResult.error``: ``"ValueError: ..."``."""
    return f"{type(exc).__name__}: {exc}"


def error_result(
    error: BaseException | str, *, started: float, text: str = "", prompt_tokens: int = 0
) -> GenerationResult:
    """The ``"error"`` result of a request that failed outside a running reply.

    ``started``: the ``time.perf_counter()`` stamp of when the request arrived (``total_ms`` counts from
    it); ``text``: what the visitor was already shown, kept.
    """
    return GenerationResult(
        text=text,
        finish_reason="error",
        prompt_tokens=prompt_tokens,
        new_tokens=0,
        ttft_ms=None,
        total_ms=(time.perf_counter() - started) * 1000,
        error=error if isinstance(error, str) else error_text(error),
    )


@dataclass
class CancelToken:
    """Set by the caller (a visitor who left, a Stop button) to end a generation early."""

    _event: threading.Event = field(default_factory=threading.Event)

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


@runtime_checkable
class ChatModel(Protocol):
    """Anything that can answer a chat. ``stream`` must end with one :class:`GenerationResult`."""

    @property
    def slug(self) -> str: ...

    def stream(
        self,
        messages: Sequence[ChatMessage],
        params: GenerationParams,
        *,
        cancel: CancelToken | None = None,
    ) -> Iterator[StreamEvent]: ...


class StepBatcher(Protocol):
    """The decode loop a model's concurrent requests share (:class:`inference.engine.batcher.SlotScheduler`):
    its owner thread ticks it with ``run_until`` while requests are ``busy`` in it."""

    @property
    def busy(self) -> bool: ...

    def run_until(self, done: Callable[[], bool]) -> None: ...

    def cancel_all(self) -> None: ...


@runtime_checkable
class BatchingChatModel(ChatModel, Protocol):
    """A chat model that runs in this process (:class:`inference.local.LocalChatModel`): what the pool's
    worker uses beyond :class:`ChatModel`.

    ``warm_up`` compiles the shapes of these (prompt, new tokens) requests while the model loads, not
    during a visitor's request; ``warm_up_batches`` the decode step at several rows. ``submitted_at``
    (a ``time.perf_counter()`` stamp) is when the request arrived, so ttft and total count its wait in
    line. Where ``supports_batching``, concurrent requests are ``submit``-ted to its ``batcher`` and
    share each decode step (their events go to ``emit``); else it serves one request at a time.
    """

    @property
    def supports_batching(self) -> bool: ...

    @property
    def batcher(self) -> StepBatcher: ...

    def warm_up(self, *, requests: Sequence[tuple[int, int]] = ((1, 1),)) -> None: ...

    def warm_up_batches(self, *, prompt_tokens: int, new_tokens: int) -> None: ...

    def stream(
        self,
        messages: Sequence[ChatMessage],
        params: GenerationParams,
        *,
        cancel: CancelToken | None = None,
        submitted_at: float | None = None,
    ) -> Iterator[StreamEvent]: ...

    def submit(
        self,
        messages: Sequence[ChatMessage],
        params: GenerationParams,
        *,
        emit: Emit,
        cancel: CancelToken | None = None,
        submitted_at: float | None = None,
    ) -> None: ...


def complete(
    model: ChatModel,
    messages: Sequence[ChatMessage],
    params: GenerationParams,
    *,
    cancel: CancelToken | None = None,
) -> GenerationResult:
    """Drain a stream and return its final result."""
    result: GenerationResult | None = None
    for event in model.stream(messages, params, cancel=cancel):
        if isinstance(event, GenerationResult):
            result = event
    if result is None:
        raise RuntimeError(f"model {model.slug!r} ended its stream without a GenerationResult")
    return result
