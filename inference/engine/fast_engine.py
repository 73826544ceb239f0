"""The fast engine's compiled device programs: prefill one prompt (or only the part after a prefix another
reply's cache already holds), insert it as a row of a batch cache, step every row once, and resize the
batch cache. The host-side policy lives in
:mod:`inference.engine.batcher`.

Shapes are bucketed so a handful of programs serve every mix of requests: prompt widths and cache
lengths are powers of two, batch sizes come from ``batch_buckets``. Each program returns, besides the
cache, the K best logits of every row, their ids and the row's log-normaliser at its temperature (what
:func:`inference.engine.sampling.sample_from_candidates` needs): a few hundred bytes cross to the host
per token instead of the whole vocabulary. The full logits stay on the device unless a sampler asks.
"""

from __future__ import annotations

import threading
from functools import partial
from typing import Any

import numpy as np

import inference.engine.kernels as kernels
from inference.engine.buckets import cache_bucket, prompt_bucket
from inference.engine.forward import Cache, empty_cache, forward, output_logits
from inference.engine.sampling import Candidates
from inference.families.base import DecoderSpec

CANDIDATES = 64


def _candidates(logits: Any, temperatures: Any, native: bool = False) -> tuple[Any, Any, Any, Any]:
    """(the K best logits, their ids, the log-normaliser at each row's temperature, the logits); ``native``:
    through the CPU kernels' one pass a row (the model's matmuls are native too) instead of XLA's sort."""
    import jax

    k = min(CANDIDATES, logits.shape[-1])
    if native:
        return (*kernels.candidates(logits, temperatures, k=k), logits)
    values, ids = jax.lax.top_k(logits, k)
    normalizer = jax.nn.logsumexp(logits / temperatures[:, None], axis=-1)
    return values, ids, normalizer, logits


def _prefill(spec: DecoderSpec, params: Any, tokens: Any, length: Any, temperatures: Any) -> Any:
    """One prompt ``(1, W)`` from slot 0 of a fresh row: candidates after its last real token, its row."""
    import jax

    row = empty_cache(spec, batch=1, slots=tokens.shape[1])
    hidden, row = forward(spec, params, row, tokens, jax.numpy.zeros((1,), "int32"), valid=length)
    last = jax.lax.dynamic_index_in_dim(hidden, length - 1, axis=1, keepdims=False)
    return (*_candidates(output_logits(spec, params, last), temperatures, spec.native_kernels), row)


def _extend(spec: DecoderSpec, params: Any, row: Cache, tokens: Any, start: Any, length: Any,
            temperatures: Any) -> Any:
    """A prompt's suffix ``(1, W)`` written from slot ``start`` of a row whose first ``start`` slots
    already hold the prompt's prefix: candidates after its last real token, and the row."""
    import jax

    hidden, row = forward(spec, params, row, tokens, start[None], valid=length)
    last = jax.lax.dynamic_index_in_dim(hidden, length - 1, axis=1, keepdims=False)
    return (*_candidates(output_logits(spec, params, last), temperatures, spec.native_kernels), row)


def _step(spec: DecoderSpec, params: Any, cache: Cache, tokens: Any, index: Any, temperatures: Any) -> Any:
    hidden, cache = forward(spec, params, cache, tokens[:, None], index)
    return (*_candidates(output_logits(spec, params, hidden[:, 0]), temperatures, spec.native_kernels), cache)


def _insert(cache: Cache, row: Cache, slot: Any) -> Cache:
    """Copy a prefilled row (its W slots) into row ``slot`` of the batch cache, from slot 0."""
    import jax

    def put(whole: Any, one: Any) -> Any:
        return jax.lax.dynamic_update_slice(whole, one, (0, slot, 0, 0, 0))

    return put(cache[0], row[0]), put(cache[1], row[1])


def _resize(cache: Cache, rows: Any, batch: int, slots: int) -> Cache:
    """A cache of ``batch`` rows x ``slots``: new row i is old row ``rows[i]`` (its first slots)."""
    import jax.numpy as jnp

    def one(array: Any) -> Any:
        taken = jnp.take(array, rows, axis=1)[:, :, :, : min(slots, array.shape[3])]
        if taken.shape[3] < slots:
            taken = jnp.pad(taken, ((0, 0), (0, 0), (0, 0), (0, slots - taken.shape[3]), (0, 0)))
        return taken

    return one(cache[0]), one(cache[1])


class SlotEngine:
    """Compiled programs of one model over converted weights. Use from one thread (the model's owner)."""

    reuses_prefixes = True  # :meth:`extend` continues a row another reply's cache started

    def __init__(self, spec: DecoderSpec, params: dict[str, Any], *, max_length: int) -> None:
        import jax

        self.spec = spec
        self.params = params
        self.max_length = max_length
        self._prefill = jax.jit(partial(_prefill, spec))
        self._extend = jax.jit(partial(_extend, spec), donate_argnums=(1,))
        self._step = jax.jit(partial(_step, spec), donate_argnums=(1,))
        self._insert = jax.jit(_insert, donate_argnums=(0,))
        self._resize = jax.jit(_resize, static_argnums=(2, 3))
        self._compiled: set[tuple[str, int, int]] = set()
        self._threads: set[str] = set()

    def cache_length_for(self, total: int) -> int:
        return cache_bucket(total, max_length=self.max_length)

    def prompt_width_for(self, length: int) -> int:
        return prompt_bucket(length, max_length=self.max_length)

    def empty(self, *, batch: int, slots: int) -> Cache:
        return empty_cache(self.spec, batch=batch, slots=slots)

    def prefill(
        self, prompt_ids: list[int], *, temperature: float, slots: int = 0
    ) -> tuple[Candidates, Cache]:
        """Run one prompt; the row it returns is as wide as the prompt's bucket (whatever the batch
        cache's ``slots``: :meth:`insert` copies it in)."""
        n = len(prompt_ids)
        if not 0 < n <= self.max_length:
            raise ValueError(f"prompt of {n} tokens does not fit the context of {self.max_length}")
        width = self.prompt_width_for(n)
        tokens = np.zeros((1, width), dtype="int32")
        tokens[0, :n] = prompt_ids
        self._note("prefill", 1, width)
        values, ids, norm, logits, row = self._prefill(
            self.params, tokens, np.int32(n), np.asarray([_safe_temperature(temperature)], "float32")
        )
        return _host(values, ids, norm, logits), row

    def extend(
        self, row: Cache, start: int, suffix_ids: list[int], *, temperature: float
    ) -> tuple[Candidates, Cache]:
        """Run the rest of a prompt, ``suffix_ids``, into ``row`` (one row, given up: it is written in
        place) from slot ``start``: its first ``start`` slots must hold the prompt's first ``start``
        tokens, as another reply computed them. The suffix's bucket must fit in the row after them."""
        n, slots = len(suffix_ids), _slots(row)
        width = self.prompt_width_for(n) if n else 0
        if start <= 0 or not n or start + width > slots:
            raise ValueError(f"a suffix of {n} tokens from slot {start} does not fit a row of {slots} slots")
        tokens = np.zeros((1, width), dtype="int32")
        tokens[0, :n] = suffix_ids
        self._note("extend", width, slots)
        values, ids, norm, logits, row = self._extend(
            self.params, row, tokens, np.int32(start), np.int32(n),
            np.asarray([_safe_temperature(temperature)], "float32"),
        )
        return _host(values, ids, norm, logits), row

    def insert(self, cache: Cache, row: Cache, slot: int) -> Cache:
        return self._insert(cache, row, np.int32(slot))

    def step(
        self, cache: Cache, tokens: np.ndarray, index: np.ndarray, temperatures: np.ndarray
    ) -> tuple[Candidates, Cache]:
        """Feed ``tokens[b]`` at slot ``index[b]`` of every row; candidates for each row's next token."""
        self._note("step", int(tokens.shape[0]), _slots(cache))
        values, ids, norm, logits, cache = self._step(
            self.params, cache, tokens.astype("int32"), index.astype("int32"),
            np.asarray([_safe_temperature(t) for t in temperatures], "float32"),
        )
        return _host(values, ids, norm, logits), cache

    def resize(self, cache: Cache, rows: list[int], *, batch: int, slots: int) -> Cache:
        """Keep ``rows`` (in that order) as rows 0.. of a ``batch`` x ``slots`` cache; the rest are free."""
        order = np.zeros((batch,), "int32")
        order[: len(rows)] = rows
        return self._resize(cache, order, batch, slots)

    def _note(self, kind: str, batch: int, width: int) -> None:
        self._compiled.add((kind, batch, width))
        self._threads.add(threading.current_thread().name)

    @property
    def compiled_shapes(self) -> set[tuple[str, int, int]]:
        """(kind, batch, prompt width or cache length) of the programs run so far; a continuation
        after a reused prefix is ``("extend", suffix width, row length)``."""
        return set(self._compiled)

    @property
    def threads_used(self) -> set[str]:
        return set(self._threads)


def _slots(cache: Cache) -> int:
    return int(cache[0].shape[3])


def _safe_temperature(temperature: float) -> float:
    return temperature if temperature > 0 else 1.0


def _host(values: Any, ids: Any, norm: Any, logits: Any) -> Candidates:
    return Candidates(np.asarray(values), np.asarray(ids), np.asarray(norm), logits)
