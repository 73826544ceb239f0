"""``python -m inference bench``: how fast one model loads, compiles and streams on this machine.

Figures (all wall-clock, this process): load, warm-up compile, time to first token and decode speed of
the streaming engine (median of ``runs``), the cost of switching sampling settings (should be ~1x:
nothing recompiles), and keras-hub's own compiled ``generate()`` on the same prompt for a ratio; the
issue-7 contract's concurrency figures; resident memory. Fidelity: :mod:`bench.inference_fidelity`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import inference_anchor as anchor
from inference.catalogue import CatalogueEntry
from inference.engine import TokenTrace
from inference.local import LocalChatModel
from inference.protocol import (
    BatchingChatModel,
    ChatMessage,
    ChatModel,
    Emit,
    GenerationParams,
    GenerationResult,
    StreamEvent,
)
from inference.split_weights import Progress

BENCH_MESSAGES = [
    ChatMessage(
        "system",
        "You are a helpful vocal assistant on a mobile device. Your job is to translate user requests into "
        "API calls using this Python API:\naction.add_calendar_entry(title, date=\"YYYY-MM-DD\", "
        "time=\"HH:MM\", duration=m) # duration in minutes\naction.remove_calendar_entry(title, date, time)\n"
        "You can use 30 minutes as the default duration for new events. Respond to every request with a "
        "single line of executable code.",
    ),
    ChatMessage("user", "Add a meeting with Fred on Nov 11 at 5PM"),
]


def _timed_run(model: LocalChatModel, ids: list[int], params: GenerationParams) -> tuple[float, float, int]:
    """(ttft_ms, decode tokens/s after the first token, tokens) for one stop-free generation."""
    trace = TokenTrace(ids=[])
    result = None
    for event in serve_ids(model, ids, params, trace=trace):
        result = event
    assert isinstance(result, GenerationResult)
    decode_s = (result.total_ms - (result.ttft_ms or 0.0)) / 1000
    rate = (len(trace.ids) - 1) / decode_s if decode_s > 0 else float("nan")
    return float(result.ttft_ms or 0.0), rate, len(trace.ids)


def local_model(model: ChatModel) -> LocalChatModel:
    """The model a bench measures runs in this process (a :class:`inference.protocol.BatchingChatModel`,
    built as :class:`inference.local.LocalChatModel`); a remote one is refused before it gets here."""
    if not (isinstance(model, BatchingChatModel) and isinstance(model, LocalChatModel)):
        raise ValueError(f"bench measures local models, not {type(model).__name__}")
    return model


def _forget_prefixes(model: LocalChatModel) -> None:
    """Every run starts cold: no kept row of the previous run's identical prompt is reused (llama.cpp's
    anchor resets its cache before each run too). Requests of one round still share a prompt's prefill."""
    model.batcher.forget_prefixes()


def serve_ids(model: LocalChatModel, ids: list[int], params: GenerationParams, *, trace: TokenTrace,
              started: float | None = None, cold: bool = True) -> Iterator[StreamEvent]:
    """The model's serving path (the fast engine, else keras-hub's, both behind its batcher), stop-free
    so every run is as long; ``cold``: no prefix kept from an earlier run is reused."""
    if cold:
        _forget_prefixes(model)
    saved, model.stop_ids = model.stop_ids, frozenset()
    try:
        yield from model.stream_ids(ids, params, started=started, trace=trace)
    finally:
        model.stop_ids = saved


def _keras_generate_rate(model: LocalChatModel, ids: list[int], new_tokens: int) -> float:
    """keras-hub's compiled while-loop generate (greedy), tokens/s over the whole call, second call."""
    import numpy as np

    lm = model.runner.lm
    lm.compile(sampler="greedy")
    length = model.runner.cache_length_for(len(ids) + new_tokens)
    tokens = np.zeros((1, length), "int32")
    tokens[0, : len(ids)] = ids
    mask = np.zeros((1, length), bool)
    mask[0, : len(ids)] = True
    fn = lm.make_generate_function()
    fn({"token_ids": tokens, "padding_mask": mask}, stop_token_ids=None)
    start = time.perf_counter()
    out = fn({"token_ids": tokens, "padding_mask": mask}, stop_token_ids=None)
    np.asarray(out["token_ids"])  # JAX dispatches asynchronously: wait for the result
    return (length - len(ids)) / (time.perf_counter() - start)


def run_bench(
    entry: CatalogueEntry, *, cache_dir: Path, new_tokens: int, runs: int, progress: Progress | None = None
) -> dict[str, Any]:
    from inference.builder import build_chat_model

    t0 = time.perf_counter()
    model = local_model(build_chat_model(entry, cache_dir=cache_dir, warm_up=False, progress=progress))
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    model.warm_up()
    warm_up_s = time.perf_counter() - t0
    ids = model.prompt_ids(BENCH_MESSAGES, GenerationParams(max_new_tokens=new_tokens))
    greedy = GenerationParams(max_new_tokens=new_tokens)
    t0 = time.perf_counter()
    _timed_run(model, ids, greedy)  # compiles this prompt's buckets
    first_run_s = time.perf_counter() - t0
    measured = [_timed_run(model, ids, greedy) for _ in range(runs)]
    settings = [(0.7, 0.9, 0), (1.0, 1.0, 40), (0.3, 0.5, 10)][:runs]
    sampled = [
        _timed_run(model, ids, GenerationParams(new_tokens, temperature=t, top_p=p, top_k=k, seed=i))
        for i, (t, p, k) in enumerate(settings)
    ]
    greedy_rate = statistics.median(r for _, r, _ in measured)
    sampled_rate = statistics.median(r for _, r, _ in sampled)
    keras_rate = _keras_generate_rate(model, ids, new_tokens)
    return {
        "model": entry.slug,
        "prompt_tokens": len(ids),
        "new_tokens": new_tokens,
        "load_s": round(load_s, 2),
        "warm_up_compile_s": round(warm_up_s, 2),
        "first_request_s": round(first_run_s, 2),
        "ttft_ms_median": round(statistics.median(t for t, _, _ in measured), 1),
        "decode_tok_s_greedy": round(greedy_rate, 1),
        "decode_tok_s_sampled": round(sampled_rate, 1),
        "sampled_over_greedy": round(sampled_rate / greedy_rate, 2),
        "keras_generate_tok_s": round(keras_rate, 1),
        "stream_over_keras_generate": round(greedy_rate / keras_rate, 2),
        "compiled_shapes": len(model.compiled_shapes),
        "weights": model.weight_format if model.engine is not None else "keras-hub",
        "stored_weights": model.from_store,
    }


# ---- the issue-7 contract: concurrency, medians over repeats ---------------------------------------

CONTRACT_PROMPT_TOKENS = 100
CONTRACT_NEW_TOKENS = 64


def fixed_prompt(ids: list[int], length: int) -> list[int]:
    """Exactly ``length`` ids ending like ``ids`` (the generation header), so every model and run
    prefills the same amount of work; a short prompt is repeated, a long one keeps its tail."""
    if not ids:
        raise ValueError("empty prompt")
    repeated = ids * (length // len(ids) + 1)
    return repeated[-length:]


def rss_mb() -> int:
    """Resident memory of this process now (Linux ``/proc``), else the peak from ``getrusage``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) // 1024


def _concurrent_round(
    model: LocalChatModel, ids: list[int], params: GenerationParams, clients: int
) -> dict[str, float]:
    """``clients`` threads submit the same request at once; each one's ttft counts its queue wait.

    Requests go through the model's own lock (one generation at a time, as the pool's worker serves
    them), so the figures show what a visitor sees when ``clients`` people press send together.
    """
    import threading

    results: list[tuple[float, float, int]] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(clients + 1)
    lock = threading.Lock()  # one generation at a time, as the pool's worker serves a serial model

    def client() -> None:
        barrier.wait()
        submitted = time.perf_counter()
        try:
            with lock:
                trace = TokenTrace(ids=[])
                result = None
                for event in serve_ids(model, ids, params, trace=trace, started=submitted):
                    result = event
            assert isinstance(result, GenerationResult)
            ttft = float(result.ttft_ms or 0.0)
            decode_s = (result.total_ms - ttft) / 1000
            rate = (len(trace.ids) - 1) / decode_s if decode_s > 0 else float("nan")
            results.append((ttft, rate, len(trace.ids)))
        except BaseException as exc:  # surfaced below, on the bench's thread
            errors.append(exc)

    threads = [threading.Thread(target=client, name=f"bench-client-{i}") for i in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    if errors:
        raise errors[0]
    return {
        "ttft_ms": statistics.median(r[0] for r in results),
        "decode_tok_s": statistics.median(r[1] for r in results),
        "aggregate_tok_s": sum(r[2] for r in results) / wall,
        "reused_prompt_tokens": 0,  # each request starts cold, after the one before it ended
    }


def _batched_round(
    model: LocalChatModel, ids: list[int], params: GenerationParams, clients: int
) -> dict[str, float]:
    """``clients`` requests submitted at once to the model's dynamic batcher, ticked to the end."""
    results: list[GenerationResult] = []
    batcher = model.batcher
    _forget_prefixes(model)
    reused = batcher.reused_tokens
    start = time.perf_counter()
    for _ in range(clients):
        batcher.submit(ids, params, stop_ids=(), emit=_keep_results(results), started=start)
    batcher.run_until(lambda: False)
    wall = time.perf_counter() - start
    failed = [r.error for r in results if r.error]
    if failed:
        raise RuntimeError(failed[0])
    rates = [(r.new_tokens - 1) / ((r.total_ms - (r.ttft_ms or 0.0)) / 1000) for r in results]
    return {
        "ttft_ms": statistics.median(float(r.ttft_ms or 0.0) for r in results),
        "decode_tok_s": statistics.median(rates),
        "aggregate_tok_s": sum(r.new_tokens for r in results) / wall,
        "reused_prompt_tokens": batcher.reused_tokens - reused,
    }


FOLLOW_UP_TOKENS = 20  # the "correction" a follow-up turn adds after the first turn's reply


def _follow_up(model: LocalChatModel, ids: list[int], params: GenerationParams) -> dict[str, Any] | None:
    """A dialogue's next turn as the arena sends it (the first turn's prompt, its reply, then
    FOLLOW_UP_TOKENS more): its ttft with the first turn's cache row kept, and cold. Each is timed on
    its second run (the first compiles its shapes)."""
    batcher = model.batcher
    reply = TokenTrace(ids=[])
    one = GenerationParams(max_new_tokens=1)

    def ttft(prompt: list[int], *, cold: bool) -> float:
        result = None
        for event in serve_ids(model, prompt, one, trace=TokenTrace(ids=[]), cold=cold):
            result = event
        assert isinstance(result, GenerationResult)
        return float(result.ttft_ms or 0.0)

    reused: list[float] = []
    before = batcher.reused_tokens
    for _ in range(2):
        list(serve_ids(model, ids, params, trace=reply))  # the first turn, cold: its row is kept
        follow = ids + reply.ids + ids[:FOLLOW_UP_TOKENS]
        reused.append(ttft(follow, cold=False))
    copied = (batcher.reused_tokens - before) // 2
    cold = [ttft(follow, cold=True) for _ in range(2)]
    return {"prompt_tokens": len(follow), "reused_prompt_tokens": copied,
            "ttft_ms": round(reused[-1], 1), "ttft_ms_cold": round(cold[-1], 1)}


def _keep_results(results: list[GenerationResult]) -> Emit:
    def emit(event: StreamEvent) -> None:
        if isinstance(event, GenerationResult):
            results.append(event)

    return emit


def run_concurrency_bench(
    entry: CatalogueEntry,
    *,
    cache_dir: Path,
    concurrency: list[int],
    runs: int,
    prompt_tokens: int = CONTRACT_PROMPT_TOKENS,
    new_tokens: int = CONTRACT_NEW_TOKENS,
    batching: bool = True,
    progress: Progress | None = None,
    anchor_python: str | None = None,
) -> dict[str, Any]:
    """``{model, cold_start_s, rss_mb, results: [{concurrency, ttft_ms, decode_tok_s, aggregate_tok_s}]}``.

    ``cold_start_s`` is build + the first (greedy, stop-free) reply in this process, compiles included:
    what the first visitor waits after a restart (with or without a warm persistent compilation
    cache, whichever the caller set up; ``stored_weights``: read back as an earlier start stored
    them). Every figure per concurrency is the median over ``runs``
    rounds; ``ttft_ms`` and ``decode_tok_s`` are medians over the round's requests too.
    ``batching``: requests share the dynamic batcher's decode steps (as the pool with
    ``batching=True`` serves them); off, they take turns on the batch-1 engine.
    ``anchor_python`` (not None; ``""`` for the default interpreter): llama.cpp on the same GGUF file and
    prompt ids (:mod:`bench.inference_anchor`), loaded after our cold start and run once after each of our
    measured rounds (ours idle meanwhile), so both see the same minutes of a shared machine: ``anchor``
    (medians over its runs) and ``ratios``.
    """
    from inference.builder import build_chat_model

    if not concurrency or min(concurrency) < 1 or runs < 1:
        raise ValueError("concurrency levels and runs must be >= 1")
    t0 = time.perf_counter()
    model = local_model(build_chat_model(entry, cache_dir=cache_dir, warm_up=False, keep_keras_weights=False,
                                    progress=progress))
    load_s = time.perf_counter() - t0
    params = GenerationParams(max_new_tokens=new_tokens)
    ids = fixed_prompt(model.prompt_ids(BENCH_MESSAGES, params), prompt_tokens)
    _timed_run(model, ids, params)
    cold_start_s = time.perf_counter() - t0
    measure = _batched_round if batching else _concurrent_round
    session = _anchor_session(entry, cache_dir, ids, new_tokens, anchor_python)
    rows = []
    try:
        for clients in concurrency:
            measure(model, ids, params, clients)  # compiles this batch size's buckets; not measured
            rounds = []
            for _ in range(runs):
                rounds.append(measure(model, ids, params, clients))
                if session is not None:
                    session.run()  # the anchor's turn, right after ours
            rows.append({
                "concurrency": clients,
                **{key: round(statistics.median(r[key] for r in rounds), 1) for key in rounds[0]},
            })
    finally:
        if session is not None:
            session.close()
    out: dict[str, Any] = {
        "model": entry.slug,
        "cold_start_s": round(cold_start_s, 2),
        "rss_mb": rss_mb(),
        "results": rows,
        "prompt_tokens": len(ids),
        "new_tokens": new_tokens,
        "load_s": round(load_s, 2),
        "runs": runs,
        "batching": batching,
        "weights": model.weight_format if model.engine is not None else "keras-hub",
        "stored_weights": model.from_store,
        "compiled_shapes": len(model.compiled_shapes),
    }
    follow_up = _follow_up(model, ids, params)
    if follow_up is not None:
        out["follow_up"] = follow_up
    if session is not None:
        out["anchor"] = session.summary()
        out["ratios"] = anchor.ratios(out, out["anchor"])
    return out


def _anchor_session(entry: CatalogueEntry, cache_dir: Path, ids: list[int], new_tokens: int,
                    anchor_python: str | None) -> anchor.AnchorSession | None:
    """llama.cpp loaded and warmed up on the entry's GGUF file (None without ``anchor_python``)."""
    if anchor_python is None:
        return None
    from inference.builder import entry_file

    return anchor.AnchorSession(entry_file(entry, cache_dir=cache_dir), ids, new_tokens=new_tokens,
                                python=anchor_python or None)


def run_resident_bench(
    entries: list[CatalogueEntry], *, cache_dir: Path, new_tokens: int = 16, progress: Progress | None = None
) -> dict[str, Any]:
    """Every entry built and warmed as the pool serves it (keras-hub's copy freed), all resident at once:
    ``{models, rss_mb, weights_mb: {slug: MB}, reply_tokens: {slug: n}}`` after one short reply each."""
    from inference.builder import build_chat_model
    from inference.engine.weights import weight_bytes

    models: list[LocalChatModel] = []
    for entry in entries:
        model = local_model(build_chat_model(entry, cache_dir=cache_dir, warm_up=True,
                                        keep_keras_weights=False, progress=progress))
        models.append(model)
    params = GenerationParams(max_new_tokens=new_tokens, temperature=0.0)
    replies = {}
    for entry, model in zip(entries, models, strict=True):
        trace = TokenTrace(ids=[])
        list(serve_ids(model, model.prompt_ids(BENCH_MESSAGES, params), params, trace=trace))
        replies[entry.slug] = len(trace.ids)
    return {
        "models": [e.slug for e in entries],
        "rss_mb": rss_mb(),
        "weights_mb": {e.slug: round(weight_bytes(m.engine.params) / 2**20) if m.engine is not None else None
                       for e, m in zip(entries, models, strict=True)},
        "reply_tokens": replies,
    }
