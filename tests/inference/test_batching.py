"""Dynamic batching on tiny random keras-hub models: batched greedy == batch-1 greedy, per-row cancel,
late joiners start before the first request ends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from inference.builder import build_chat_model
from inference.catalogue import load_catalogue
from inference.engine import TokenTrace, generate_stream
from inference.engine.batching import BatchScheduler
from inference.local import LocalChatModel
from inference.protocol import CancelToken, GenerationParams, GenerationResult, StreamEvent, TextDelta

REPO = Path(__file__).resolve().parents[2]
GREEDY = GenerationParams(max_new_tokens=12, temperature=0.0)


@pytest.fixture(scope="module", params=["tiny-llama", "tiny-gemma3"])
def model(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalChatModel]:
    entries = {e.slug: e for e in load_catalogue(REPO / "tests/data/tiny_catalogue.toml")}
    built = build_chat_model(entries[request.param], cache_dir=tmp_path_factory.mktemp("c"), warm_up=False)
    assert isinstance(built, LocalChatModel)
    yield built


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


def _submit(scheduler: BatchScheduler, ids: list[int], params: GenerationParams = GREEDY,
            cancel: CancelToken | None = None) -> Sink:
    sink = Sink()
    scheduler.submit(ids, params, stop_ids=(), emit=sink, cancel=cancel, trace=sink.trace)
    return sink


def _drain(scheduler: BatchScheduler) -> None:
    for _ in range(1000):
        if not scheduler.busy:
            return
        scheduler.tick()
    raise AssertionError("scheduler never finished")


def test_batched_greedy_equals_batch_one_for_every_request(model: LocalChatModel) -> None:
    prompts = [_prompt(model, t) for t in ("Hi", "A longer prompt than the first one, by far.", "Mid size q")]
    lengths = [6, 12, 9]
    scheduler = BatchScheduler(model.runner, model.loaded.tokenizer)
    sinks = [_submit(scheduler, p, GenerationParams(max_new_tokens=n, temperature=0.0))
             for p, n in zip(prompts, lengths, strict=True)]
    _drain(scheduler)
    assert len({id(g) for g in scheduler.groups}) == 0
    for sink, prompt, n in zip(sinks, prompts, lengths, strict=True):
        expected = _alone(model, prompt, GenerationParams(max_new_tokens=n, temperature=0.0))
        assert sink.trace.ids == expected
        assert sink.result is not None and sink.result.finish_reason == "length"
        assert sink.result.new_tokens == n and sink.result.text == sink.text
    # All three shared one group: one device call per step for all of them (the first token of each
    # comes from the prefill), not one per request.
    assert scheduler.steps == max(lengths) - 1


def test_sampling_settings_stay_per_request(model: LocalChatModel) -> None:
    prompt = _prompt(model, "Same prompt for both")
    sampled = GenerationParams(max_new_tokens=10, temperature=1.0, top_k=20, seed=7)
    scheduler = BatchScheduler(model.runner, model.loaded.tokenizer)
    greedy_sink, sampled_sink = _submit(scheduler, prompt), _submit(scheduler, prompt, sampled)
    _drain(scheduler)
    assert greedy_sink.trace.ids == _alone(model, prompt, GREEDY)
    assert sampled_sink.trace.ids == _alone(model, prompt, sampled)


def test_stop_token_ends_only_its_own_row(model: LocalChatModel) -> None:
    prompt = _prompt(model, "Stop somewhere please")
    reference = _alone(model, prompt, GREEDY)
    stop = reference[3]
    scheduler = BatchScheduler(model.runner, model.loaded.tokenizer)
    stopped = Sink()
    scheduler.submit(prompt, GREEDY, stop_ids={stop}, emit=stopped, trace=stopped.trace)
    free = _submit(scheduler, prompt)
    _drain(scheduler)
    assert stopped.result is not None and stopped.result.finish_reason == "stop"
    assert stopped.trace.ids == reference[: reference.index(stop)]
    assert free.trace.ids == reference


def test_cancelling_one_request_leaves_the_others_intact(model: LocalChatModel) -> None:
    prompts = [_prompt(model, t) for t in ("first one", "second, cancelled", "third prompt here")]
    scheduler = BatchScheduler(model.runner, model.loaded.tokenizer)
    cancel = CancelToken()
    sinks = [_submit(scheduler, p, cancel=cancel if i == 1 else None) for i, p in enumerate(prompts)]
    for _ in range(4):
        scheduler.tick()
    cancel.cancel()
    _drain(scheduler)
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
    scheduler = BatchScheduler(model.runner, model.loaded.tokenizer)
    first = _submit(scheduler, first_prompt, long_params)
    for _ in range(5):
        scheduler.tick()
    # Late requests of any length join the running group's free slots at a step boundary.
    late_long = _prompt(model, "This late prompt is longer than the first one, by quite a lot.")
    late_short = _prompt(model, "Hi")
    joiners = [_submit(scheduler, late_long), _submit(scheduler, late_short)]
    scheduler.tick()
    assert first.result is None  # still generating ...
    assert len(scheduler.groups) == 1  # ... and the newcomers share its group, already decoding
    rows = [r for r in scheduler.groups[0].rows if r is not None]
    assert len(rows) == 3 and all(r.ttft_ms is not None and r.produced for r in rows)
    while first.result is None:
        scheduler.tick()
    assert all(j.result is not None for j in joiners)  # both done before the first
    assert first.trace.ids == _alone(model, first_prompt, long_params)
    assert joiners[0].trace.ids == _alone(model, late_long, GREEDY)
    assert joiners[1].trace.ids == _alone(model, late_short, GREEDY)


def test_a_full_group_makes_newcomers_open_another(model: LocalChatModel) -> None:
    scheduler = BatchScheduler(model.runner, model.loaded.tokenizer, batch_buckets=(1, 2), open_batch=1)
    first_prompt = _prompt(model, "alone at first")
    first = _submit(scheduler, first_prompt, GenerationParams(max_new_tokens=30, temperature=0.0))
    scheduler.tick()
    late_prompt = _prompt(model, "no room left")
    late = _submit(scheduler, late_prompt)
    scheduler.tick()
    assert len(scheduler.groups) == 2 and first.result is None
    _drain(scheduler)
    assert late.trace.ids == _alone(model, late_prompt, GREEDY)
    long_params = GenerationParams(max_new_tokens=30, temperature=0.0)
    assert first.trace.ids == _alone(model, first_prompt, long_params)


def test_more_requests_than_the_largest_batch_all_finish(model: LocalChatModel) -> None:
    scheduler = BatchScheduler(model.runner, model.loaded.tokenizer, batch_buckets=(1, 2))
    prompts = [_prompt(model, f"request number {i}") for i in range(5)]
    sinks = [_submit(scheduler, p, GenerationParams(max_new_tokens=4, temperature=0.0)) for p in prompts]
    _drain(scheduler)
    for sink, prompt in zip(sinks, prompts, strict=True):
        assert sink.trace.ids == _alone(model, prompt, GenerationParams(max_new_tokens=4, temperature=0.0))


def test_bad_and_precancelled_requests_end_without_running(model: LocalChatModel) -> None:
    scheduler = BatchScheduler(model.runner, model.loaded.tokenizer)
    cancel = CancelToken()
    cancel.cancel()
    too_long = _submit(scheduler, [5] * model.runner.max_length)
    precancelled = _submit(scheduler, _prompt(model, "never mind"), cancel=cancel)
    _drain(scheduler)
    assert too_long.result is not None and too_long.result.finish_reason == "error"
    assert "no room" in (too_long.result.error or "")
    assert precancelled.result is not None and precancelled.result.finish_reason == "cancelled"
    assert scheduler.steps == 0
