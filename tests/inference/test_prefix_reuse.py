"""Prefix reuse in the continuous batcher, on tiny random models: a follow-up turn and requests sharing a
prompt prefill only what no row's cache holds yet, and still reply what the request gets alone; kept
rows are bounded, a dialogue's later turn replaces its earlier one, and the setting turns it off."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from inference.engine import TokenTrace, generate_stream, kernels
from inference.engine.batcher import MIN_REUSED_PREFIX, SlotScheduler, shared_prefix
from inference.engine.fast_engine import SlotEngine
from inference.engine.weights import decoder_spec, extract_params
from inference.local import LocalChatModel, prefix_cache_rows
from inference.protocol import GenerationParams, GenerationResult, StreamEvent
from tests.inference.conftest import drain

GREEDY = GenerationParams(max_new_tokens=8, temperature=0.0)
RNG = np.random.default_rng(7)
SYSTEM = [int(t) for t in RNG.integers(3, 200, 60)]  # a shared "system prompt", longer than the minimum


def _ids(n: int, seed: int) -> list[int]:
    return [int(t) for t in np.random.default_rng(seed).integers(3, 200, n)]


def _alone(model: LocalChatModel, ids: list[int], params: GenerationParams = GREEDY) -> list[int]:
    """keras-hub's own forward pass, one request: the reference a reused row must still reproduce."""
    trace = TokenTrace(ids=[])
    for _ in generate_stream(model.runner, model.loaded.tokenizer, ids, params, stop_ids=(), trace=trace):
        pass
    return trace.ids


def _scheduler(model: LocalChatModel, keep_rows: int = 4) -> SlotScheduler:
    assert model.engine is not None, model.engine_note
    return SlotScheduler(model.engine, model.loaded.tokenizer, keep_rows=keep_rows)


def _submit(scheduler: SlotScheduler, ids: list[int], params: GenerationParams = GREEDY) -> TokenTrace:
    trace = TokenTrace(ids=[])
    results: list[StreamEvent] = []
    scheduler.submit(ids, params, stop_ids=(), emit=results.append, trace=trace)
    return trace




def test_shared_prefix_counts_leading_tokens() -> None:
    assert shared_prefix([1, 2, 3], [1, 2, 4, 5]) == 2
    assert shared_prefix([1, 2], [1, 2, 3]) == 2
    assert shared_prefix([], [1]) == 0
    assert shared_prefix([9], [1]) == 0


def test_a_follow_up_turn_prefills_only_its_new_tokens(model: LocalChatModel) -> None:
    scheduler = _scheduler(model)
    first = SYSTEM + _ids(10, 1)
    reply = _submit(scheduler, first)
    drain(scheduler)
    assert scheduler.reused_tokens == 0 and scheduler.prefilled_tokens == len(first)
    assert scheduler.kept_rows == 1
    follow_up = first + reply.ids + _ids(12, 2)  # the dialogue so far, then the visitor's correction
    second = _submit(scheduler, follow_up)
    drain(scheduler)
    cached = len(first) + len(reply.ids) - 1  # the reply's last token was sampled, never fed
    assert scheduler.reused_tokens == cached
    assert scheduler.prefilled_tokens == len(first) + len(follow_up) - cached
    assert second.ids == _alone(model, follow_up)
    assert any(kind == "extend" for kind, _, _ in model.engine.compiled_shapes)  # type: ignore[union-attr]
    assert scheduler.kept_rows == 1  # the second turn's row covers the first's: it replaced it


def test_requests_sharing_a_prompt_prefill_it_once(model: LocalChatModel) -> None:
    prompt = SYSTEM + _ids(20, 3)
    scheduler = _scheduler(model)
    traces = [_submit(scheduler, prompt) for _ in range(4)]
    drain(scheduler)
    # the first runs the whole prompt; the others copy its row and sample from the logits it ended with
    assert scheduler.prefilled_tokens == len(prompt)
    assert scheduler.reused_tokens == 3 * len(prompt)
    expected = _alone(model, prompt)
    assert [t.ids for t in traces] == [expected] * 4


def test_a_repeated_prompt_samples_as_it_would_alone(model: LocalChatModel) -> None:
    """A reliability run's attempts: the same prompt again after the first reply finished, each attempt
    with its own seed and a temperature other than the first's. Nothing is prefilled again, and each
    reply is the one a scheduler that never reuses anything gives its request."""
    prompt = SYSTEM + _ids(12, 13)
    attempts = [GenerationParams(max_new_tokens=8, temperature=t, top_k=k, top_p=p, seed=seed)
                for t, k, p, seed in ((0.0, 0, 1.0, 1), (0.9, 0, 1.0, 2), (1.3, 5, 1.0, 3), (0.7, 0, 0.8, 4))]
    reusing, fresh = _scheduler(model), _scheduler(model, keep_rows=0)
    got, want = [], []
    for params in attempts:
        got.append(_submit(reusing, prompt, params))
        drain(reusing)
        want.append(_submit(fresh, prompt, params))
        drain(fresh)
    assert reusing.prefilled_tokens == len(prompt) and reusing.reused_tokens == 3 * len(prompt)
    assert [t.ids for t in got] == [t.ids for t in want]
    assert len({tuple(t.ids) for t in got}) > 1  # the seeds and temperatures did change the replies


def test_a_prompt_that_only_begins_like_a_rows_prompt_still_runs_its_rest(model: LocalChatModel) -> None:
    """A row's prompt plus its reply's first tokens is not that row's prompt: the logits it kept are
    not this prompt's, so the new tokens run."""
    scheduler = _scheduler(model)
    prompt = SYSTEM + _ids(10, 14)
    reply = _submit(scheduler, prompt)
    drain(scheduler)
    longer = prompt + reply.ids[:3]
    trace = _submit(scheduler, longer)
    drain(scheduler)
    assert scheduler.prefilled_tokens == len(prompt) + 1  # the reply's tokens were cached but the last one
    assert trace.ids == _alone(model, longer)


def test_requests_that_differ_after_the_system_prompt_share_it(model: LocalChatModel) -> None:
    prompts = [SYSTEM + _ids(15, 10 + i) for i in range(3)]
    scheduler = _scheduler(model)
    traces = [_submit(scheduler, p) for p in prompts]
    drain(scheduler)
    assert scheduler.reused_tokens == 2 * len(SYSTEM)
    assert [t.ids for t in traces] == [_alone(model, p) for p in prompts]


def test_a_kept_row_serves_two_requests_at_once(model: LocalChatModel) -> None:
    """Two follow-ups of one finished reply admitted together both copy its kept row (which must
    survive the first copy's in-place prefill)."""
    scheduler = _scheduler(model)
    first = SYSTEM + _ids(5, 4)
    reply = _submit(scheduler, first)
    drain(scheduler)
    follow_ups = [first + reply.ids + _ids(9, 20 + i) for i in range(2)]
    traces = [_submit(scheduler, f) for f in follow_ups]
    drain(scheduler)
    assert [t.ids for t in traces] == [_alone(model, f) for f in follow_ups]
    assert scheduler.reused_tokens >= 2 * (len(first) + len(reply.ids) - 1)


def test_a_short_reply_beside_a_long_one_keeps_a_row_of_its_own_length(model: LocalChatModel) -> None:
    """The batch cache is 512 slots for the long request; the short one (73 tokens at most) keeps 128,
    and its follow-up, copied back into the longer cache, still replies as it would alone."""
    scheduler = _scheduler(model)
    long_params = GenerationParams(max_new_tokens=60, temperature=0.0)
    short = SYSTEM + _ids(5, 9)
    _submit(scheduler, _ids(200, 10), long_params)
    reply = _submit(scheduler, short)
    scheduler.tick()
    assert scheduler.slots == 512
    while scheduler.running == 2:
        scheduler.tick()
    assert scheduler.kept_slots == [128]
    follow_up = short + reply.ids + _ids(7, 11)
    trace = _submit(scheduler, follow_up)
    drain(scheduler)
    assert trace.ids == _alone(model, follow_up)
    assert scheduler.reused_tokens >= len(short) + len(reply.ids) - 1


def test_a_suffix_whose_bucket_would_overrun_the_cache_reuses_a_shorter_prefix(model: LocalChatModel) -> None:
    """100 prompt tokens + 12 new fit a cache of 128 slots; a prompt that differs only in its last token
    has a 1-token suffix, which would be padded to 32 slots from slot 99 (past 128), so it reuses 96
    tokens and runs 4."""
    prompt = _ids(100, 5)
    other = prompt[:-1] + [prompt[-1] % 150 + 3]
    params = GenerationParams(max_new_tokens=12, temperature=0.0)
    scheduler = _scheduler(model)
    traces = [_submit(scheduler, p, params) for p in (prompt, other)]
    drain(scheduler)
    assert scheduler.reused_tokens == 96
    assert traces[0].ids == _alone(model, prompt, params)
    assert traces[1].ids == _alone(model, other, params)


def test_kept_rows_are_bounded_and_turned_off_by_zero(model: LocalChatModel) -> None:
    scheduler = _scheduler(model, keep_rows=2)
    prompts = [_ids(40, 30 + i) for i in range(3)]  # nothing shared
    for p in prompts:
        _submit(scheduler, p)
        drain(scheduler)
    assert scheduler.kept_rows == 2 and scheduler.reused_tokens == 0
    _submit(scheduler, prompts[0] + [5, 6, 7])  # its row was the oldest: dropped
    drain(scheduler)
    assert scheduler.reused_tokens == 0
    _submit(scheduler, prompts[2] + [5, 6, 7])
    drain(scheduler)
    assert scheduler.reused_tokens >= len(prompts[2])

    off = _scheduler(model, keep_rows=0)
    traces = [_submit(off, SYSTEM + _ids(4, 6)) for _ in range(2)]
    drain(off)
    assert off.reused_tokens == 0 and off.kept_rows == 0
    assert traces[0].ids == traces[1].ids


def test_short_shared_prefixes_are_prefilled_again(model: LocalChatModel) -> None:
    scheduler = _scheduler(model)
    short = _ids(MIN_REUSED_PREFIX - 1, 8)
    for tail in (1, 2):
        _submit(scheduler, short + _ids(5, 40 + tail))
        drain(scheduler)
    assert scheduler.reused_tokens == 0 and scheduler.kept_rows == 2


def test_keras_hubs_engine_never_reuses(model: LocalChatModel) -> None:
    from inference.engine import KerasEngine

    scheduler = SlotScheduler(KerasEngine(model.runner), model.loaded.tokenizer, batch_buckets=(1,))
    assert scheduler.keep_rows == 0
    for _ in range(2):
        _submit(scheduler, SYSTEM)
        drain(scheduler)
    assert scheduler.reused_tokens == 0


def test_the_setting_reads_whole_numbers_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARENA_PREFIX_CACHE_ROWS", raising=False)
    assert prefix_cache_rows() == 4
    monkeypatch.setenv("ARENA_PREFIX_CACHE_ROWS", "0")
    assert prefix_cache_rows() == 0
    monkeypatch.setenv("ARENA_PREFIX_CACHE_ROWS", " 12 ")
    assert prefix_cache_rows() == 12
    for bad in ("-1", "four", "1.5"):
        monkeypatch.setenv("ARENA_PREFIX_CACHE_ROWS", bad)
        with pytest.raises(ValueError, match="ARENA_PREFIX_CACHE_ROWS"):
            prefix_cache_rows()


def test_a_negative_keep_rows_is_refused(model: LocalChatModel) -> None:
    with pytest.raises(ValueError, match="keep_rows"):
        _scheduler(model, keep_rows=-1)


@pytest.mark.skipif(kernels.kernel_status() is not None, reason="native kernels unavailable")
def test_native_kernels_continue_a_prefix_as_a_fresh_prefill_does(model: LocalChatModel) -> None:
    """Through the native q4 kernels: the suffix after a copied row gives the next-token logits the
    whole prompt's prefill gives (the copied keys are the prefill's own: only the suffix's products
    differ, by the kernels' product rounding)."""
    spec = decoder_spec(model.loaded.backbone, "q4", native_kernels=True)
    engine = SlotEngine(spec, extract_params(model.loaded.backbone, spec), max_length=256)
    prompt = SYSTEM + _ids(30, 9)
    fresh, _ = engine.prefill(prompt, temperature=1.0, slots=128)
    _, row = engine.prefill(prompt[:40], temperature=1.0, slots=128)
    batch = engine.empty(batch=2, slots=128)
    batch = engine.insert(batch, row, 1)
    copied = engine.resize(batch, [1], batch=1, slots=128)
    continued, _ = engine.extend(copied, 40, prompt[40:], temperature=1.0)
    a, b = np.asarray(fresh.logits)[0], np.asarray(continued.logits)[0]
    assert np.max(np.abs(a - b)) <= 2e-2 * np.max(np.abs(a))
    assert int(jnp.argmax(a)) == int(jnp.argmax(b))
    with pytest.raises(ValueError, match="does not fit"):
        engine.extend(engine.resize(batch, [1], batch=1, slots=128), 120, prompt[:20], temperature=1.0)


def test_a_finished_result_is_still_exactly_one_per_request(model: LocalChatModel) -> None:
    scheduler = _scheduler(model)
    prompt = SYSTEM + _ids(3, 11)
    events: list[list[StreamEvent]] = [[], []]
    for sink in events:
        scheduler.submit(prompt, GREEDY, stop_ids=(), emit=sink.append)
    drain(scheduler)
    for sink in events:
        assert sum(isinstance(e, GenerationResult) for e in sink) == 1


def test_a_dialogues_second_turn_reuses_the_first_turns_row(model: LocalChatModel) -> None:
    """Through the model's own chat path, as the arena calls it: the correction turn's prompt (the
    template's rendering of the whole dialogue) begins with the first turn's tokens, so it prefills only
    what came after them."""
    from inference.protocol import ChatMessage, TextDelta

    system = ChatMessage("system", " ".join(f"rule {i}: reply with one line of code." for i in range(12)))
    first = [system, ChatMessage("user", "Add a meeting with Fred on Nov 11 at 5PM")]
    params = GenerationParams(max_new_tokens=6, temperature=0.0)
    before = model.batcher.reused_tokens
    reply = "".join(e.text for e in model.stream(first, params) if isinstance(e, TextDelta))
    second = [*first, ChatMessage("assistant", reply), ChatMessage("user", "No, it is at 6PM.")]
    list(model.stream(second, params))
    assert model.batcher.reused_tokens - before >= len(model.prompt_ids(first, params))
