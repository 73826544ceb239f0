"""The model pool on real tiny models: progress, many threads at once, isolation, budget, cancellation."""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest

from inference.builder import MemoryEstimate, build_chat_model
from inference.catalogue import CatalogueEntry, load_catalogue
from inference.local import LocalChatModel
from inference.pool import ModelNotReadyError, ModelPool, ModelStatus
from inference.protocol import (
    BatchingChatModel,
    CancelToken,
    ChatMessage,
    ChatModel,
    GenerationParams,
    GenerationResult,
    StreamEvent,
    TextDelta,
    complete,
)

REPO = Path(__file__).resolve().parents[2]
ENTRIES = load_catalogue(REPO / "tests/data/tiny_catalogue.toml")
MESSAGES = [ChatMessage("user", "Tell me a story.")]
GREEDY = GenerationParams(max_new_tokens=12)


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ModelPool, list[ModelStatus]]]:
    events: list[ModelStatus] = []
    with ModelPool(
        ENTRIES, memory_budget_mb=1000, cache_dir=tmp_path_factory.mktemp("c"), on_progress=events.append
    ) as p:
        assert p.wait_ready(timeout=300) == ["tiny-llama", "tiny-gemma3"]
        yield p, events


def test_loads_in_catalogue_order_with_progress(pool: tuple[ModelPool, list[ModelStatus]]) -> None:
    p, events = pool
    for slug in ("tiny-llama", "tiny-gemma3"):
        states = [(e.state, e.message) for e in events if e.slug == slug]
        # the loading stages reach the start-up screen as the status message
        assert states == [("loading", ""), ("loading", "read"), ("loading", "convert"), ("compiling", ""),
                          ("ready", "")]
    order = [(e.slug, e.state) for e in events]
    assert order.index(("tiny-llama", "ready")) < order.index(("tiny-gemma3", "loading"))
    status = p.status()
    assert status["tiny-gemma3"].state == "ready" and status["tiny-gemma3"].memory_mb == 50
    assert status["tiny-llama"].load_seconds is not None
    assert p.ready_slugs() == p.slugs() == ["tiny-llama", "tiny-gemma3"]
    model = p._workers["tiny-llama"].model
    assert isinstance(model, LocalChatModel)  # warm-up compiled the smallest and the 200-token buckets
    # (kind, batch, prompt width | cache length): the 1-token and 200-token prompts, and the batch
    # sizes the pool warms for concurrent visitors.
    assert {("prefill", 1, 32), ("prefill", 1, 256), ("step", 1, 128), ("step", 1, 256), ("step", 2, 256),
            ("step", 4, 256), ("step", 8, 256)} <= model.compiled_shapes


def test_concurrent_requests_from_many_threads(pool: tuple[ModelPool, list[ModelStatus]]) -> None:
    p, _ = pool
    expected = {slug: complete(p.get(slug), MESSAGES, GREEDY) for slug in p.ready_slugs()}
    results: list[tuple[str, GenerationResult, str]] = []
    lock = threading.Lock()

    def ask(slug: str) -> None:
        deltas: list[str] = []
        result = None
        for event in p.get(slug).stream(MESSAGES, GREEDY):
            if isinstance(event, TextDelta):
                deltas.append(event.text)
            else:
                result = event
        assert result is not None
        with lock:
            results.append((slug, result, "".join(deltas)))

    threads = [threading.Thread(target=ask, args=(slug,)) for slug in p.ready_slugs() for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(results) == 12
    for slug, result, streamed in results:
        assert result.finish_reason == expected[slug].finish_reason != "error"
        assert result.text == streamed == expected[slug].text
        assert result.new_tokens == expected[slug].new_tokens
    for slug in p.ready_slugs():  # all JAX work ran on the model's own thread
        model = p._workers[slug].model
        assert isinstance(model, LocalChatModel)
        assert model.engine is not None and model.engine.threads_used == {f"model-{slug}"}


def test_closing_a_stream_early_cancels_and_frees_the_worker(
    pool: tuple[ModelPool, list[ModelStatus]],
) -> None:
    p, _ = pool
    model = p.get("tiny-llama")
    cancel = CancelToken()
    events = model.stream(MESSAGES, GenerationParams(max_new_tokens=500), cancel=cancel)
    stream = cast(Generator[StreamEvent, None, None], events)
    first = next(stream)
    assert isinstance(first, TextDelta | GenerationResult)
    stream.close()  # the visitor left
    assert cancel.cancelled
    after = complete(model, MESSAGES, GREEDY)  # the worker is free again, promptly
    assert after.finish_reason in ("length", "stop") and after.new_tokens <= 12
    assert after.total_ms < 60_000


def test_unknown_and_disabled_models(tmp_path: Path, pool: tuple[ModelPool, list[ModelStatus]]) -> None:
    p, _ = pool
    with pytest.raises(KeyError, match="unknown model 'nope'"):
        p.get("nope")
    disabled = [ENTRIES[0], replace(ENTRIES[1], enabled=False)]
    other = ModelPool(disabled, memory_budget_mb=100, cache_dir=tmp_path, start=False)
    assert other.slugs() == ["tiny-llama"]
    with pytest.raises(ModelNotReadyError, match="'tiny-llama' is queued"):
        other.get("tiny-llama")


class _Exploding:
    """A real tiny model whose stream raises for one message: the pool must contain the damage."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner

    @property
    def slug(self) -> str:
        return self.inner.slug

    def stream(
        self, messages: Sequence[ChatMessage], params: GenerationParams, **kw: Any
    ) -> Iterator[StreamEvent]:
        if messages[-1].content == "boom":
            raise RuntimeError("kaboom in the model")
        yield from self.inner.stream(messages, params, **kw)


def test_failures_are_isolated_to_the_request_and_the_model(tmp_path: Path) -> None:
    broken = replace(ENTRIES[1], slug="broken", source="tiny:nonexistent")

    def builder(entry: CatalogueEntry) -> ChatModel:
        return _Exploding(build_chat_model(entry, cache_dir=tmp_path, warm_up=False))

    with ModelPool([broken, ENTRIES[0]], memory_budget_mb=1000, cache_dir=tmp_path, builder=builder) as p:
        assert p.wait_ready(timeout=300) == ["tiny-llama"]
        status = p.status()["broken"]
        assert status.state == "failed" and "unknown tiny family 'nonexistent'" in status.message
        with pytest.raises(ModelNotReadyError, match="broken' is failed: ValueError"):
            p.get("broken")
        model = p.get("tiny-llama")
        boom = complete(model, [ChatMessage("user", "boom")], GREEDY)
        assert boom.finish_reason == "error" and "kaboom in the model" in (boom.error or "")
        bad = complete(model, [ChatMessage("assistant", "wrong order")], GREEDY)
        assert bad.finish_reason == "error" and "TemplateError" in (bad.error or "")
        fine = complete(model, MESSAGES, GREEDY)
        assert fine.finish_reason != "error" and fine.new_tokens > 0


def test_without_batching_a_local_model_answers_one_request_at_a_time(tmp_path: Path) -> None:
    """``batching=False``: the worker streams each request through the model, passing its time in line
    (the model declares :class:`BatchingChatModel`; keras-hub's weights released, as the pool does, a
    probe of its ``runner`` raised instead). A wrapper that declares only ``ChatModel`` is streamed
    plainly."""
    with ModelPool(ENTRIES[:1], memory_budget_mb=1000, cache_dir=tmp_path, batching=False) as p:
        assert p.wait_ready(timeout=300) == ["tiny-llama"]
        model = p._workers["tiny-llama"].model
        assert isinstance(model, BatchingChatModel) and model.supports_batching
        assert not isinstance(_Exploding(model), BatchingChatModel)
        result = complete(p.get("tiny-llama"), MESSAGES, GREEDY)
        assert result.finish_reason != "error", result.error
        assert result.new_tokens > 0


def test_a_library_exiting_during_a_load_marks_the_model_failed(tmp_path: Path) -> None:
    def builder(entry: CatalogueEntry) -> ChatModel:
        if entry.slug == "tiny-gemma3":
            raise SystemExit("a library called sys.exit while loading")
        return build_chat_model(entry, cache_dir=tmp_path, warm_up=False)

    with ModelPool(ENTRIES, memory_budget_mb=1000, cache_dir=tmp_path, builder=builder) as p:
        assert p.wait_ready(timeout=300) == ["tiny-llama"]
        status = p.status()["tiny-gemma3"]
        assert status.state == "failed" and "SystemExit: a library called sys.exit" in status.message


def test_memory_budget_refuses_with_a_clear_message_and_close_ends_requests(tmp_path: Path) -> None:
    built: list[str] = []

    def builder(entry: CatalogueEntry) -> ChatModel:
        built.append(entry.slug)
        return build_chat_model(entry, cache_dir=tmp_path, warm_up=False)

    with ModelPool(
        ENTRIES, memory_budget_mb=100, cache_dir=tmp_path, builder=builder, estimator=lambda e: 60
    ) as p:
        assert p.wait_ready(timeout=300) == ["tiny-llama"]
        refused = p.status()["tiny-gemma3"]
        assert refused.state == "refused" and refused.memory_mb == 60
        assert "needs ~60 MB but only 40 MB of the 100 MB budget is left" in refused.message
        assert "ARENA_MEMORY_BUDGET_MB" in refused.message
        assert built == ["tiny-llama"]  # the refused model was never loaded
        with pytest.raises(ModelNotReadyError, match="refused"):
            p.get("tiny-gemma3")
        model = p.get("tiny-llama")
    # After close(): a handle taken before gets an error result instead of waiting forever.
    assert not p._workers["tiny-llama"].thread.is_alive()
    late = complete(model, MESSAGES, GREEDY)
    assert late.finish_reason == "error" and "was shut down" in (late.error or "")
    with pytest.raises(ModelNotReadyError, match="pool is closed"):
        p.get("tiny-llama")


def test_pool_shards_models_on_a_mesh_and_answers_the_same(
    tmp_path: Path, pool: tuple[ModelPool, list[ModelStatus]]
) -> None:
    import jax

    from inference.sharding import make_mesh

    if len(jax.devices()) < 2:
        pytest.skip("needs several devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)")
    plain, _ = pool
    with ModelPool(ENTRIES, memory_budget_mb=1000, cache_dir=tmp_path, mesh=make_mesh()) as sharded:
        assert sharded.wait_ready(timeout=300) == ["tiny-llama", "tiny-gemma3"], sharded.status()
        for slug in sharded.ready_slugs():
            model = sharded._workers[slug].model
            assert isinstance(model, LocalChatModel)
            # The pool serves from the fast engine's converted weights (keras-hub's copy is freed): they
            # keep the mesh's split, every layer's projections included.
            assert model.engine is not None and model.loaded.backbone is None
            layers = model.engine.params["layers"]
            for name in ("qkv", "down"):
                assert all(not layer[name].sharding.is_fully_replicated for layer in layers), name
            expected = complete(plain.get(slug), MESSAGES, GREEDY)
            got = complete(sharded.get(slug), MESSAGES, GREEDY)
            assert (got.text, got.new_tokens, got.finish_reason) == (
                expected.text,
                expected.new_tokens,
                expected.finish_reason,
            )


def test_remote_entries_join_the_pool_without_memory(tmp_path: Path) -> None:
    from inference.catalogue import parse_catalogue
    from inference.remote import RemoteChatModel

    (remote,) = parse_catalogue(
        """
[[model]]
slug = "far-away"
name = "Far away"
family = "remote"
source = "remote:http://127.0.0.1:9/v1"
remote_model = "served-name"
"""
    )
    with ModelPool([remote], memory_budget_mb=1, cache_dir=tmp_path, api_keys={"far-away": "k"}) as p:
        assert p.wait_ready(timeout=30) == ["far-away"]
        status = p.status()["far-away"]
        assert status.memory_mb == 0
        inner = p._workers["far-away"].model
        assert (
            isinstance(inner, RemoteChatModel) and inner.endpoint == "http://127.0.0.1:9/v1/chat/completions"
        )
        failed = complete(p.get("far-away"), MESSAGES, GenerationParams(max_new_tokens=2))
        assert failed.finish_reason == "error" and failed.error  # nothing listens there: a clean error result


def test_a_model_loads_when_its_peak_fits_and_then_holds_its_resident_share(tmp_path: Path) -> None:
    """Budget 100: the first model peaks at 90 and keeps 30; the second's peak of 70 fits the 70 left."""
    estimates = {"tiny-llama": MemoryEstimate(peak_mb=90, resident_mb=30),
                 "tiny-gemma3": MemoryEstimate(peak_mb=70, resident_mb=30)}
    def estimator(entry: CatalogueEntry) -> MemoryEstimate:
        return estimates[entry.slug]

    with ModelPool(ENTRIES, memory_budget_mb=100, cache_dir=tmp_path, estimator=estimator) as p:
        assert p.wait_ready(timeout=300) == ["tiny-llama", "tiny-gemma3"]
        assert {s.slug: s.memory_mb for s in p.status().values()} == {"tiny-llama": 30, "tiny-gemma3": 30}
    estimates["tiny-gemma3"] = MemoryEstimate(peak_mb=71, resident_mb=30)
    with ModelPool(ENTRIES, memory_budget_mb=100, cache_dir=tmp_path, estimator=estimator) as p:
        assert p.wait_ready(timeout=300) == ["tiny-llama"]
        assert "needs ~71 MB but only 70 MB" in p.status()["tiny-gemma3"].message


def test_the_pools_remote_timeouts_bound_its_remote_models(tmp_path: Path) -> None:
    """ARENA_REMOTE_REPLY_DEADLINE_S reaches the remote engine through the pool: a stream that never
    ends is cut at the pool's total deadline (0.5 s here), not at the engine's default of minutes."""
    import time

    from inference.catalogue import parse_catalogue
    from tests.fake_openai import Handler, serve

    def endless(h: Handler, attempt: int) -> None:
        h.start_sse()
        stop = time.monotonic() + 10
        while time.monotonic() < stop:
            h.delta("t")
            time.sleep(0.02)
        h.done()

    with serve(endless) as server:
        (remote,) = parse_catalogue(f"""
[[model]]
slug = "endless"
name = "Endless"
family = "remote"
source = "remote:{server.base_url}"
remote_model = "tiny"
""")
        with ModelPool([remote], memory_budget_mb=1, cache_dir=tmp_path, remote_timeouts=(0.5, 5.0)) as p:
            assert p.wait_ready(timeout=30) == ["endless"]
            started = time.monotonic()
            result = complete(p.get("endless"), MESSAGES, GenerationParams(max_new_tokens=30_000))
            assert result.finish_reason == "error" and time.monotonic() - started < 5
