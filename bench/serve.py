"""``python -m inference bench --model M --concurrency 1,8,32 --serve [--anchor llama.cpp]``: the same N
concurrent chat streams three ways, one engine after the other (issue 45, item 2):

1. ``in_process``: the model pool, as the web app runs it (continuous batching, the visitor line);
2. ``serve``: through ``python -m inference serve`` over HTTP on loopback, read by this project's remote
   client (:class:`inference.remote.RemoteChatModel`), as an app server with ``family = "remote"`` would;
3. ``llama_cpp_server`` (with ``--anchor llama.cpp``): through llama.cpp's OpenAI-compatible server
   (``python -m llama_cpp.server`` from the anchor interpreter) on the same GGUF file, read by the same
   client: what a user would run instead.

Every stream sends the same chat (a request for a long list, so replies run to ``new_tokens``), greedy.
Per concurrency level: one warm-up round (compiles our shapes, fills llama.cpp's cache), then ``runs``
measured rounds; the best round's aggregate tokens per second (every stream's new tokens over the
round's wall time) and its time-to-first-token median and worst. Ratios: serve / in-process (what HTTP
costs) and serve / llama.cpp server.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.processes import free_port, started, wait_for
from inference.protocol import ChatMessage, ChatModel, GenerationParams, GenerationResult

PROMPT = (ChatMessage(role="user",
                      content="Write the numbers from one to three hundred in words, one per line."),)
READY_TIMEOUT_S = 900.0  # a cold start converts and compiles the model


def stream_round(model: ChatModel, concurrency: int, params: GenerationParams) -> dict[str, Any]:
    """``concurrency`` streams of :data:`PROMPT` at once; aggregate tokens per second and TTFT."""
    results: list[GenerationResult] = []
    lock = threading.Lock()

    def one() -> None:
        for event in model.stream(PROMPT, params):
            if isinstance(event, GenerationResult):
                with lock:
                    results.append(event)

    threads = [threading.Thread(target=one) for _ in range(concurrency)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    failed = [r.error for r in results if r.error is not None]
    ttfts = sorted(r.ttft_ms for r in results if r.ttft_ms is not None)
    tokens = sum(r.new_tokens for r in results)
    return {
        "concurrency": concurrency,
        "aggregate_tok_s": round(tokens / wall, 1),
        "new_tokens": tokens,
        "fewest_tokens": min((r.new_tokens for r in results), default=0),  # a reply cut short shows here
        "wall_s": round(wall, 2),
        "ttft_ms_p50": round(statistics.median(ttfts), 1) if ttfts else None,
        "ttft_ms_max": round(ttfts[-1], 1) if ttfts else None,
        "errors": len(failed) + concurrency - len(results),
        "first_error": failed[0] if failed else None,
    }


def measure(model: ChatModel, levels: Sequence[int], *, runs: int, new_tokens: int,
            progress: Callable[[str], None]) -> list[dict[str, Any]]:
    """Per level, a warm-up round then the best of ``runs`` rounds (by aggregate tokens per second)."""
    params = GenerationParams(max_new_tokens=new_tokens, temperature=0.0)
    rows = []
    for level in levels:
        stream_round(model, level, params)
        rounds = [stream_round(model, level, params) for _ in range(runs)]
        best = max(rounds, key=lambda r: r["aggregate_tok_s"])
        progress(f"c={level}: {best['aggregate_tok_s']} tok/s, ttft p50 {best['ttft_ms_p50']} ms")
        rows.append(best)
    return rows


def _models_ready(url: str, slugs: Sequence[str]) -> bool:
    """``/v1/models`` answers and lists every one of ``slugs`` as ready."""
    with urllib.request.urlopen(f"{url}/v1/models", timeout=5) as answer:
        listed = json.load(answer)["data"]
    return set(slugs) <= {m["id"] for m in listed if m.get("ready", True)}


@contextmanager
def server(command: Sequence[str], *, slugs: Sequence[str] = (), env: dict[str, str] | None = None,
           log: Path | None = None) -> Iterator[str]:
    """An OpenAI-compatible server process on a free loopback port (``{port}`` in ``command``), ready
    (every one of ``slugs`` listed as ready); its base URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with started([part.replace("{port}", str(port)) for part in command], env=env, log=log) as process:
        wait_for(lambda: _models_ready(url, slugs), process, timeout=READY_TIMEOUT_S, what=command[0],
                 every=1.0)
        yield url


def _remote(slug: str, url: str, model: str) -> ChatModel:
    from inference.remote import RemoteChatModel

    return RemoteChatModel(slug, url, model, read_timeout=600.0, total_timeout=3_600.0, idle_timeout=600.0)


def _in_process(entry: Any, levels: Sequence[int], *, runs: int, new_tokens: int,
                progress: Callable[[str], None]) -> list[dict[str, Any]]:
    from settings import get_settings_without_secrets
    from wiring import model_pool

    pool = model_pool(get_settings_without_secrets(), [entry], visitor_queue=True)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while entry.slug not in pool.ready_slugs():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{entry.slug} did not load in {READY_TIMEOUT_S:.0f} s")
            time.sleep(0.5)
        return measure(pool.get(entry.slug), levels, runs=runs, new_tokens=new_tokens, progress=progress)
    finally:
        pool.close()


def _ratios(ours: list[dict[str, Any]], other: list[dict[str, Any]]) -> dict[str, float]:
    return {str(a["concurrency"]): round(a["aggregate_tok_s"] / b["aggregate_tok_s"], 2)
            for a, b in zip(ours, other, strict=True) if b["aggregate_tok_s"]}


def run_serve_bench(entry: Any, gguf: Path | None, levels: Sequence[int], *, runs: int, new_tokens: int,
                    anchor_python: str | None, progress: Callable[[str], None]) -> dict[str, Any]:
    """The three engines (the third only with ``anchor_python``), their figures and ratios."""
    # Every level's streams must get a place in line, in process and behind the server alike.
    os.environ["ARENA_MODEL_QUEUE_LIMIT"] = str(max(16, 2 * max(levels)))
    report: dict[str, Any] = {"model": entry.slug, "new_tokens": new_tokens, "runs": runs}
    progress("in process (the pool)")
    report["in_process"] = _in_process(entry, levels, runs=runs, new_tokens=new_tokens, progress=progress)
    progress("through python -m inference serve")
    ours = [sys.executable, "-m", "inference", "serve", "--models", entry.slug, "--port", "{port}"]
    with server(ours, slugs=[entry.slug], env=dict(os.environ)) as url:
        report["serve"] = measure(_remote(entry.slug, url, entry.slug), levels, runs=runs,
                                  new_tokens=new_tokens, progress=progress)
    report["serve_over_in_process"] = _ratios(report["serve"], report["in_process"])
    if anchor_python is not None and gguf is not None:
        progress("through llama.cpp's server (python -m llama_cpp.server)")
        theirs = [anchor_python, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
                  "--port", "{port}", "--n_ctx", "4096", "--n_threads", str(os.cpu_count() or 1),
                  "--model_alias", entry.slug,
                  # Its default lets a new request interrupt the one running: concurrent streams would cut
                  # each other short. Queued instead, each reply runs to its end, as ours do.
                  "--interrupt_requests", "False"]
        with server(theirs) as url:
            report["llama_cpp_server"] = measure(_remote(entry.slug, url, entry.slug), levels, runs=runs,
                                                 new_tokens=new_tokens, progress=progress)
        report["serve_over_llama_cpp_server"] = _ratios(report["serve"], report["llama_cpp_server"])
    return report
