"""One request's reply as tokens arrive: the bookkeeping every generation loop shares.

A :class:`Reply` knows its prompt, its stop tokens, its new-token budget (the request's
``max_new_tokens``, capped so prompt + reply fit the context), detokenises incrementally (UTF-8 safe),
times the first token and the whole request from when it arrived, and ends with exactly one
:class:`GenerationResult`, recording the ids it produced in an optional :class:`TokenTrace`. The loop
that drives it only samples tokens and says when the reply ends early (cancelled, failed).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

import numpy as np

from inference.engine.detokenize import IncrementalDecoder
from inference.families.base import TextTokenizer
from inference.protocol import (
    CancelToken,
    FinishReason,
    GenerationParams,
    GenerationResult,
    StreamEvent,
    TextDelta,
)

Emit = Callable[[StreamEvent], None]


@dataclass
class TokenTrace:
    """The ids a generation produced (stop token excluded), for tests and benchmarks."""

    ids: list[int]


class Reply:
    """A request and its stream so far. ``emit`` receives text deltas, then one result.

    ``started`` is a ``time.perf_counter()`` stamp of when the request arrived (queue time counts in
    ``ttft_ms``/``total_ms``: it is what the visitor waits).
    """

    def __init__(
        self,
        prompt: list[int],
        params: GenerationParams,
        *,
        stop_ids: Collection[int],
        tokenizer: TextTokenizer,
        max_length: int,
        emit: Emit,
        cancel: CancelToken | None = None,
        started: float | None = None,
        trace: TokenTrace | None = None,
    ) -> None:
        self.prompt = prompt
        self.params = params
        self.stop_ids = stop_ids
        self.cancel = cancel or CancelToken()
        self.started = time.perf_counter() if started is None else started
        self.budget = min(params.max_new_tokens, max_length - len(prompt))
        self.rng = np.random.default_rng(params.seed)
        self._max_length = max_length
        self._emit = emit
        self._trace = trace
        self._decoder = IncrementalDecoder(tokenizer)
        self._pieces: list[str] = []
        self.produced: list[int] = []
        self.ttft_ms: float | None = None

    @property
    def room_error(self) -> ValueError | None:
        """Why this request cannot start (an empty prompt, or one that leaves no room for a token)."""
        if self.prompt and self.budget >= 1:
            return None
        return ValueError(f"prompt of {len(self.prompt)} tokens leaves no room in {self._max_length}")

    @property
    def need(self) -> int:
        """Cache slots this reply may use by its end (prompt + budget)."""
        return len(self.prompt) + self.budget

    def accept(self, token: int) -> FinishReason | None:
        """Record a sampled token and stream its text; the finish reason once the reply is over."""
        if self.ttft_ms is None:
            self.ttft_ms = (time.perf_counter() - self.started) * 1000
        if token in self.stop_ids:
            return "stop"
        self.produced.append(token)
        self._show(self._decoder.push(token))
        return "length" if len(self.produced) >= self.budget else None

    def finish(self, reason: FinishReason, error: str | None = None) -> GenerationResult:
        """Flush held-back text, emit (and return) the one result, record the trace."""
        self._show(self._decoder.flush())
        result = GenerationResult(
            text="".join(self._pieces), finish_reason=reason, prompt_tokens=len(self.prompt),
            new_tokens=len(self.produced), ttft_ms=self.ttft_ms,
            total_ms=(time.perf_counter() - self.started) * 1000, error=error,
        )
        self._emit(result)
        if self._trace is not None:
            self._trace.ids = list(self.produced)
        return result

    def _show(self, text: str) -> None:
        if text:
            self._pieces.append(text)
            self._emit(TextDelta(text))
