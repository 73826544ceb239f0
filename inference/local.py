"""``LocalChatModel``: a keras-hub backbone + tokenizer + chat template behind the ChatModel protocol.

It renders the conversation with the template, trims old turns to fit the context, encodes with the
model file's own tokenizer and streams through the compiled prefill/step engine. Build it, and call it,
on the thread that owns the model's JAX work (the pool does that); a lock keeps direct callers honest.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence

from inference.chat_template import ChatTemplate, fit_to_context
from inference.engine import BatchScheduler, KVRunner, TokenTrace, causal_lm_for, generate_stream
from inference.families.base import LoadedModel
from inference.protocol import (
    CancelToken,
    ChatMessage,
    GenerationParams,
    GenerationResult,
    StreamEvent,
    TextDelta,
)

Emit = Callable[[StreamEvent], None]


class LocalChatModel:
    """A chat model running in this process. ``context_length`` caps prompt + reply (tokens).

    ``default_system`` is the system prompt the model file's own template adds when a conversation has
    none (SmolLM2's "You are a helpful AI assistant named SmolLM…"); the model was tuned with it.
    """

    def __init__(
        self,
        slug: str,
        loaded: LoadedModel,
        template: ChatTemplate,
        *,
        context_length: int | None = None,
        default_system: str | None = None,
    ) -> None:
        self._slug = slug
        self.default_system = default_system
        self.loaded = loaded
        self.template = template
        self.context_length = min(context_length or loaded.context_length, loaded.context_length)
        self.runner = KVRunner(causal_lm_for(loaded.backbone), max_length=self.context_length)
        self.stop_ids = frozenset(_stop_ids(loaded, template))
        self._lock = threading.Lock()
        self._batcher: BatchScheduler | None = None

    @property
    def slug(self) -> str:
        return self._slug

    def __repr__(self) -> str:
        family, template = self.loaded.family, self.template.name
        return f"LocalChatModel(slug={self._slug!r}, family={family!r}, template={template!r})"

    def warm_up(self, *, requests: Sequence[tuple[int, int]] = ((1, 1),)) -> None:
        """Compile now, not during a visitor's request, the buckets of (prompt, new tokens) sizes."""
        with self._lock:
            for prompt_tokens, new_tokens in requests:
                self.runner.warm_up(prompt_tokens=prompt_tokens, new_tokens=new_tokens)

    @property
    def batcher(self) -> BatchScheduler:
        """The dynamic batcher (built on first use, on the owner thread); see :meth:`submit`."""
        if self._batcher is None:
            self._batcher = BatchScheduler(self.runner, self.loaded.tokenizer)
        return self._batcher

    def warm_up_batches(self, *, prompt_tokens: int, new_tokens: int) -> None:
        """Compile the batched buckets (open batch, join, step) a request of this size uses."""
        with self._lock:
            self.batcher.warm_up(prompt_tokens=prompt_tokens, new_tokens=new_tokens)

    def submit(
        self,
        messages: Sequence[ChatMessage],
        params: GenerationParams,
        *,
        emit: Emit,
        cancel: CancelToken | None = None,
        submitted_at: float | None = None,
        trace: TokenTrace | None = None,
    ) -> None:
        """Queue a request on the batcher: its events go to ``emit`` while the owner ticks the batcher.

        Never raises for a bad conversation: it ends with an ``"error"`` result, like :meth:`stream`.
        """
        started = time.perf_counter() if submitted_at is None else submitted_at
        try:
            ids = self.prompt_ids(messages, params)
        except Exception as exc:
            emit(GenerationResult(
                text="", finish_reason="error", prompt_tokens=0, new_tokens=0, ttft_ms=None,
                total_ms=(time.perf_counter() - started) * 1000, error=f"{type(exc).__name__}: {exc}",
            ))
            return
        self.batcher.submit(ids, params, stop_ids=self.stop_ids, emit=emit, cancel=cancel, started=started,
                            trace=trace)

    def prompt_ids(self, messages: Sequence[ChatMessage], params: GenerationParams) -> list[int]:
        """The token ids of the rendered, left-trimmed prompt (room is kept for the reply)."""
        tokenizer = self.loaded.tokenizer
        if self.default_system is not None and (not messages or messages[0].role != "system"):
            messages = [ChatMessage("system", self.default_system), *messages]
        reserve = min(params.max_new_tokens, self.context_length // 2)
        _, prompt = fit_to_context(
            self.template,
            messages,
            count_tokens=lambda text: len(tokenizer.encode(text)),
            max_prompt_tokens=self.context_length - reserve,
        )
        return tokenizer.encode(prompt)

    def stream(
        self,
        messages: Sequence[ChatMessage],
        params: GenerationParams,
        *,
        cancel: CancelToken | None = None,
        submitted_at: float | None = None,
        trace: TokenTrace | None = None,
    ) -> Iterator[StreamEvent]:
        """Stream the reply; never raises: a failure ends the stream with an ``"error"`` result."""
        started = time.perf_counter() if submitted_at is None else submitted_at
        prompt_tokens = 0
        partial: list[str] = []
        try:
            with self._lock:
                ids = self.prompt_ids(messages, params)
                prompt_tokens = len(ids)
                for event in generate_stream(
                    self.runner,
                    self.loaded.tokenizer,
                    ids,
                    params,
                    stop_ids=self.stop_ids,
                    cancel=cancel,
                    started=started,
                    trace=trace,
                ):
                    if isinstance(event, TextDelta):
                        partial.append(event.text)
                    yield event
        except GeneratorExit:
            raise
        except Exception as exc:  # isolate the failure to this request; keep what was already shown
            yield GenerationResult(
                text="".join(partial),
                finish_reason="error",
                prompt_tokens=prompt_tokens,
                new_tokens=0,
                ttft_ms=None,
                total_ms=(time.perf_counter() - started) * 1000,
                error=f"{type(exc).__name__}: {exc}",
            )


def _stop_ids(loaded: LoadedModel, template: ChatTemplate) -> set[int]:
    """The template's stop tokens that exist in this vocabulary, plus the tokenizer's end-of-sequence."""
    tokenizer = loaded.tokenizer
    ids = {tokenizer.token_to_id(token) for token in template.stop_tokens}
    ids.add(tokenizer.eos_id)
    found = {i for i in ids if i is not None}
    if not found:
        raise ValueError(f"none of the stop tokens {template.stop_tokens} is in the vocabulary")
    return found
