"""The pool records every request's passage in the Prometheus series of ``inference.metrics`` (a real tiny
model behind gates the test opens): queued until its first token, in flight until its result, a full
line's refusal as an error of kind ``busy``."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from commands.inference_serve import readiness
from db.export import error_category
from inference.builder import build_chat_model
from inference.catalogue import CatalogueEntry, load_catalogue
from inference.pool import ModelBusyError, ModelPool
from inference.protocol import ChatMessage, ChatModel, GenerationParams, StreamEvent, complete

REPO = Path(__file__).resolve().parents[2]
ENTRIES = load_catalogue(REPO / "tests/data/tiny_catalogue.toml")[:1]
SLUG = ENTRIES[0].slug
MESSAGES = [ChatMessage("user", "Tell me a story.")]
PARAMS = GenerationParams(max_new_tokens=4)


class _Gated:
    """The real model, held before its first event (``start``) and after it (``finish``)."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner, self.start, self.finish = inner, threading.Event(), threading.Event()

    def stream(
        self, messages: Sequence[ChatMessage], params: GenerationParams, **kw: Any
    ) -> Iterator[StreamEvent]:
        self.start.wait(60)
        for number, event in enumerate(self.inner.stream(messages, params, **kw)):
            yield event
            if number == 0:
                self.finish.wait(60)


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, {"model": SLUG, **labels}) or 0.0


def _until(condition: Any) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, "the gauge never moved"
        time.sleep(0.01)


def test_a_request_is_queued_then_in_flight_then_recorded(tmp_path: Path) -> None:
    built: list[_Gated] = []

    def builder(entry: CatalogueEntry) -> ChatModel:
        built.append(_Gated(build_chat_model(entry, cache_dir=tmp_path, warm_up=True)))
        return built[-1]  # type: ignore[return-value]

    with ModelPool(ENTRIES, memory_budget_mb=1000, cache_dir=tmp_path, builder=builder, max_outstanding=1,
                   error_kind=error_category) as pool:
        assert pool.wait_ready(timeout=300) == [SLUG]
        assert _value("arena_model_ready") == 1
        assert readiness(pool).ready and readiness(pool).detail == {"models_ready": 1, "models": 1}
        model = pool.get(SLUG)
        before = {name: _value(name) for name in ("arena_model_time_to_first_token_seconds_count",
                                                  "arena_model_reply_seconds_count")}
        busy_before = _value("arena_model_errors_total", kind="busy")
        reply = threading.Thread(target=complete, args=(model, MESSAGES, PARAMS))
        reply.start()
        _until(lambda: _value("arena_model_queue_length") == 1)
        assert _value("arena_model_in_flight") == 0

        with pytest.raises(ModelBusyError):
            complete(model, MESSAGES, PARAMS)
        assert _value("arena_model_errors_total", kind="busy") == busy_before + 1, "a full line is busy"

        built[0].start.set()
        _until(lambda: _value("arena_model_in_flight") == 1)
        assert _value("arena_model_queue_length") == 0
        built[0].finish.set()
        reply.join(60)
        assert _value("arena_model_in_flight") == 0 and _value("arena_model_queue_length") == 0
        for name, count in before.items():
            assert _value(name) == count + 1, name
        assert _value("arena_model_generated_tokens_total") >= 1
