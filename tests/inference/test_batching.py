"""Continuous batching on tiny random keras-hub models: every batched row == the request alone on
keras-hub's own forward pass, per-row stop/cancel, late joiners start before the first request ends,
the batch grows and shrinks through its buckets."""

from __future__ import annotations

from inference.engine import TokenTrace, generate_stream
from inference.engine.batcher import SlotScheduler
from inference.local import LocalChatModel
from inference.protocol import CancelToken, GenerationParams, GenerationResult, StreamEvent, TextDelta
from tests.inference.conftest import drain

GREEDY = GenerationParams(max_new_tokens=12, temperature=0.0)



def _prompt(model: LocalChatModel, text: str) -> list[int]:
    return model.loaded.tokenizer.encode(text)


def _alone(model: LocalChatModel, ids: list[int], params: GenerationParams) -> list[int]:
    """The batch-1 engine's ids: the reference every batched row must reproduce."""
    trace = TokenTrace(ids=[])
    for _ in generate_stream(model.runner, model.loaded.tokenizer, ids, params, stop_ids=(), trace=trace):
        pass
    return trace.ids


class Sink:
    """Collects one request's events; ``trace`` receives its ids when it ends."""

    def __init__(self) -> None:
        self.events: list[StreamEvent] = []
        self.trace = TokenTrace(ids=[])

    def __call__(self, event: StreamEvent) -> None:
        self.events.append(event)

    @property
    def result(self) -> GenerationResult | None:
        done = [e for e in self.events if isinstance(e, GenerationResult)]
        assert len(done) <= 1
        return done[0] if done else None

    @property
    def text(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, TextDelta))


def _scheduler(model: LocalChatModel, **kwargs: object) -> SlotScheduler:
    assert model.engine is not None, model.engine_note
    return SlotScheduler(model.engine, model.loaded.tokenizer, **kwargs)  # type: ignore[arg-type]


def _submit(scheduler: SlotScheduler, ids: list[int], params: GenerationParams = GREEDY,
            cancel: CancelToken | None = None) -> Sink:
    sink = Sink()
    scheduler.submit(ids, params, stop_ids=(), emit=sink, cancel=cancel, trace=sink.trace)
    return sink




def test_batched_greedy_equals_batch_one_for_every_request(model: LocalChatModel) -> None:
    prompts = [_prompt(model, t) for t in ("Hi", "A longer prompt than the first one, by far.", "Mid size q")]
    lengths = [6, 12, 9]
    scheduler = _scheduler(model)
    sinks = [_submit(scheduler, p, GenerationParams(max_new_tokens=n, temperature=0.0))
             for p, n in zip(prompts, lengths, strict=True)]
    drain(scheduler)
    assert scheduler.rows == [] and scheduler.cache is None  # all done: the batch cache is released
    for sink, prompt, n in zip(sinks, prompts, lengths, strict=True):
        expected = _alone(model, prompt, GenerationParams(max_new_tokens=n, temperature=0.0))
        assert sink.trace.ids == expected
        assert sink.result is not None and sink.result.finish_reason == "length"
        assert sink.result.new_tokens == n and sink.result.text == sink.text
    # All three shared the batch: one device call per step for all of them (the first token of each
    # comes from the prefill), not one per request.
    assert scheduler.steps == max(lengths) - 1


def test_sampling_settings_stay_per_request(model: LocalChatModel) -> None:
    prompt = _prompt(model, "Same prompt for both")
    sampled = GenerationParams(max_new_tokens=10, temperature=1.0, top_k=20, seed=7)
    scheduler = _scheduler(model)
    greedy_sink, sampled_sink = _submit(scheduler, prompt), _submit(scheduler, prompt, sampled)
    drain(scheduler)
    assert greedy_sink.trace.ids == _alone(model, prompt, GREEDY)
    assert sampled_sink.trace.ids == _alone(model, prompt, sampled)


def test_stop_token_ends_only_its_own_row(model: LocalChatModel) -> None:
    prompt = _prompt(model, "Stop somewhere please")
    reference = _alone(model, prompt, GREEDY)
    stop = reference[3]
    scheduler = _scheduler(model)
    stopped = Sink()
    scheduler.submit(prompt, GREEDY, stop_ids={stop}, emit=stopped, trace=stopped.trace)
    free = _submit(scheduler, prompt)
    drain(scheduler)
    assert stopped.result is not None and stopped.result.finish_reason == "stop"
    assert stopped.trace.ids == reference[: reference.index(stop)]
    assert free.trace.ids == reference


def test_cancelling_one_request_leaves_the_others_intact(model: LocalChatModel) -> None:
    prompts = [_prompt(model, t) for t in ("first one", "second, cancelled", "third prompt here")]
    scheduler = _scheduler(model)
    cancel = CancelToken()
    sinks = [_submit(scheduler, p, cancel=cancel if i == 1 else None) for i, p in enumerate(prompts)]
    for _ in range(4):
        scheduler.tick()
    cancel.cancel()
    drain(scheduler)
    cancelled = sinks[1].result
    assert cancelled is not None and cancelled.finish_reason == "cancelled"
    assert 0 < cancelled.new_tokens < GREEDY.max_new_tokens
    for i in (0, 2):
        assert sinks[i].trace.ids == _alone(model, prompts[i], GREEDY)
        result = sinks[i].result
        assert result is not None and result.finish_reason == "length"


def test_a_late_request_starts_before_the_first_one_finishes(model: LocalChatModel) -> None:
    long_params = GenerationParams(max_new_tokens=40, temperature=0.0)
    first_prompt = _prompt(model, "A long answer, please")
    scheduler = _scheduler(model)
    first = _submit(scheduler, first_prompt, long_params)
    for _ in range(5):
        scheduler.tick()
    # Late requests of any length join the running group's free slots at a step boundary.
    late_long = _prompt(model, "This late prompt is longer than the first one, by quite a lot.")
    late_short = _prompt(model, "Hi")
    joiners = [_submit(scheduler, late_long), _submit(scheduler, late_short)]
    scheduler.tick()
    assert first.result is None  # still generating ...
    assert scheduler.running == 3  # ... and the newcomers share its batch, already decoding
    rows = [r for r in scheduler.rows if r is not None]
    assert all(r.reply.ttft_ms is not None and r.reply.produced for r in rows)
    while first.result is None:
        scheduler.tick()
    assert all(j.result is not None for j in joiners)  # both done before the first
    assert first.trace.ids == _alone(model, first_prompt, long_params)
    assert joiners[0].trace.ids == _alone(model, late_long, GREEDY)
    assert joiners[1].trace.ids == _alone(model, late_short, GREEDY)


def test_when_every_row_is_busy_a_newcomer_starts_as_soon_as_one_frees(model: LocalChatModel) -> None:
    scheduler = _scheduler(model, batch_buckets=(1, 2))
    short, long_ = GenerationParams(max_new_tokens=3, temperature=0.0), GenerationParams(max_new_tokens=20,
                                                                                         temperature=0.0)
    prompts = [_prompt(model, t) for t in ("short one", "a long one", "waiting")]
    sinks = [_submit(scheduler, prompts[0], short), _submit(scheduler, prompts[1], long_),
             _submit(scheduler, prompts[2], short)]
    scheduler.tick()
    assert scheduler.running == 2 and scheduler.active == 3  # the third waits: both rows are busy
    while sinks[0].result is None:
        scheduler.tick()
    scheduler.tick()
    assert scheduler.active == scheduler.running == 2  # it took the freed row ...
    assert sinks[1].result is None  # ... while the long one is still running
    drain(scheduler)
    for sink, prompt, params in zip(sinks, prompts, (short, long_, short), strict=True):
        assert sink.trace.ids == _alone(model, prompt, params)


def test_the_batch_grows_and_shrinks_through_its_buckets(model: LocalChatModel) -> None:
    scheduler = _scheduler(model, batch_buckets=(1, 2, 4))
    long_ = GenerationParams(max_new_tokens=24, temperature=0.0)
    first_prompt = _prompt(model, "the long-lived one")
    first = _submit(scheduler, first_prompt, long_)
    scheduler.tick()
    assert len(scheduler.rows) == 1 and scheduler.slots == 128
    late = [_submit(scheduler, _prompt(model, f"joiner {i}"), GenerationParams(max_new_tokens=3,
                                                                                temperature=0.0))
            for i in range(3)]
    scheduler.tick()
    assert len(scheduler.rows) == 4 and scheduler.running == 4  # grew 1 -> 4, the first row kept
    while any(s.result is None for s in late):
        scheduler.tick()
    scheduler.tick()
    assert first.result is None and len(scheduler.rows) == 1  # shrank back: one row left, compacted
    big = GenerationParams(max_new_tokens=300, temperature=0.0)
    grown = _submit(scheduler, _prompt(model, "needs a longer cache"), big)
    scheduler.tick()
    assert scheduler.slots == 512 and len(scheduler.rows) == 2  # cache length follows the longest row
    drain(scheduler)
    assert first.trace.ids == _alone(model, first_prompt, long_)
    assert grown.result is not None and grown.result.new_tokens == 300


def test_more_requests_than_the_largest_batch_all_finish(model: LocalChatModel) -> None:
    scheduler = _scheduler(model, batch_buckets=(1, 2))
    prompts = [_prompt(model, f"request number {i}") for i in range(5)]
    sinks = [_submit(scheduler, p, GenerationParams(max_new_tokens=4, temperature=0.0)) for p in prompts]
    drain(scheduler)
    for sink, prompt in zip(sinks, prompts, strict=True):
        assert sink.trace.ids == _alone(model, prompt, GenerationParams(max_new_tokens=4, temperature=0.0))


def test_bad_and_precancelled_requests_end_without_running(model: LocalChatModel) -> None:
    scheduler = _scheduler(model)
    cancel = CancelToken()
    cancel.cancel()
    too_long = _submit(scheduler, [5] * model.context_length)
    precancelled = _submit(scheduler, _prompt(model, "never mind"), cancel=cancel)
    drain(scheduler)
    assert too_long.result is not None and too_long.result.finish_reason == "error"
    assert "no room" in (too_long.result.error or "")
    assert precancelled.result is not None and precancelled.result.finish_reason == "cancelled"
    assert scheduler.steps == 0
