"""The generation loop: prefill, then one compiled step per token, streaming text as it is produced."""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass

import numpy as np

from inference.engine.decoding import IncrementalDecoder
from inference.engine.runner import KVRunner
from inference.engine.sampling import sample_token
from inference.families.base import TextTokenizer
from inference.protocol import CancelToken, FinishReason, GenerationParams, GenerationResult, TextDelta


@dataclass
class TokenTrace:
    """The ids a generation produced (stop token excluded), for tests and benchmarks."""

    ids: list[int]


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
) -> Iterator[TextDelta | GenerationResult]:
    """Yield :class:`TextDelta` events, then one :class:`GenerationResult`.

    ``started`` is a ``time.perf_counter()`` stamp of when the request arrived (queue time counts in
    ``ttft_ms``/``total_ms``: it is what the visitor waits). New tokens are capped so prompt + reply fit
    the runner's maximum length; hitting either cap finishes with ``"length"``. Exceptions propagate:
    the caller turns them into an ``"error"`` result.
    """
    t0 = time.perf_counter() if started is None else started
    cancel = cancel or CancelToken()
    budget = min(params.max_new_tokens, runner.max_length - len(prompt_ids))
    if budget < 1:
        raise ValueError(f"prompt of {len(prompt_ids)} tokens leaves no room in {runner.max_length}")
    rng = np.random.default_rng(params.seed)
    decoder = IncrementalDecoder(tokenizer)
    pieces: list[str] = []
    produced: list[int] = []
    ttft_ms: float | None = None
    finish: FinishReason = "length"

    if cancel.cancelled:
        finish = "cancelled"
    else:
        cache_length = runner.cache_length_for(len(prompt_ids) + budget)
        logits, cache = runner.prefill(prompt_ids, cache_length=cache_length)
        index = len(prompt_ids)
        while True:
            token = sample_token(logits, params, rng)
            if ttft_ms is None:
                ttft_ms = (time.perf_counter() - t0) * 1000
            if token in stop_ids:
                finish = "stop"
                break
            produced.append(token)
            text = decoder.push(token)
            if text:
                pieces.append(text)
                yield TextDelta(text)
            if len(produced) >= budget:
                break
            if cancel.cancelled:
                finish = "cancelled"
                break
            logits, cache = runner.step(cache, token, index)
            index += 1
    tail = decoder.flush()
    if tail:
        pieces.append(tail)
        yield TextDelta(tail)
    if trace is not None:
        trace.ids = produced
    yield GenerationResult(
        text="".join(pieces),
        finish_reason=finish,
        prompt_tokens=len(prompt_ids),
        new_tokens=len(produced),
        ttft_ms=ttft_ms,
        total_ms=(time.perf_counter() - t0) * 1000,
    )
