"""keras-hub's cached forward pass as an engine: jitted prefill and single-step decode over a CausalLM's
own KV-cache internals (:class:`KVRunner`), behind the batcher's prefill/step interface
(:class:`KerasEngine`, one row: keras-hub writes a whole batch at one cache index).

keras-hub's ``generate()`` compiles one while-loop per (max_length, stop tokens, sampler) and cannot
stream. Here we compile two small functions instead: ``prefill`` (prompt -> last logits + cache) and
``step`` (one token + cache -> logits + cache), with the weights passed as arguments through a
``keras.StatelessScope`` exactly like keras-hub's own JAX generate function. Sampling happens on the
host, so greedy/temperature/top-p/top-k are plain runtime values and never trigger a recompile.

Shapes are bucketed: the prompt is right-padded to a power-of-two bucket and the cache length is a
power-of-two bucket too, so a handful of compilations serve every request. Padding after the prompt is
harmless: attention is causal, and the decode step overwrites cache slots in order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator
from typing import Any

import numpy as np

from inference.engine.batcher import SlotScheduler, stream_alone
from inference.engine.buckets import cache_bucket, prompt_bucket
from inference.engine.reply import TokenTrace
from inference.engine.sampling import Candidates
from inference.families.base import TextTokenizer
from inference.protocol import CancelToken, GenerationParams, StreamEvent


def causal_lm_for(backbone: Any) -> Any:
    """The keras-hub CausalLM task wrapping ``backbone`` (no preprocessor: we tokenize ourselves)."""
    import keras_hub

    from inference.families import causal_lm_class

    task_name = causal_lm_class(backbone)
    if task_name is None:
        raise TypeError(f"no streaming support for backbone {type(backbone).__name__}")
    return getattr(keras_hub.models, task_name)(backbone=backbone, preprocessor=None)


class KVRunner:
    """Owns the compiled prefill/step functions of one model. Use from one thread (the model's owner)."""

    def __init__(self, causal_lm: Any, *, max_length: int) -> None:
        import jax
        import keras

        self.lm = causal_lm
        self.max_length = max_length
        self.vocabulary_size = int(causal_lm.backbone.vocabulary_size)
        from inference.families import family_of_backbone

        record = family_of_backbone(causal_lm.backbone)
        self._per_layer_cache = record is not None and record.kv_cache == "per_layer"
        self._threads: set[str] = set()
        lm = causal_lm

        def stateless(fn: Callable[..., Any]) -> Callable[..., Any]:
            def wrapped(state: Any, *args: Any) -> Any:
                trainable, non_trainable = state
                mapping = list(zip(lm.trainable_variables, trainable, strict=True))
                mapping += list(zip(lm.non_trainable_variables, non_trainable, strict=True))
                with keras.StatelessScope(state_mapping=mapping):
                    return fn(*args)

            return wrapped

        def prefill(token_ids: Any, length: Any, cache_length: int) -> Any:
            cache = self._empty_cache(cache_length)
            logits, _, cache = lm.call_with_cache(token_ids, cache, 0)
            last = jax.lax.dynamic_index_in_dim(logits[0], length - 1, axis=0, keepdims=False)
            return last.astype("float32"), cache

        def step(cache: Any, token: Any, index: Any) -> Any:
            logits, _, cache = lm.call_with_cache(token, cache, index)
            return logits[0, 0].astype("float32"), cache

        self._prefill = jax.jit(stateless(prefill), static_argnums=(3,))
        self._step = jax.jit(stateless(step), donate_argnums=(1,))
        self._compiled: set[tuple[str, int, int]] = set()

    def _state(self) -> tuple[list[Any], list[Any]]:
        # ``v.value`` keeps a distribution's sharding on the arrays.
        return (
            [v.value for v in self.lm.trainable_variables],
            [v.value for v in self.lm.non_trainable_variables],
        )

    def _empty_cache(self, length: int) -> Any:
        from keras import ops

        backbone = self.lm.backbone
        kv_heads = backbone.num_key_value_heads
        head_dim = getattr(backbone, "head_dim", None) or backbone.hidden_dim // backbone.num_query_heads
        dtype = self.lm.compute_dtype
        if self._per_layer_cache:
            shape = [1, length, kv_heads, head_dim]
            return tuple((ops.zeros(shape, dtype=dtype), ops.zeros(shape, dtype=dtype))
                         for _ in range(backbone.num_layers))
        return ops.zeros([1, backbone.num_layers, 2, length, kv_heads, head_dim], dtype=dtype)

    def cache_length_for(self, total: int) -> int:
        """The cache bucket that holds ``total`` tokens (prompt + new)."""
        return cache_bucket(total, max_length=self.max_length)

    def prefill(self, prompt_ids: list[int], *, cache_length: int) -> tuple[np.ndarray, Any]:
        """Run the prompt; returns the next-token logits (float32, host) and the filled cache."""
        n = len(prompt_ids)
        if not 0 < n <= cache_length:
            raise ValueError(f"prompt of {n} tokens does not fit a cache of {cache_length}")
        width = prompt_bucket(n, max_length=cache_length)
        tokens = np.zeros((1, width), dtype="int32")
        tokens[0, :n] = prompt_ids
        self._compiled.add(("prefill", width, cache_length))
        self._threads.add(threading.current_thread().name)
        logits, cache = self._prefill(self._state(), tokens, np.int32(n), cache_length)
        return np.asarray(logits), cache

    def step(self, cache: Any, token: int, index: int) -> tuple[np.ndarray, Any]:
        """Feed ``token`` at position ``index``; returns the next logits and the updated cache."""
        self._compiled.add(("step", 1, _cache_len(cache)))
        tokens = np.full((1, 1), token, dtype="int32")
        logits, cache = self._step(self._state(), cache, tokens, np.int32(index))
        return np.asarray(logits), cache

    def warm_up(self, *, prompt_tokens: int = 1, new_tokens: int = 1) -> None:
        """Compile the buckets a request of this size uses, so the first visitor does not wait."""
        prompt_tokens = max(1, min(prompt_tokens, self.max_length - 1))
        length = self.cache_length_for(min(prompt_tokens + new_tokens, self.max_length))
        _, cache = self.prefill([0] * prompt_tokens, cache_length=length)
        self.step(cache, 0, prompt_tokens)

    @property
    def threads_used(self) -> set[str]:
        """Names of the threads that ran this model: the pool promises exactly one, its owner."""
        return set(self._threads)

    @property
    def compiled_shapes(self) -> set[tuple[str, int, int]]:
        """(kind, token width, cache length) triples compiled so far: bucketing keeps this small."""
        return set(self._compiled)


def _cache_len(cache: Any) -> int:
    if isinstance(cache, tuple):
        return int(cache[0][0].shape[1])
    return int(cache.shape[3])


class KerasEngine:
    """:class:`KVRunner` behind the batcher's :class:`~inference.engine.batcher.Engine` interface.

    One row (``BATCH_BUCKETS``): a prefill makes the row's cache at the batch cache's full length, so
    ``insert`` is the row itself and nothing ever resizes it. Candidates are the host logits' best.
    """

    BATCH_BUCKETS = (1,)
    reuses_prefixes = False  # one row, made at full length by its prefill: nothing to copy a prefix from

    def __init__(self, runner: KVRunner) -> None:
        self.runner = runner
        self.max_length = runner.max_length

    def cache_length_for(self, total: int) -> int:
        return self.runner.cache_length_for(total)

    def empty(self, *, batch: int, slots: int) -> Any:
        return None  # the row's prefill makes its cache

    def prefill(self, prompt_ids: list[int], *, temperature: float, slots: int) -> tuple[Candidates, Any]:
        logits, cache = self.runner.prefill(prompt_ids, cache_length=slots)
        return Candidates.from_logits(logits[None], np.asarray([temperature])), cache

    def insert(self, cache: Any, row: Any, slot: int) -> Any:
        if slot != 0:
            raise ValueError("keras-hub's engine serves one row")
        return row

    def step(
        self, cache: Any, tokens: np.ndarray, index: np.ndarray, temperatures: np.ndarray
    ) -> tuple[Candidates, Any]:
        logits, cache = self.runner.step(cache, int(tokens[0]), int(index[0]))
        return Candidates.from_logits(logits[None], np.asarray(temperatures, "float64")), cache

    def resize(self, cache: Any, rows: list[int], *, batch: int, slots: int) -> Any:
        if rows:  # the batcher sizes a lone row's cache when it starts: never reached
            raise ValueError("keras-hub's engine does not resize a running row's cache")
        return None

    @property
    def compiled_shapes(self) -> set[tuple[str, int, int]]:
        return self.runner.compiled_shapes

    @property
    def threads_used(self) -> set[str]:
        return self.runner.threads_used


def generate_stream(
    runner: KVRunner,
    tokenizer: TextTokenizer,
    prompt_ids: list[int],
    params: GenerationParams,
    *,
    stop_ids: Collection[int],
    cancel: CancelToken | None = None,
    started: float | None = None,
    trace: TokenTrace | None = None,
) -> Iterator[StreamEvent]:
    """One request through keras-hub's forward pass alone (the reference the fast engine is tested
    against): text deltas, then one result. ``started``: when the request arrived (queue time counts)."""
    batcher = SlotScheduler(KerasEngine(runner), tokenizer, batch_buckets=KerasEngine.BATCH_BUCKETS)
    yield from stream_alone(batcher, prompt_ids, params, stop_ids=stop_ids, cancel=cancel, started=started,
                            trace=trace)
