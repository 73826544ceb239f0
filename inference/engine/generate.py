"""The generation loop: prefill, then one compiled step per token, streaming text as it is produced."""

from __future__ import annotations

from collections.abc import Collection, Iterator

from inference.engine.keras_engine import KVRunner
from inference.engine.reply import Reply, TokenTrace
from inference.engine.sampling import sample_token
from inference.families.base import TextTokenizer
from inference.protocol import (
    CancelToken,
    FinishReason,
    GenerationParams,
    GenerationResult,
    StreamEvent,
    TextDelta,
)


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
    events: list[StreamEvent] = []
    reply = Reply(prompt_ids, params, stop_ids=stop_ids, tokenizer=tokenizer, max_length=runner.max_length,
                  emit=events.append, cancel=cancel, started=started, trace=trace)
    if reply.room_error is not None:
        raise reply.room_error
    finish: FinishReason | None = "cancelled" if reply.cancel.cancelled else None
    if finish is None:
        logits, cache = runner.prefill(prompt_ids, cache_length=runner.cache_length_for(reply.need))
        index = len(prompt_ids)
        while True:
            token = sample_token(logits, params, reply.rng)
            finish = reply.accept(token)
            yield from _drain(events)
            if finish is not None:
                break
            if reply.cancel.cancelled:
                finish = "cancelled"
                break
            logits, cache = runner.step(cache, token, index)
            index += 1
    reply.finish(finish)
    yield from _drain(events)


def _drain(events: list[StreamEvent]) -> Iterator[StreamEvent]:
    while events:
        yield events.pop(0)
