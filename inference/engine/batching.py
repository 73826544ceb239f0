"""Dynamic batching: many requests share one compiled decode step, each with its own stream.

Why ``vmap``: keras-hub's ``call_with_cache`` takes one cache index for the whole batch, so rows at
different positions could only share a step in lockstep (keras-hub's ``generate()`` feeds the longer
prompts' own tokens until the shortest catches up: a long prompt then waits one step per token of
difference). We instead ``jax.vmap`` the batch-1 step over the rows, each with its own cache index: the
weights are shared (one batched matmul per layer), the cache writes become a scatter, and every row
keeps its true positions, so the output is the batch-1 output, token for token.

A newcomer never waits for a running generation to end. At a step boundary it is prefilled on its own
and its cache row is copied into a free slot of a group (one cache per group, with a cache-length
bucket that fits it); if no group has room it opens a new one, and the groups take turns, one step
each. Requests that arrive together are prefilled together.

Shapes are bucketed: batch (``batch_buckets``), prompt width and cache length (powers of two), so a
handful of compilations serve every mix of requests. Sampling, stop tokens and cancellation are per row
and on the host, as in :func:`inference.engine.generate.generate_stream`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from inference.engine.decoding import IncrementalDecoder
from inference.engine.generate import TokenTrace
from inference.engine.runner import MIN_PROMPT_BUCKET, KVRunner, bucket
from inference.engine.sampling import sample_token
from inference.families.base import TextTokenizer
from inference.protocol import CancelToken, FinishReason, GenerationParams, GenerationResult, StreamEvent

Emit = Callable[[StreamEvent], None]
DEFAULT_BATCH_BUCKETS = (1, 4, 8)


class BatchRunner:
    """Compiled batched prefill, decode step and row insertion for one model (owner thread only)."""

    def __init__(self, runner: KVRunner) -> None:
        import jax
        import keras

        self.base = runner
        lm = runner.lm

        def stateless(fn: Callable[..., Any]) -> Callable[..., Any]:
            def wrapped(state: Any, *args: Any) -> Any:
                trainable, non_trainable = state
                mapping = list(zip(lm.trainable_variables, trainable, strict=True))
                mapping += list(zip(lm.non_trainable_variables, non_trainable, strict=True))
                with keras.StatelessScope(state_mapping=mapping):
                    return fn(*args)

            return wrapped

        def prefill(token_ids: Any, lengths: Any, cache_length: int) -> Any:
            cache = self._empty_cache(token_ids.shape[0], cache_length)
            logits, _, cache = lm.call_with_cache(token_ids, cache, 0)
            last = jax.numpy.take_along_axis(logits, (lengths - 1)[:, None, None], axis=1)[:, 0]
            return last.astype("float32"), cache

        def row_step(cache: Any, token: Any, index: Any) -> Any:
            # One row as a batch of one; ``vmap`` below gives every row its own cache index.
            one = jax.tree.map(lambda a: a[None], cache)
            logits, _, one = lm.call_with_cache(token[None, None], one, index)
            return logits[0, 0].astype("float32"), jax.tree.map(lambda a: a[0], one)

        def step(cache: Any, tokens: Any, indices: Any) -> Any:
            return jax.vmap(row_step)(cache, tokens, indices)

        def insert(cache: Any, row: Any, slot: Any) -> Any:
            return jax.tree.map(
                lambda whole, one: jax.lax.dynamic_update_slice_in_dim(whole, one, slot, axis=0), cache, row
            )

        self._prefill = jax.jit(stateless(prefill), static_argnums=(3,))
        self._step = jax.jit(stateless(step), donate_argnums=(1,))
        self._insert = jax.jit(insert, donate_argnums=(0,))

    def _empty_cache(self, batch: int, length: int) -> Any:
        from keras import ops

        single = self.base._empty_cache(length)
        import jax

        return jax.tree.map(lambda a: ops.zeros((batch, *a.shape[1:]), dtype=a.dtype), single)

    def prefill(self, prompts: list[list[int]], *, batch: int, cache_length: int) -> tuple[np.ndarray, Any]:
        """Prompts right-padded into ``batch`` rows; returns each row's next-token logits and the cache."""
        longest = max(len(p) for p in prompts)
        width = bucket(longest, minimum=min(MIN_PROMPT_BUCKET, cache_length), maximum=cache_length)
        tokens = np.zeros((batch, width), dtype="int32")
        lengths = np.ones((batch,), dtype="int32")
        for row, ids in enumerate(prompts):
            tokens[row, : len(ids)] = ids
            lengths[row] = len(ids)
        logits, cache = self._prefill(self.base._state(), tokens, lengths, cache_length)
        return np.asarray(logits), cache

    def step(self, cache: Any, tokens: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, Any]:
        """Feed ``tokens[r]`` at position ``indices[r]`` of row r; returns every row's next logits."""
        logits, cache = self._step(self.base._state(), cache, tokens.astype("int32"), indices.astype("int32"))
        return np.asarray(logits), cache

    def insert(self, cache: Any, row_cache: Any, slot: int) -> Any:
        return self._insert(cache, row_cache, np.int32(slot))


@dataclass
class _Row:
    """One request inside a group: its prompt, sampling state and stream."""

    prompt: list[int]
    params: GenerationParams
    stop_ids: Collection[int]
    cancel: CancelToken
    emit: Emit
    started: float
    budget: int
    decoder: IncrementalDecoder
    rng: np.random.Generator
    trace: TokenTrace | None = None
    produced: list[int] = field(default_factory=list)
    pieces: list[str] = field(default_factory=list)
    pending: int = 0  # the sampled token to feed at position len(prompt) + len(produced) - 1
    ttft_ms: float | None = None


@dataclass
class _Group:
    cache: Any
    cache_length: int
    rows: list[_Row | None]

    def free_slot(self) -> int | None:
        return next((i for i, r in enumerate(self.rows) if r is None), None)


@dataclass
class _Request:
    prompt: list[int]
    params: GenerationParams
    stop_ids: Collection[int]
    cancel: CancelToken
    emit: Emit
    started: float
    trace: TokenTrace | None


class BatchScheduler:
    """Per-model dynamic batcher. ``submit`` queues; ``tick`` admits newcomers and steps every group once.

    Drive it from the model's owner thread: ``while scheduler.busy: scheduler.tick()``, submitting
    whatever arrived in between (the pool's worker does this). Events reach each request's ``emit``:
    text deltas, then exactly one :class:`GenerationResult`. ``trace`` (optional, tests/benchmarks)
    (per request, tests/benchmarks) receives its produced ids when it ends.
    """

    def __init__(
        self,
        runner: KVRunner,
        tokenizer: TextTokenizer,
        *,
        batch_buckets: tuple[int, ...] = DEFAULT_BATCH_BUCKETS,
        open_batch: int = 4,
    ) -> None:
        if not batch_buckets or min(batch_buckets) < 1:
            raise ValueError("batch_buckets must be positive sizes")
        self.batch_runner = BatchRunner(runner)
        self.runner = runner
        self.tokenizer = tokenizer
        self.batch_buckets = tuple(sorted(batch_buckets))
        self.open_batch = open_batch
        self._incoming: list[_Request] = []
        self.groups: list[_Group] = []
        self.steps = 0  # decode device calls so far (one per group per tick)

    @property
    def busy(self) -> bool:
        return bool(self._incoming) or any(any(r is not None for r in g.rows) for g in self.groups)

    @property
    def active(self) -> int:
        return len(self._incoming) + sum(r is not None for g in self.groups for r in g.rows)

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
        """Queue one request; it joins a batch at the next ``tick``. Bad input ends it with an error."""
        started = time.perf_counter() if started is None else started
        cancel = cancel or CancelToken()
        self._incoming.append(_Request(list(prompt_ids), params, stop_ids, cancel, emit, started, trace))

    def tick(self) -> None:
        """Admit queued requests, then one decode step per group (the step boundary).

        A failure on the device (out of memory, a bug) ends every request in flight with an
        ``"error"`` result, keeping the text each had shown, and leaves the scheduler empty and usable.
        """
        try:
            self._admit()
            for group in list(self.groups):
                self._step(group)
        except Exception as exc:
            self._fail_all(f"{type(exc).__name__}: {exc}")
            return
        self.groups = [g for g in self.groups if any(r is not None for r in g.rows)]

    def warm_up(self, *, prompt_tokens: int, new_tokens: int) -> None:
        """Compile a group's buckets for requests of this size: open (batched prefill), join, step."""
        prompt_tokens = max(1, min(prompt_tokens, self.runner.max_length - 1))
        cache_length = self.runner.cache_length_for(min(prompt_tokens + new_tokens, self.runner.max_length))
        batch = next(b for b in self.batch_buckets if b >= min(self.open_batch, self.batch_buckets[-1]))
        _, cache = self.batch_runner.prefill([[0] * prompt_tokens], batch=batch, cache_length=cache_length)
        _, row = self.batch_runner.prefill([[0] * prompt_tokens], batch=1, cache_length=cache_length)
        cache = self.batch_runner.insert(cache, row, 0)
        self.batch_runner.step(cache, np.zeros((batch,), "int32"), np.full((batch,), prompt_tokens, "int32"))

    def cancel_all(self) -> None:
        """End every request in flight as ``"cancelled"`` (the pool is closing)."""
        waiting, self._incoming = self._incoming, []
        for request in waiting:
            self._finish_early(request, "cancelled")
        for group in self.groups:
            for row in group.rows:
                if row is not None:
                    self._finish(row, "cancelled")
        self.groups = []

    def _fail_all(self, error: str) -> None:
        waiting, self._incoming = self._incoming, []
        for request in waiting:
            self._finish_early(request, "error", error)
        for group in self.groups:
            for row in group.rows:
                if row is not None:
                    self._finish(row, "error", error)
        self.groups = []

    # ---- admission ------------------------------------------------------------------------------

    def _budget(self, request: _Request) -> int:
        return min(request.params.max_new_tokens, self.runner.max_length - len(request.prompt))

    def _admit(self) -> None:
        waiting, self._incoming = self._incoming, []
        fresh: list[_Request] = []
        for request in waiting:
            if request.cancel.cancelled:
                self._finish_early(request, "cancelled")
            elif not request.prompt or self._budget(request) < 1:
                self._finish_early(request, "error", f"ValueError: prompt of {len(request.prompt)} tokens "
                                   f"leaves no room in {self.runner.max_length}")
            elif not self._join(request):
                fresh.append(request)
        largest = self.batch_buckets[-1]
        for start in range(0, len(fresh), largest):
            self._open_group(fresh[start : start + largest])

    def _join(self, request: _Request) -> bool:
        """Put ``request`` into a running group's free slot if its positions line up (see module doc)."""
        need = len(request.prompt) + self._budget(request)
        for group in self.groups:
            slot = group.free_slot()
            if slot is None or need > group.cache_length:
                continue
            logits, row_cache = self.batch_runner.prefill([request.prompt], batch=1,
                                                          cache_length=group.cache_length)
            group.cache = self.batch_runner.insert(group.cache, row_cache, slot)
            group.rows[slot] = self._start_row(request, logits[0])
            return True
        return False

    def _open_group(self, requests: list[_Request]) -> None:
        need = max(len(r.prompt) + self._budget(r) for r in requests)
        cache_length = self.runner.cache_length_for(need)
        want = max(len(requests), min(self.open_batch, self.batch_buckets[-1]))
        batch = next(b for b in self.batch_buckets if b >= min(want, self.batch_buckets[-1]))
        logits, cache = self.batch_runner.prefill([r.prompt for r in requests], batch=batch,
                                                  cache_length=cache_length)
        rows: list[_Row | None] = [None] * batch
        for i, request in enumerate(requests):
            rows[i] = self._start_row(request, logits[i])
        group = _Group(cache=cache, cache_length=cache_length, rows=rows)
        self._settle(group)
        self.groups.append(group)

    def _start_row(self, request: _Request, logits: np.ndarray) -> _Row | None:
        row = _Row(prompt=request.prompt, params=request.params, stop_ids=request.stop_ids,
                   cancel=request.cancel, emit=request.emit, started=request.started,
                   budget=self._budget(request), decoder=IncrementalDecoder(self.tokenizer),
                   rng=np.random.default_rng(request.params.seed), trace=request.trace)
        return row if self._accept(row, sample_token(logits, row.params, row.rng)) else None

    # ---- decoding -------------------------------------------------------------------------------

    def _step(self, group: _Group) -> None:
        batch = len(group.rows)
        tokens = np.zeros((batch,), dtype="int32")
        indices = np.zeros((batch,), dtype="int32")  # a free slot writes position 0 of its own row
        for i, row in enumerate(group.rows):
            if row is not None:
                tokens[i] = row.pending
                indices[i] = len(row.prompt) + len(row.produced) - 1
        logits, group.cache = self.batch_runner.step(group.cache, tokens, indices)
        self.steps += 1
        for i, row in enumerate(group.rows):
            if row is not None and not self._accept(row, sample_token(logits[i], row.params, row.rng)):
                group.rows[i] = None
        self._settle(group)

    def _settle(self, group: _Group) -> None:
        """Rows whose visitor cancelled leave at this step boundary; their slot is free for the next."""
        for i, row in enumerate(group.rows):
            if row is not None and row.cancel.cancelled:
                self._finish(row, "cancelled")
                group.rows[i] = None

    def _accept(self, row: _Row, token: int) -> bool:
        """Record a sampled token; False (and the result emitted) when the row is finished."""
        if row.ttft_ms is None:
            row.ttft_ms = (time.perf_counter() - row.started) * 1000
        if token in row.stop_ids:
            self._finish(row, "stop")
            return False
        row.produced.append(token)
        row.pending = token
        text = row.decoder.push(token)
        if text:
            row.pieces.append(text)
            row.emit(_delta(text))
        if len(row.produced) >= row.budget:
            self._finish(row, "length")
            return False
        return True

    def _finish(self, row: _Row, reason: FinishReason, error: str | None = None) -> None:
        tail = row.decoder.flush()
        if tail:
            row.pieces.append(tail)
            row.emit(_delta(tail))
        row.emit(GenerationResult(
            text="".join(row.pieces), finish_reason=reason, prompt_tokens=len(row.prompt),
            new_tokens=len(row.produced), ttft_ms=row.ttft_ms,
            total_ms=(time.perf_counter() - row.started) * 1000, error=error,
        ))
        if row.trace is not None:
            row.trace.ids = list(row.produced)

    def _finish_early(self, request: _Request, reason: FinishReason, error: str | None = None) -> None:
        request.emit(GenerationResult(
            text="", finish_reason=reason, prompt_tokens=len(request.prompt), new_tokens=0, ttft_ms=None,
            total_ms=(time.perf_counter() - request.started) * 1000, error=error,
        ))


def _delta(text: str) -> StreamEvent:
    from inference.protocol import TextDelta

    return TextDelta(text)
