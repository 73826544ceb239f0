"""Streaming engine on tiny random keras-hub models: parity with keras-hub, stops, sampling, cancel, UTF-8."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from inference.engine import IncrementalDecoder, KVRunner, TokenTrace, bucket, generate_stream, sample_token
from inference.local import LocalChatModel
from inference.protocol import (
    CancelToken,
    ChatMessage,
    GenerationParams,
    GenerationResult,
    TextDelta,
    complete,
)
from inference.tiny import tiny_tokenizer

MESSAGES = [ChatMessage("system", "Be brief."), ChatMessage("user", "Hello there, how are you today?")]



def _run(
    model: LocalChatModel, params: GenerationParams, **kw: Any
) -> tuple[list[str], GenerationResult, list[int]]:
    trace = TokenTrace(ids=[])
    deltas: list[str] = []
    result = None
    for event in model.stream(MESSAGES, params, trace=trace, **kw):
        if isinstance(event, TextDelta):
            deltas.append(event.text)
        else:
            result = event
    assert isinstance(result, GenerationResult)
    return deltas, result, trace.ids


def _keras_generate(model: LocalChatModel, prompt: list[int], new_tokens: int) -> list[int]:
    """keras-hub's own compiled generate() (greedy), the non-streamed reference."""
    lm = model.runner.lm
    lm.compile(sampler="greedy")
    length = model.runner.cache_length_for(len(prompt) + new_tokens)
    ids = np.zeros((1, length), "int32")
    ids[0, : len(prompt)] = prompt
    mask = np.zeros((1, length), bool)
    mask[0, : len(prompt)] = True
    out = lm.make_generate_function()({"token_ids": ids, "padding_mask": mask}, stop_token_ids=None)
    return [int(t) for t in np.asarray(out["token_ids"])[0, len(prompt) : len(prompt) + new_tokens]]


def test_streamed_greedy_equals_keras_hub_generate_token_for_token(model: LocalChatModel) -> None:
    params = GenerationParams(max_new_tokens=40)
    prompt = model.prompt_ids(MESSAGES, params)
    reference = _keras_generate(model, prompt, 40)
    # Run without stop tokens so all 40 positions are compared (past Gemma 3's 16-token window, too).
    trace = TokenTrace(ids=[])
    events = list(
        generate_stream(model.runner, model.loaded.tokenizer, prompt, params, stop_ids=(), trace=trace)
    )
    assert trace.ids == reference
    assert len(set(reference)) > 5  # the tiny model really varies its output
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    result = events[-1]
    assert isinstance(result, GenerationResult)
    assert result.text == text == model.loaded.tokenizer.decode(reference)
    assert (result.finish_reason, result.new_tokens, result.prompt_tokens) == ("length", 40, len(prompt))
    assert result.ttft_ms is not None and 0 < result.ttft_ms <= result.total_ms


def test_stop_token_ends_the_reply_before_it(model: LocalChatModel) -> None:
    params = GenerationParams(max_new_tokens=30)
    prompt = model.prompt_ids(MESSAGES, params)
    free = TokenTrace(ids=[])
    list(generate_stream(model.runner, model.loaded.tokenizer, prompt, params, stop_ids=(), trace=free))
    stop = free.ids[6]
    first = free.ids.index(stop)
    stopped = TokenTrace(ids=[])
    events = list(
        generate_stream(model.runner, model.loaded.tokenizer, prompt, params, stop_ids={stop}, trace=stopped)
    )
    result = events[-1]
    assert isinstance(result, GenerationResult)
    assert result.finish_reason == "stop"
    assert stopped.ids == free.ids[:first]
    assert result.new_tokens == first
    assert result.text == model.loaded.tokenizer.decode(free.ids[:first])


def test_template_stop_tokens_are_resolved_to_ids(model: LocalChatModel) -> None:
    tokenizer = model.loaded.tokenizer
    expected = {tokenizer.token_to_id(t) for t in model.template.stop_tokens} | {tokenizer.eos_id}
    assert model.stop_ids == expected - {None}
    assert tokenizer.token_to_id(model.template.stop_tokens[0]) in model.stop_ids


def test_sampling_settings_are_runtime_values_not_recompiles(model: LocalChatModel) -> None:
    _run(model, GenerationParams(max_new_tokens=8))
    before = model.runner.compiled_shapes
    runs = [
        _run(model, GenerationParams(max_new_tokens=8, temperature=t, top_p=p, top_k=k, seed=s))[2]
        for t, p, k, s in [(0.8, 0.9, 0, 1), (0.8, 0.9, 0, 1), (1.5, 1.0, 50, 2), (0.3, 0.5, 5, 3)]
    ]
    assert model.runner.compiled_shapes == before
    assert runs[0] == runs[1]  # same seed, same reply
    greedy = _run(model, GenerationParams(max_new_tokens=8))[2]
    assert _run(model, GenerationParams(max_new_tokens=8, temperature=1.0, top_k=1, seed=9))[2] == greedy
    assert any(r != greedy for r in runs)


def test_prompts_in_one_bucket_share_compiled_functions(model: LocalChatModel) -> None:
    params = GenerationParams(max_new_tokens=4)
    _run(model, params)
    before = model.runner.compiled_shapes
    base = len(model.prompt_ids(MESSAGES, params))
    for extra in ("!", "?!", " ok"):
        messages = [*MESSAGES[:1], ChatMessage("user", MESSAGES[1].content + extra)]
        longer = len(model.prompt_ids(messages, params))
        assert base < longer and bucket(longer, minimum=32, maximum=1024) == bucket(
            base, minimum=32, maximum=1024
        )
        list(model.stream(messages, params))
    assert model.runner.compiled_shapes == before
    assert bucket(33, minimum=32, maximum=1024) == 64 and bucket(1000, minimum=128, maximum=1024) == 1024


def test_cancellation_mid_stream_and_before_start(model: LocalChatModel) -> None:
    cancel = CancelToken()
    seen = 0
    result = None
    for event in model.stream(MESSAGES, GenerationParams(max_new_tokens=200), cancel=cancel):
        if isinstance(event, TextDelta):
            seen += 1
            if seen == 3:
                cancel.cancel()
        else:
            result = event
    assert result is not None and result.finish_reason == "cancelled"
    assert 3 <= result.new_tokens < 20
    early = CancelToken()
    early.cancel()
    result = complete(model, MESSAGES, GenerationParams(max_new_tokens=50), cancel=early)
    assert (result.finish_reason, result.new_tokens, result.text) == ("cancelled", 0, "")


def test_reply_is_capped_by_the_context(model: LocalChatModel) -> None:
    prompt = model.prompt_ids(MESSAGES, GenerationParams(max_new_tokens=8))
    runner = KVRunner(model.runner.lm, max_length=len(prompt) + 5)
    params = GenerationParams(max_new_tokens=50)
    events = list(generate_stream(runner, model.loaded.tokenizer, prompt, params, stop_ids=()))
    result = events[-1]
    assert isinstance(result, GenerationResult)
    assert (result.finish_reason, result.new_tokens) == ("length", 5)


def test_history_is_trimmed_to_leave_room_for_the_reply(model: LocalChatModel) -> None:
    history = [MESSAGES[0]]
    for i in range(8):
        history += [ChatMessage("user", f"old question {i}"), ChatMessage("assistant", f"old answer {i}")]
    history.append(MESSAGES[1])
    params = GenerationParams(max_new_tokens=20)
    full = len(model.loaded.tokenizer.encode(model.template.render(history)))
    small = LocalChatModel("small", model.loaded, model.template, context_length=full - 40)
    ids = small.prompt_ids(history, params)
    assert len(ids) <= full - 40 - 20
    text = model.loaded.tokenizer.decode(ids)
    assert "Be brief." in text and MESSAGES[1].content in text and "old question 0" not in text
    result = complete(small, history, params)
    assert result.finish_reason in ("length", "stop") and result.prompt_tokens == len(ids)


def test_bad_requests_end_in_an_error_result_not_an_exception(model: LocalChatModel) -> None:
    bad_order = complete(model, [ChatMessage("assistant", "I go first")], GenerationParams())
    assert bad_order.finish_reason == "error" and "TemplateError" in (bad_order.error or "")
    huge = [ChatMessage("user", "x" * 5000)]
    too_long = complete(model, huge, GenerationParams(max_new_tokens=8))
    assert too_long.finish_reason == "error" and "PromptTooLongError" in (too_long.error or "")
    assert complete(model, MESSAGES, GenerationParams(max_new_tokens=3)).finish_reason in ("length", "stop")


def test_incremental_decoder_never_splits_a_character() -> None:
    tokenizer = tiny_tokenizer("llama")
    text = "héllo wörld 🎉 — 東京 <|im_end|> ok"
    decoder = IncrementalDecoder(tokenizer)
    pieces = [decoder.push(i) for i in tokenizer.encode(text)] + [decoder.flush()]
    assert "".join(pieces) == text
    assert all("\ufffd" not in p for p in pieces)
    assert pieces.count("") >= len("🎉".encode()) - 1  # multi-byte characters were held back


def test_incremental_decoder_flushes_an_unfinished_character() -> None:
    tokenizer = tiny_tokenizer("gemma3")
    decoder = IncrementalDecoder(tokenizer)
    ids = list(b"ab") + list("🎉".encode())[:2]
    pieces = [decoder.push(i) for i in ids]
    assert "".join(pieces) == "ab"
    assert decoder.flush() == "\ufffd"


def test_sample_token_respects_top_k_and_top_p() -> None:
    logits = np.array([0.0, 5.0, 4.9, 1.0, -3.0], dtype=np.float32)
    rng = np.random.default_rng(0)
    assert sample_token(logits, GenerationParams(), rng) == 1
    top2 = {sample_token(logits, GenerationParams(temperature=5.0, top_k=2), rng) for _ in range(300)}
    assert top2 == {1, 2}
    nucleus = {sample_token(logits, GenerationParams(temperature=1.0, top_p=0.3), rng) for _ in range(300)}
    assert nucleus == {1}
    wide = {sample_token(logits, GenerationParams(temperature=10.0), rng) for _ in range(500)}
    assert wide == {0, 1, 2, 3, 4}


def test_failure_mid_stream_keeps_the_text_already_shown(
    model: LocalChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert model.engine is not None
    real_step = model.engine.step
    calls = {"n": 0}

    def failing_step(*args: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 6:
            raise RuntimeError("device lost")
        return real_step(*args)

    monkeypatch.setattr(model.engine, "step", failing_step)
    events = list(model.stream(MESSAGES, GenerationParams(max_new_tokens=30)))
    result = events[-1]
    assert isinstance(result, GenerationResult)
    assert result.finish_reason == "error" and "RuntimeError: device lost" in (result.error or "")
    assert result.text == "".join(e.text for e in events if isinstance(e, TextDelta))
    monkeypatch.undo()
    assert complete(model, MESSAGES, GenerationParams(max_new_tokens=4)).finish_reason != "error"


def test_default_system_prompt_applies_only_without_one(model: LocalChatModel) -> None:
    with_default = LocalChatModel(
        "d", model.loaded, model.template, context_length=256, default_system="HOUSE RULES"
    )
    tokenizer, params = model.loaded.tokenizer, GenerationParams(max_new_tokens=4)
    assert "HOUSE RULES" in tokenizer.decode(with_default.prompt_ids(MESSAGES[1:], params))
    own = tokenizer.decode(with_default.prompt_ids(MESSAGES, params))
    assert "HOUSE RULES" not in own and "Be brief." in own
