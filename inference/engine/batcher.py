"""Continuous batching over an engine: one batch cache per model whose rows are requests.

Every :meth:`SlotScheduler.tick` is a step boundary: requests that arrived are prefilled one by one and
copied into free rows (so a newcomer starts within one step, never behind a whole reply), then every
row advances one token in ONE device call. Any :class:`Engine` serves: the fast engine
(:class:`inference.engine.fast_engine.SlotEngine`) and keras-hub's cached forward pass
(:class:`inference.engine.keras_engine.KerasEngine`, one row). Rows keep their own positions, so each
reply is what the request would get alone. The batch grows through the ``batch_buckets`` as requests
arrive and shrinks (rows compacted) when they leave; the cache length follows the longest row's prompt
+ reply budget, in powers of two. Sampling is per row, on the host; each row's stop tokens, budget,
streamed text and timings are its :class:`~inference.engine.reply.Reply`'s.

Prefix reuse: a prompt that begins like the tokens another row's cache holds -- a running row, or one of
the last ``keep_rows`` finished replies, kept for this -- copies that row and prefills only the rest
(:meth:`Engine.extend`). That is the arena's common case: a correction turn re-sends the whole dialogue
so far, and every scenario dialogue starts with the same system prompt. The copied keys and values are
the ones the other row computed (in a decode step, for its reply's tokens), so a reused row's floats
may differ from a fresh prefill's in the last bits, as another batch size's do. A prompt that *is*
another row's whole prompt (a reliability run's next attempt, several samples of one request, visitors
sending the same opening) runs nothing: each row keeps the logits its prompt ended with (on the device),
and the repeat copies the row and samples from those, exactly what its own prefill would give.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import numpy as np

from inference.engine.reply import Emit, Reply, TokenTrace
from inference.engine.sampling import Candidates, sample_row
from inference.families.base import TextTokenizer
from inference.protocol import (
    CancelToken,
    FinishReason,
    GenerationParams,
    GenerationResult,
    StreamEvent,
    error_text,
)

DEFAULT_BATCH_BUCKETS = (1, 2, 4, 8, 16)
DEFAULT_KEEP_ROWS = 4  # finished replies' cache rows kept for prefix reuse, per model
MIN_REUSED_PREFIX = 32  # tokens: a shorter shared prefix is prefilled again (not worth copying a row)


class Engine(Protocol):
    """The prefill/step interface the batcher drives: one model's compiled programs over a batch cache.

    ``prefill`` runs one prompt into a row cache (``slots``: the batch cache's length, for an engine
    whose rows are made at full length), ``insert`` copies the row into row ``slot`` of the batch cache,
    ``step`` feeds every row one token at its own index, ``resize`` keeps some rows in a new shape.
    An engine whose ``reuses_prefixes`` is true is also a :class:`PrefixEngine`.
    """

    max_length: int
    reuses_prefixes: bool

    def cache_length_for(self, total: int) -> int: ...

    def empty(self, *, batch: int, slots: int) -> Any: ...

    def prefill(self, prompt_ids: list[int], *, temperature: float, slots: int) -> tuple[Candidates, Any]: ...

    def insert(self, cache: Any, row: Any, slot: int) -> Any: ...

    def step(
        self, cache: Any, tokens: np.ndarray, index: np.ndarray, temperatures: np.ndarray
    ) -> tuple[Candidates, Any]: ...

    def resize(self, cache: Any, rows: list[int], *, batch: int, slots: int) -> Any: ...


class PrefixEngine(Engine, Protocol):
    """An engine that continues a row holding a prompt's prefix: ``prompt_width_for`` (a suffix's padded
    width) and ``extend`` (run the suffix into a ``resize`` of another reply's row)."""

    def prompt_width_for(self, length: int) -> int: ...

    def extend(
        self, row: Any, start: int, suffix_ids: list[int], *, temperature: float
    ) -> tuple[Candidates, Any]: ...


@dataclass
class _Row:
    """A reply in a row of the batch: where it writes next and the token it feeds there."""

    reply: Reply
    length: int  # tokens in the cache row so far = the slot the pending token goes to
    prompt_logits: Any  # (1, vocab), the logits after the prompt's last token (may stay on the device)
    pending: int = 0

    @property
    def cached_ids(self) -> list[int]:
        """The tokens whose keys and values the row's first ``length`` slots hold."""
        return (self.reply.prompt + self.reply.produced)[: self.length]


@dataclass(frozen=True)
class _Kept:
    """A finished reply's cache row (batch 1), kept for a later prompt that begins with its tokens."""

    ids: tuple[int, ...]
    cache: Any
    slots: int  # the row's cache length: its own length's bucket
    prompt_length: int  # ids[:prompt_length] was the reply's prompt ...
    prompt_logits: Any  # ... and these its logits after it


@dataclass(frozen=True)
class _Source:
    """Where a new prompt's first ``start`` tokens are cached: row ``index`` of ``cache``; ``logits``
    (the logits after them) when they are that row's whole prompt and the new prompt's too."""

    cache: Any
    index: int
    start: int
    logits: Any = None


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` have in common."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class SlotScheduler:
    """Per-model continuous batcher. ``submit`` queues; ``tick`` admits newcomers and steps all rows once.

    Drive it from the model's owner thread with :meth:`run_until` (every caller does: the pool's worker
    and a direct ``stream`` alike). Each request's ``emit`` receives text deltas, then exactly one
    :class:`GenerationResult`. Every public method holds one lock, so a second thread that submits or
    ticks (a direct ``stream`` call beside the pool's worker) interleaves whole steps instead of
    corrupting them.
    """

    def __init__(
        self,
        engine: Engine,
        tokenizer: TextTokenizer,
        *,
        batch_buckets: tuple[int, ...] = DEFAULT_BATCH_BUCKETS,
        min_batch: int = 1,
        keep_rows: int = DEFAULT_KEEP_ROWS,
    ) -> None:
        """``keep_rows``: finished replies kept for prefix reuse (0: no prefix is ever reused; an engine
        that cannot ``extend`` never reuses one)."""
        if keep_rows < 0:
            raise ValueError(f"keep_rows must be >= 0, not {keep_rows}")
        buckets = tuple(sorted(b for b in set(batch_buckets) if b >= min_batch))
        if not buckets:
            raise ValueError(f"no batch bucket is >= the minimum batch {min_batch}")
        self.engine = engine
        self.tokenizer = tokenizer
        self.batch_buckets = buckets
        self._incoming: list[Reply] = []
        self.rows: list[_Row | None] = []
        self.cache: Any = None
        self.slots = 0
        self.steps = 0  # decode device calls so far
        self.keep_rows = keep_rows if engine.reuses_prefixes else 0
        self._kept: list[_Kept] = []  # oldest first
        self.prefilled_tokens = 0  # prompt tokens run through the model so far
        self.reused_tokens = 0  # prompt tokens copied from another row's cache instead
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
    def kept_rows(self) -> int:
        """Finished replies' cache rows kept for prefix reuse now."""
        return len(self._kept)

    @property
    def kept_slots(self) -> list[int]:
        """The cache length of each kept row, oldest first: its own length's bucket."""
        return [kept.slots for kept in self._kept]

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
        reply = Reply(list(prompt_ids), params, stop_ids=stop_ids, tokenizer=self.tokenizer,
                      max_length=self.engine.max_length, emit=emit, cancel=cancel, started=started,
                      trace=trace)
        with self._lock:
            self._incoming.append(reply)

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
                self._end_all("error", error_text(exc))

    def run_until(self, done: Callable[[], bool]) -> None:
        """The tick loop: tick until ``done()`` (checked before every tick) or nothing is left to run."""
        while self.busy and not done():
            self.tick()

    def forget_prefixes(self) -> None:
        """Drop the kept rows: the next prompts prefill from scratch (benchmarks start each round cold,
        as llama.cpp's own reset does)."""
        with self._lock:
            self._kept = []

    def cancel_all(self) -> None:
        """End every request, queued or running, as ``"cancelled"`` (the pool is closing)."""
        with self._lock:
            self._end_all("cancelled")

    def warm_up(self, *, prompt_tokens: int, new_tokens: int, batches: tuple[int, ...] | None = None) -> None:
        """Compile the programs a request of this size uses, at each batch size in ``batches``."""
        prompt_tokens = max(1, min(prompt_tokens, self.engine.max_length - 1))
        slots = self.engine.cache_length_for(min(prompt_tokens + new_tokens, self.engine.max_length))
        with self._lock:
            _, row = self.engine.prefill([0] * prompt_tokens, temperature=1.0, slots=slots)
            for batch in batches or self.batch_buckets[:1]:
                cache = self.engine.empty(batch=batch, slots=slots)
                cache = self.engine.insert(cache, row, 0)
                zeros = np.zeros((batch,), "int32")
                self.engine.step(cache, zeros, zeros, np.ones((batch,), "float32"))

    # ---- admission ------------------------------------------------------------------------------

    def _admit(self) -> None:
        waiting, self._incoming = self._incoming, []
        for reply in waiting:
            if reply.cancel.cancelled:
                reply.finish("cancelled")
            elif reply.room_error is not None:
                reply.finish("error", error_text(reply.room_error))
            elif self.running < self.max_batch:
                self._place(reply)
            else:
                self._incoming.append(reply)  # every row is busy: it starts when one frees

    def _place(self, reply: Reply) -> None:
        running = [r for r in self.rows if r is not None]
        slots = self.engine.cache_length_for(max([reply.need] + [r.reply.need for r in running]))
        batch = next(b for b in self.batch_buckets if b >= len(running) + 1)
        if self.cache is None or not running:  # a fresh cache sized for this request alone
            self.cache = self.engine.empty(batch=batch, slots=slots)
            self.rows, self.slots = [None] * batch, slots
        elif slots > self.slots or batch > len(self.rows) or None not in self.rows:
            self._reshape(batch=max(batch, len(self.rows)), slots=max(slots, self.slots))
        slot = self.rows.index(None)
        candidates, row_cache = self._prefill(reply.prompt, reply.params.temperature)
        self.cache = self.engine.insert(self.cache, row_cache, slot)
        row = _Row(reply=reply, length=len(reply.prompt), prompt_logits=candidates.logits)
        self.rows[slot] = row
        if not self._accept(row, self._sample(row, candidates, 0)):
            self._release(slot)

    def _prefill(self, prompt: list[int], temperature: float) -> tuple[Candidates, Any]:
        """The prompt's row for a cache of ``self.slots``: only its suffix is run where another row
        holds its prefix, and nothing where another row's whole prompt was this one."""
        found = self._reusable(prompt)
        if found is None:
            self.prefilled_tokens += len(prompt)
            return self.engine.prefill(prompt, temperature=temperature, slots=self.slots)
        engine = cast(PrefixEngine, self.engine)
        row = engine.resize(found.cache, [found.index], batch=1, slots=self.slots)
        self.reused_tokens += found.start
        if found.logits is not None:
            logits = np.asarray(found.logits, dtype="float32")
            return Candidates.from_logits(logits, np.asarray([temperature], "float32")), row
        self.prefilled_tokens += len(prompt) - found.start
        return engine.extend(row, found.start, prompt[found.start:], temperature=temperature)

    def _reusable(self, prompt: list[int]) -> _Source | None:
        """Where the longest prefix of ``prompt`` a row holds (a running one, else a kept one) is: the
        whole prompt with its logits where a row's prompt was the same, else a prefix shortened so the
        rest's bucket fits the batch cache; None below MIN_REUSED_PREFIX."""
        if not self.keep_rows:
            return None
        sources: list[tuple[Any, int, Sequence[int], int, Any]] = [
            (self.cache, i, r.cached_ids, len(r.reply.prompt), r.prompt_logits)
            for i, r in enumerate(self.rows) if r is not None]
        sources += [(kept.cache, 0, kept.ids, kept.prompt_length, kept.prompt_logits)
                    for kept in reversed(self._kept)]
        best: _Source | None = None
        for cache, index, ids, prompt_length, logits in sources:
            shared = shared_prefix(prompt, ids)
            if prompt_length == len(prompt) and shared >= prompt_length:
                return _Source(cache, index, len(prompt), logits)
            start = self._fit(len(prompt), min(shared, len(prompt) - 1))
            if start >= MIN_REUSED_PREFIX and (best is None or start > best.start):
                best = _Source(cache, index, start)
        return best

    def _fit(self, n: int, start: int) -> int:
        """The longest ``<= start`` prefix after which the rest of ``n`` tokens, padded to its bucket,
        ends inside the batch cache's ``self.slots``."""
        while start >= MIN_REUSED_PREFIX:
            width = cast(PrefixEngine, self.engine).prompt_width_for(n - start)
            if start + width <= self.slots:
                return start
            start = self.slots - width
        return 0

    def _release(self, i: int) -> None:
        """Free row ``i``; a finished reply's row is kept (the newest ``keep_rows``) for prefix reuse."""
        row, self.rows[i] = self.rows[i], None
        if row is None or not self.keep_rows or row.length < MIN_REUSED_PREFIX:
            return
        ids = tuple(row.cached_ids)
        # a kept row whose tokens all begin this one's is covered by it (a dialogue's earlier turn)
        self._kept = [k for k in self._kept if shared_prefix(k.ids, ids) < len(k.ids)]
        # trimmed to its own length's bucket: a short reply that ran beside a long one need not keep
        # the batch cache's length (on Qwen2.5-Coder-1.5B, 2048 slots are 117 MB a row)
        slots = min(self.engine.cache_length_for(len(ids)), self.slots)
        self._kept.append(_Kept(ids, self.engine.resize(self.cache, [i], batch=1, slots=slots), slots,
                                len(row.reply.prompt), row.prompt_logits))
        del self._kept[: -self.keep_rows]

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
        slots = self.engine.cache_length_for(max(r.reply.need for r in running))
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
                tokens[i], index[i], temperatures[i] = row.pending, row.length, row.reply.params.temperature
        candidates, self.cache = self.engine.step(self.cache, tokens, index, temperatures)
        self.steps += 1
        for i, row in enumerate(self.rows):
            if row is not None:
                row.length += 1
                if not self._accept(row, self._sample(row, candidates, i)):
                    self._release(i)

    @staticmethod
    def _sample(row: _Row, candidates: Candidates, i: int) -> int:
        return sample_row(candidates, i, row.reply.params, row.reply.rng)

    def _settle(self) -> None:
        """Rows whose visitor cancelled leave at this step boundary."""
        for i, row in enumerate(self.rows):
            if row is not None and row.reply.cancel.cancelled:
                row.reply.finish("cancelled")
                self._release(i)

    @staticmethod
    def _accept(row: _Row, token: int) -> bool:
        """Record a sampled token; False (and the result emitted) when the row is finished."""
        finish = row.reply.accept(token)
        if finish is not None:
            row.reply.finish(finish)
            return False
        row.pending = token
        return True

    # ---- endings --------------------------------------------------------------------------------

    def _end_all(self, reason: FinishReason, error: str | None = None) -> None:
        waiting, self._incoming = self._incoming, []
        for reply in waiting:
            reply.finish(reason, error)
        for row in self.rows:
            if row is not None:
                row.reply.finish(reason, error)
        self.rows, self.cache, self.slots = [], None, 0
        self._kept = []  # after a failure nothing computed before is trusted


def stream_alone(
    batcher: SlotScheduler,
    prompt_ids: list[int],
    params: GenerationParams,
    *,
    stop_ids: Collection[int],
    cancel: CancelToken | None = None,
    started: float | None = None,
    trace: TokenTrace | None = None,
) -> Iterator[StreamEvent]:
    """One request's events, ticking ``batcher`` on this thread until its result (the caller owns the
    model's thread; other requests in the batcher advance meanwhile). Closing the stream early ends the
    request's row at the next step rather than decode for nobody."""
    events: list[StreamEvent] = []
    own = CancelToken()  # also set when the consumer closes this stream early
    batcher.submit(prompt_ids, params, stop_ids=stop_ids, emit=events.append, cancel=own, started=started,
                   trace=trace)
    finished = False

    def arrived() -> bool:  # an event to hand on; the caller's cancel reaches the row at a step
        if cancel is not None and cancel.cancelled:
            own.cancel()
        return bool(events)

    try:
        while not finished:
            batcher.run_until(arrived)
            if not events:
                raise RuntimeError("the batcher ended a request without a result")
            while events and not finished:
                event = events.pop(0)
                finished = isinstance(event, GenerationResult)
                yield event
    finally:
        if not finished:
            own.cancel()
            batcher.run_until(lambda: any(isinstance(e, GenerationResult) for e in events))
