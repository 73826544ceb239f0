"""Each model's line is bounded and has a deadline (a real tiny model behind a gate it waits on).

Probe of the old pool: 50 visitors on 2 models were all queued with no bound and no deadline, and
nothing told how long the line was.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from inference.builder import build_chat_model
from inference.catalogue import CatalogueEntry, load_catalogue
from inference.pool import ModelBusyError, ModelPool
from inference.protocol import (
    ChatMessage,
    ChatModel,
    GenerationParams,
    GenerationResult,
    StreamEvent,
    complete,
)

REPO = Path(__file__).resolve().parents[2]
ENTRIES = load_catalogue(REPO / "tests/data/tiny_catalogue.toml")[:1]
MESSAGES = [ChatMessage("user", "Tell me a story.")]
GREEDY = GenerationParams(max_new_tokens=4)


class _Slow:
    """The real model, but each request first takes ``delay_s`` (a reply as slow as we say)."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner, self.delay_s = inner, 0.0

    def stream(
        self, messages: Sequence[ChatMessage], params: GenerationParams, **kw: Any
    ) -> Iterator[StreamEvent]:
        time.sleep(self.delay_s)
        yield from self.inner.stream(messages, params, **kw)


def _in_background(model: Any, results: dict[str, GenerationResult], name: str) -> threading.Thread:
    thread = threading.Thread(target=lambda: results.setdefault(name, complete(model, MESSAGES, GREEDY)))
    thread.start()
    return thread


def test_a_full_line_refuses_at_once_and_a_stale_wait_ends_with_an_error(tmp_path: Path) -> None:
    built: list[_Slow] = []

    def builder(entry: CatalogueEntry) -> ChatModel:
        built.append(_Slow(build_chat_model(entry, cache_dir=tmp_path, warm_up=True)))
        return built[-1]  # type: ignore[return-value]

    with ModelPool(ENTRIES, memory_budget_mb=1000, cache_dir=tmp_path, builder=builder,
                   max_outstanding=2, queue_deadline_s=1.0) as pool:
        assert pool.wait_ready(timeout=300) == ["tiny-llama"]
        model = pool.get("tiny-llama")
        # Compile first: a request stuck behind a compile meets the deadline too, so try a few times.
        warm = [complete(model, MESSAGES, GREEDY).finish_reason for _ in range(5)]
        assert "error" not in warm[-2:], warm
        built[0].delay_s = 0.6
        results: dict[str, GenerationResult] = {}
        first = _in_background(model, results, "first")
        while pool.status()["tiny-llama"].outstanding < 1:
            time.sleep(0.001)
        second = _in_background(model, results, "second")
        while pool.status()["tiny-llama"].outstanding < 2:
            time.sleep(0.001)
        with pytest.raises(ModelBusyError, match="2 requests in line"):
            complete(model, MESSAGES, GREEDY)
        first.join(30)
        second.join(30)
        assert results["first"].finish_reason != "error", "served within the deadline"
        assert results["second"].finish_reason == "error" and "waited" in (results["second"].error or "")
        assert pool.status()["tiny-llama"].outstanding == 0
        built[0].delay_s = 0.0
        assert complete(model, MESSAGES, GREEDY).finish_reason != "error", "the line is free again"


def test_bad_line_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_outstanding"):
        ModelPool(ENTRIES, memory_budget_mb=1000, cache_dir=tmp_path, max_outstanding=0, start=False)
    with pytest.raises(ValueError, match="queue_deadline_s"):
        ModelPool(ENTRIES, memory_budget_mb=1000, cache_dir=tmp_path, queue_deadline_s=0, start=False)
