"""``LocalChatModel``: a keras-hub backbone + tokenizer + chat template behind the ChatModel protocol.

It renders the conversation with the template, trims old turns to fit the context, encodes with the
model file's own tokenizer and streams through the compiled prefill/step engine. Build it, and call it,
on the thread that owns the model's JAX work (the pool does that); a lock keeps direct callers honest.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import gc
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from inference.chat_template import ChatTemplate, fit_to_context
from inference.engine import KerasEngine, KVRunner, TokenTrace, causal_lm_for
from inference.engine.batcher import DEFAULT_KEEP_ROWS, SlotScheduler, stream_alone
from inference.engine.fast_engine import SlotEngine
from inference.engine.stored_weights import StoredWeights
from inference.engine.weight_policy import choose_weights, min_batch_for, served_six_bit
from inference.engine.weights import decoder_spec, extract_params, matrix_formats, native_serving
from inference.families.base import DecoderSpec, LoadedModel, UnsupportedModel
from inference.formats.matrices import SixBit, WeightFormat
from inference.protocol import (
    CancelToken,
    ChatMessage,
    Emit,
    GenerationParams,
    StreamEvent,
    TextDelta,
    error_result,
)

log = logging.getLogger(__name__)


def prefix_cache_rows() -> int:
    """``$ARENA_PREFIX_CACHE_ROWS``: finished replies whose cache rows each model keeps so that a prompt
    beginning with their tokens (the next turn of the dialogue, the same system prompt) prefills only
    the rest; 0 turns prefix reuse off. Default :data:`~inference.engine.batcher.DEFAULT_KEEP_ROWS`."""
    text = os.environ.get("ARENA_PREFIX_CACHE_ROWS", "").strip()
    if not text:
        return DEFAULT_KEEP_ROWS
    if not text.isdigit():
        raise ValueError(f"ARENA_PREFIX_CACHE_ROWS={text!r}: give a whole number of rows >= 0")
    return int(text)


class LocalChatModel:
    """A chat model running in this process. ``context_length`` caps prompt + reply (tokens).

    ``default_system`` is the system prompt the model file's own template adds when a conversation has
    none (SmolLM2's "You are a helpful AI assistant named SmolLM…"); the model was tuned with it.

    ``keep_keras_weights=False`` drops keras-hub's float32 variables once the fast engine holds its own
    copy (the pool does this: half the memory with bfloat16); :attr:`runner` is then unavailable.

    ``weights`` picks the fast engine's weight format (:mod:`inference.engine.weights`); ``stored``:
    its weights in that format as an earlier start converted them (``loaded.backbone`` may then be
    None). Its decoder and continuous batcher serve :meth:`stream` and :meth:`submit`. A backbone the
    fast decoder does not know (``engine is None``; ``engine_note`` says why) is served by the same
    batcher over keras-hub's own cached forward pass (:class:`inference.engine.KerasEngine`), one row
    at a time. It is a :class:`~inference.protocol.BatchingChatModel`: what the pool's workers use.
    """

    def __init__(
        self,
        slug: str,
        loaded: LoadedModel,
        template: ChatTemplate,
        *,
        context_length: int | None = None,
        default_system: str | None = None,
        weights: WeightFormat | Literal["auto"] = "auto",
        keep_keras_weights: bool = True,
        stored: StoredWeights | None = None,
    ) -> None:
        self._slug = slug
        self.default_system = default_system
        self.loaded = loaded
        self.template = template
        self.context_length = min(context_length or loaded.context_length, loaded.context_length)
        self.stop_ids = frozenset(_stop_ids(loaded, template))
        self._lock = threading.Lock()
        self._runner: KVRunner | None = None
        self.engine: SlotEngine | None = None
        self.engine_note = ""
        self.matrix_formats: dict[str, int] = {}  # the fast engine's matrices per format (q4 / q8 ...)
        self.from_store = stored is not None  # its weights were read back as an earlier start stored them
        self.batcher: SlotScheduler  # drives whichever engine serves (the fast one, else keras-hub's)
        self.weight_format, native, why = choose_weights(weights)
        try:
            spec, params = _fast_weights(loaded, self.weight_format, native, stored,
                                         served_six_bit(self.weight_format, native))
        except UnsupportedModel as exc:
            self.engine_note = str(exc)
            log.info("%s: keras-hub forward pass (%s)", slug, exc)
            self.batcher = SlotScheduler(KerasEngine(self.runner), loaded.tokenizer,
                                         batch_buckets=KerasEngine.BATCH_BUCKETS)
        else:
            self.engine = SlotEngine(spec, params, max_length=self.context_length)
            self.engine_note = why
            self.matrix_formats = matrix_formats(params)
            log.info("%s: fast engine, %s weights (%s); matrices per format: %s", slug, self.weight_format,
                     why, self.matrix_formats)
            self.batcher = SlotScheduler(self.engine, loaded.tokenizer,
                                         min_batch=min_batch_for(self.weight_format),
                                         keep_rows=prefix_cache_rows())
            if not keep_keras_weights:  # the fast engine has its own copy: drop keras-hub's float32 one
                # (freed, and the heap handed back, once the caller drops its reference: the builder does)
                self.loaded = dataclasses.replace(loaded, backbone=None)
                del loaded

    @property
    def slug(self) -> str:
        return self._slug

    def __repr__(self) -> str:
        family, template = self.loaded.family, self.template.name
        return f"LocalChatModel(slug={self._slug!r}, family={family!r}, template={template!r})"

    @property
    def runner(self) -> KVRunner:
        """keras-hub's own cached forward pass over the same weights (the fallback, and the reference)."""
        if self._runner is None:
            if self.loaded.backbone is None:
                raise RuntimeError(f"{self._slug}: keras-hub's weights were released "
                                   "(keep_keras_weights=False)")
            self._runner = KVRunner(causal_lm_for(self.loaded.backbone), max_length=self.context_length)
        return self._runner

    @property
    def compiled_shapes(self) -> set[tuple[str, int, int]]:
        """Shapes compiled so far on the serving path (bucketing keeps this small)."""
        return self.engine.compiled_shapes if self.engine is not None else self.runner.compiled_shapes

    @property
    def supports_batching(self) -> bool:
        """Whether concurrent requests share decode steps (the fast engine; keras-hub's serves one row)."""
        return self.batcher.max_batch > 1

    def warm_up(self, *, requests: Sequence[tuple[int, int]] = ((1, 1),)) -> None:
        """Compile now, not during a visitor's request, the buckets of (prompt, new tokens) sizes."""
        with self._lock:
            for prompt_tokens, new_tokens in requests:
                self.batcher.warm_up(prompt_tokens=prompt_tokens, new_tokens=new_tokens)

    def warm_up_batches(
        self, *, prompt_tokens: int, new_tokens: int, batches: Sequence[int] = (2, 4, 8)
    ) -> None:
        """Compile the decode step at these batch sizes (concurrent visitors) for requests of this size."""
        scheduler = self.batcher
        sizes = tuple(sorted({next(b for b in scheduler.batch_buckets if b >= n) for n in batches
                              if n <= scheduler.max_batch}))
        if not sizes:
            return
        with self._lock:
            scheduler.warm_up(prompt_tokens=prompt_tokens, new_tokens=new_tokens, batches=sizes)

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
            emit(error_result(exc, started=started))
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
            ids = self.prompt_ids(messages, params)
            prompt_tokens = len(ids)
            for event in self.stream_ids(ids, params, cancel=cancel, started=started, trace=trace):
                if isinstance(event, TextDelta):
                    partial.append(event.text)
                yield event
        except GeneratorExit:
            raise
        except Exception as exc:  # isolate the failure to this request; keep what was already shown
            yield error_result(exc, started=started, text="".join(partial), prompt_tokens=prompt_tokens)

    def stream_ids(
        self, ids: list[int], params: GenerationParams, *, cancel: CancelToken | None = None,
        started: float | None = None, trace: TokenTrace | None = None,
    ) -> Iterator[StreamEvent]:
        """Generate from prompt ids on the serving path (exceptions propagate; :meth:`stream` wraps them)."""
        yield from stream_alone(self.batcher, ids, params, stop_ids=self.stop_ids, cancel=cancel,
                                started=started, trace=trace)


def _fast_weights(loaded: LoadedModel, weight_format: WeightFormat, native: bool,
                  stored: StoredWeights | None, six_bit: SixBit) -> tuple[DecoderSpec, dict[str, Any]]:
    """The fast engine's spec and params: the ``stored`` ones (converted at an earlier start, in
    ``weight_format``, 6-bit matrices in ``six_bit``), else converted now from the backbone;
    UnsupportedModel for a backbone the fast decoder does not know."""
    if stored is not None:
        if (stored.spec.weight_format, stored.spec.six_bit) != (weight_format, six_bit):
            raise ValueError(f"stored weights are {stored.spec.weight_format} with 6-bit matrices in "
                             f"{stored.spec.six_bit}, not {weight_format} with {six_bit}")
        spec = native_serving(stored.spec, native)
        return spec, stored.params
    spec = decoder_spec(loaded.backbone, weight_format, native_kernels=native, six_bit=six_bit)
    return spec, extract_params(loaded.backbone, spec)


def return_freed_memory() -> None:
    """Collect, then hand the C heap's free pages back to the OS (glibc keeps them otherwise: loading a
    GGUF file frees more than a gigabyte of dequantization buffers that would stay in the RSS)."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _stop_ids(loaded: LoadedModel, template: ChatTemplate) -> set[int]:
    """The template's stop tokens that exist in this vocabulary, plus the tokenizer's end-of-sequence."""
    tokenizer = loaded.tokenizer
    ids = {tokenizer.token_to_id(token) for token in template.stop_tokens}
    ids.add(tokenizer.eos_id)
    found = {i for i in ids if i is not None}
    if not found:
        raise ValueError(f"none of the stop tokens {template.stop_tokens} is in the vocabulary")
    return found
