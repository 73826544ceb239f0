"""Continuous batching over the fast engine: one batch cache per model whose rows are requests.

Every :meth:`SlotScheduler.tick` is a step boundary: requests that arrived are prefilled one by one and
copied into free rows (so a newcomer starts within one step, never behind a whole reply), then every
row advances one token in ONE device call (:class:`inference.engine.slots.SlotEngine`). Rows keep their
own positions, so each reply is what the request would get alone. The batch grows through the
``batch_buckets`` as requests arrive and shrinks (rows compacted) when they leave; the cache length
follows the longest row's prompt + reply budget, in powers of two. Sampling, stop tokens and
cancellation are per row, on the host.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from inference.engine.decoding import IncrementalDecoder
from inference.engine.generate import TokenTrace
from inference.engine.sampling import sample_from_candidates
from inference.engine.slots import Candidates, SlotEngine
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
DEFAULT_BATCH_BUCKETS = (1, 2, 4, 8, 16)


@dataclass
class _Request:
    prompt: list[int]
    params: GenerationParams
    stop_ids: Collection[int]
    cancel: CancelToken
    emit: Emit
    started: float
    trace: TokenTrace | None


@dataclass
class _Row:
    """A request in a row of the batch: where it writes next, its sampling state and its stream."""

    request: _Request
    budget: int
    decoder: IncrementalDecoder
    rng: np.random.Generator
    length: int  # tokens in the cache row so far = the slot the pending token goes to
    produced: list[int] = field(default_factory=list)
    pieces: list[str] = field(default_factory=list)
    pending: int = 0
    ttft_ms: float | None = None

    @property
    def need(self) -> int:
        """Cache slots this row may use by its end."""
        return len(self.request.prompt) + self.budget


class SlotScheduler:
    """Per-model continuous batcher. ``submit`` queues; ``tick`` admits newcomers and steps all rows once.

    Drive it from the model's owner thread (``while scheduler.busy: scheduler.tick()``). Each request's
    ``emit`` receives text deltas, then exactly one :class:`GenerationResult`. Every public method holds
    one lock, so a second thread that submits or ticks (a direct ``stream`` call beside the pool's
    worker) interleaves whole steps instead of corrupting them.
    """

    def __init__(
        self,
        engine: SlotEngine,
        tokenizer: TextTokenizer,
        *,
        batch_buckets: tuple[int, ...] = DEFAULT_BATCH_BUCKETS,
        min_batch: int = 1,
    ) -> None:
        buckets = tuple(sorted(b for b in set(batch_buckets) if b >= min_batch))
        if not buckets:
            raise ValueError(f"no batch bucket is >= the minimum batch {min_batch}")
        self.engine = engine
        self.tokenizer = tokenizer
        self.batch_buckets = buckets
        self._incoming: list[_Request] = []
        self.rows: list[_Row | None] = []
        self.cache: Any = None
        self.slots = 0
        self.steps = 0  # decode device calls so far
        self._lock = threading.RLock()

    # ---- public API -----------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return bool(self._incoming) or any(r is not None for r in self.rows)

    @property
    def active(self) -> int:
        return len(self._incoming) + self.running

    @property
    def running(self) -> int:
        return sum(r is not None for r in self.rows)

    @property
    def max_batch(self) -> int:
        return self.batch_buckets[-1]

    def submit(
        self,
        prompt_ids: list[int],
        params: GenerationParams,
        *,
        stop_ids: Collection[int],
        emit: Emit,
        cancel: CancelToken | None = None,
        started: float | None = None,
        trace: TokenTrace | None = None,
    ) -> None:
        """Queue one request; it starts at the next ``tick`` with a free row. Bad input ends in an error."""
        started = time.perf_counter() if started is None else started
        request = _Request(list(prompt_ids), params, stop_ids, cancel or CancelToken(), emit, started, trace)
        with self._lock:
            self._incoming.append(request)

    def tick(self) -> None:
        """Admit what fits, step every row once, compact. A device failure ends every request in flight
        with an ``"error"`` result (keeping the text each had shown) and leaves the scheduler usable."""
        with self._lock:
            try:
                self._admit()
                if self.running:
                    self._step()
                self._settle()
                if not self._incoming:
                    self._shrink()
            except Exception as exc:
                self._end_all("error", f"{type(exc).__name__}: {exc}")

    def cancel_all(self) -> None:
        """End every request, queued or running, as ``"cancelled"`` (the pool is closing)."""
        with self._lock:
            self._end_all("cancelled")

    def warm_up(self, *, prompt_tokens: int, new_tokens: int, batches: tuple[int, ...] | None = None) -> None:
        """Compile the programs a request of this size uses, at each batch size in ``batches``."""
        prompt_tokens = max(1, min(prompt_tokens, self.engine.max_length - 1))
        slots = self.engine.cache_length_for(min(prompt_tokens + new_tokens, self.engine.max_length))
        with self._lock:
            _, row = self.engine.prefill([0] * prompt_tokens, temperature=1.0)
            for batch in batches or self.batch_buckets[:1]:
                cache = self.engine.empty(batch=batch, slots=slots)
                cache = self.engine.insert(cache, row, 0)
                zeros = np.zeros((batch,), "int32")
                self.engine.step(cache, zeros, zeros, np.ones((batch,), "float32"))

    # ---- admission ------------------------------------------------------------------------------

    def _budget(self, request: _Request) -> int:
        return min(request.params.max_new_tokens, self.engine.max_length - len(request.prompt))

    def _admit(self) -> None:
        waiting, self._incoming = self._incoming, []
        for request in waiting:
            if request.cancel.cancelled:
                self._end_request(request, "cancelled")
            elif not request.prompt or self._budget(request) < 1:
                self._end_request(request, "error", f"ValueError: prompt of {len(request.prompt)} tokens "
                                  f"leaves no room in {self.engine.max_length}")
            elif self.running < self.max_batch:
                self._place(request)
            else:
                self._incoming.append(request)  # every row is busy: it starts when one frees

    def _place(self, request: _Request) -> None:
        need = len(request.prompt) + self._budget(request)
        running = [r for r in self.rows if r is not None]
        slots = self.engine.cache_length_for(max([need] + [r.need for r in running]))
        batch = next(b for b in self.batch_buckets if b >= len(running) + 1)
        if self.cache is None:
            self.cache = self.engine.empty(batch=batch, slots=slots)
            self.rows, self.slots = [None] * batch, slots
        elif slots > self.slots or batch > len(self.rows) or None not in self.rows:
            self._reshape(batch=max(batch, len(self.rows)), slots=max(slots, self.slots))
        slot = self.rows.index(None)
        candidates, row_cache = self.engine.prefill(request.prompt, temperature=request.params.temperature)
        self.cache = self.engine.insert(self.cache, row_cache, slot)
        row = _Row(request=request, budget=self._budget(request), decoder=IncrementalDecoder(self.tokenizer),
                   rng=np.random.default_rng(request.params.seed), length=len(request.prompt))
        self.rows[slot] = row if self._accept(row, self._sample(row, candidates, 0)) else None

    def _reshape(self, *, batch: int, slots: int) -> None:
        """Move the running rows to the front of a ``batch`` x ``slots`` cache."""
        keep = [i for i, r in enumerate(self.rows) if r is not None]
        self.cache = self.engine.resize(self.cache, keep, batch=batch, slots=slots)
        self.rows = [self.rows[i] for i in keep] + [None] * (batch - len(keep))
        self.slots = slots

    def _shrink(self) -> None:
        """Fewer rows or shorter replies than the cache holds: compact into the smallest buckets."""
        running = [r for r in self.rows if r is not None]
        if not running:
            self.cache, self.rows, self.slots = None, [], 0
            return
        batch = next(b for b in self.batch_buckets if b >= len(running))
        slots = self.engine.cache_length_for(max(r.need for r in running))
        if batch < len(self.rows) or slots < self.slots:
            self._reshape(batch=batch, slots=slots)

    # ---- decoding -------------------------------------------------------------------------------

    def _step(self) -> None:
        batch = len(self.rows)
        tokens = np.zeros((batch,), "int32")
        index = np.zeros((batch,), "int32")  # a free row writes its slot 0: nobody reads it
        temperatures = np.ones((batch,), "float32")
        for i, row in enumerate(self.rows):
            if row is not None:
                tokens[i], index[i], temperatures[i] = row.pending, row.length, row.request.params.temperature
        candidates, self.cache = self.engine.step(self.cache, tokens, index, temperatures)
        self.steps += 1
        for i, row in enumerate(self.rows):
            if row is not None:
                row.length += 1
                if not self._accept(row, self._sample(row, candidates, i)):
                    self.rows[i] = None

    @staticmethod
    def _sample(row: _Row, candidates: Candidates, i: int) -> int:
        return sample_from_candidates(
            candidates.values[i], candidates.ids[i], float(candidates.log_normalizer[i]),
            row.request.params, row.rng, lambda: candidates.full_row(i),
        )

    def _settle(self) -> None:
        """Rows whose visitor cancelled leave at this step boundary."""
        for i, row in enumerate(self.rows):
            if row is not None and row.request.cancel.cancelled:
                self._finish(row, "cancelled")
                self.rows[i] = None

    def _accept(self, row: _Row, token: int) -> bool:
        """Record a sampled token; False (and the result emitted) when the row is finished."""
        if row.ttft_ms is None:
            row.ttft_ms = (time.perf_counter() - row.request.started) * 1000
        if token in row.request.stop_ids:
            self._finish(row, "stop")
            return False
        row.produced.append(token)
        row.pending = token
        text = row.decoder.push(token)
        if text:
            row.pieces.append(text)
            row.request.emit(TextDelta(text))
        if len(row.produced) >= row.budget:
            self._finish(row, "length")
            return False
        return True

    # ---- endings --------------------------------------------------------------------------------

    def _finish(self, row: _Row, reason: FinishReason, error: str | None = None) -> None:
        tail = row.decoder.flush()
        if tail:
            row.pieces.append(tail)
            row.request.emit(TextDelta(tail))
        request = row.request
        request.emit(GenerationResult(
            text="".join(row.pieces), finish_reason=reason, prompt_tokens=len(request.prompt),
            new_tokens=len(row.produced), ttft_ms=row.ttft_ms,
            total_ms=(time.perf_counter() - request.started) * 1000, error=error,
        ))
        if request.trace is not None:
            request.trace.ids = list(row.produced)

    def _end_request(self, request: _Request, reason: FinishReason, error: str | None = None) -> None:
        request.emit(GenerationResult(
            text="", finish_reason=reason, prompt_tokens=len(request.prompt), new_tokens=0, ttft_ms=None,
            total_ms=(time.perf_counter() - request.started) * 1000, error=error,
        ))
        if request.trace is not None:
            request.trace.ids = []

    def _end_all(self, reason: FinishReason, error: str | None = None) -> None:
        waiting, self._incoming = self._incoming, []
        for request in waiting:
            self._end_request(request, reason, error)
        for row in self.rows:
            if row is not None:
                self._finish(row, reason, error)
        self.rows, self.cache, self.slots = [], None, 0
