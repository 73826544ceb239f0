"""The pool with ``batching=True`` on a real tiny model: concurrent visitors share decode steps and get
exactly their batch-1 replies; closing one stream cancels only that one; a device failure is an error
result, not a dead worker."""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from inference.catalogue import load_catalogue
from inference.engine import generate_stream
from inference.local import LocalChatModel
from inference.pool import ModelPool
from inference.protocol import (
    ChatMessage,
    GenerationParams,
    GenerationResult,
    StreamEvent,
    TextDelta,
    complete,
)

REPO = Path(__file__).resolve().parents[2]
TINY_LLAMA = [e for e in load_catalogue(REPO / "tests/data/tiny_catalogue.toml") if e.slug == "tiny-llama"]
GREEDY = GenerationParams(max_new_tokens=12, temperature=0.0)
QUESTIONS = ["Tell me a story.", "Why?", "What is the capital of a country with a very long name?", "Hi"]


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelPool]:
    with ModelPool(TINY_LLAMA, memory_budget_mb=1000, cache_dir=tmp_path_factory.mktemp("c"),
                   warm_up_prompts=(16,), batching=True, batch_window_s=0.05, keep_keras_weights=True) as p:
        assert p.wait_ready(timeout=300) == ["tiny-llama"]
        yield p


def _local(pool: ModelPool) -> LocalChatModel:
    model = pool._workers["tiny-llama"].model
    assert isinstance(model, LocalChatModel)
    return model


def _expected(pool: ModelPool, question: str) -> str:
    """The reply of keras-hub's own forward pass, one request alone (the reference)."""
    model = _local(pool)
    ids = model.prompt_ids([ChatMessage("user", question)], GREEDY)
    events = list(generate_stream(model.runner, model.loaded.tokenizer, ids, GREEDY, stop_ids=model.stop_ids))
    result = events[-1]
    assert isinstance(result, GenerationResult)
    return result.text


def test_concurrent_requests_share_steps_and_match_batch_one(pool: ModelPool) -> None:
    model = pool.get("tiny-llama")
    replies: dict[str, Any] = {}

    def ask(question: str) -> None:
        replies[question] = complete(model, [ChatMessage("user", question)], GREEDY)

    steps_before = _local(pool).batcher.steps
    threads = [threading.Thread(target=ask, args=(q,)) for q in QUESTIONS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    steps = _local(pool).batcher.steps - steps_before
    for question in QUESTIONS:
        result = replies[question]
        assert result.finish_reason in ("length", "stop") and result.error is None
        assert result.text == _expected(pool, question)
    # Four 12-token replies one after another take ~44 steps; batched they overlap.
    assert steps < 11 * len(QUESTIONS)


def test_closing_one_stream_cancels_it_and_not_the_others(pool: ModelPool) -> None:
    model = pool.get("tiny-llama")
    long = GenerationParams(max_new_tokens=60, temperature=0.0)
    other: dict[str, GenerationResult] = {}

    def ask() -> None:
        other["r"] = complete(model, [ChatMessage("user", "Why?")], long)

    thread = threading.Thread(target=ask)
    thread.start()
    stream = cast(Generator[StreamEvent, None, None], model.stream([ChatMessage("user", "Tell")], long))
    for event in stream:
        if isinstance(event, TextDelta):
            break
    stream.close()  # the visitor left: cancels this request at the next step boundary
    thread.join(timeout=120)
    result = other["r"]
    assert result.finish_reason == "length" and result.new_tokens == 60
    alone = list(_local(pool).stream([ChatMessage("user", "Why?")], long))[-1]
    assert isinstance(alone, GenerationResult) and result.text == alone.text


def test_a_failing_step_is_an_error_result_and_the_worker_lives_on(
    pool: ModelPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = _local(pool).engine

    def broken(*args: Any) -> Any:
        raise RuntimeError("device fell over")

    monkeypatch.setattr(runner, "step", broken)
    result = complete(pool.get("tiny-llama"), [ChatMessage("user", "Why?")], GREEDY)
    assert result.finish_reason == "error" and "device fell over" in (result.error or "")
    monkeypatch.undo()
    again = complete(pool.get("tiny-llama"), [ChatMessage("user", "Why?")], GREEDY)
    assert again.error is None and again.text == _expected(pool, "Why?")
