"""The speed anchor: llama.cpp (through llama-cpp-python) on the same GGUF file, in the same bench run.

llama-cpp-python is never a dependency of the app or of CI: it compiles for 7-12 minutes on 2 cores.
Build it once per machine in a virtualenv of its own (README, "Benchmarks") and point the bench at that
interpreter (``--anchor-python`` or ``ARENA_ANCHOR_PYTHON``); where ``llama_cpp`` imports in this
interpreter, that is used. Either way it runs in a child process, so its threads and memory are its own
and both engines are measured one after the other in one command, on the same token ids.

The child runs :data:`WORKER` (standard library and ``llama_cpp`` only): greedy, stop-free generation of
``new_tokens`` after the given prompt ids, ``runs`` times; per run the time to the first token (prompt
evaluation plus one sampled token) and the decode rate after it. llama-cpp-python decodes one sequence at
a time, so its single-stream end-to-end rate is the figure our batched aggregate is compared with.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

WORKER = r'''
import json, statistics, sys, time
import llama_cpp

args = json.loads(sys.argv[1])
llm = llama_cpp.Llama(model_path=args["model"], n_ctx=args["n_ctx"], n_threads=args["threads"],
                      n_threads_batch=args["threads"], n_batch=512, verbose=False)
ids = args["ids"]
rows = []
for run in range(args["runs"] + 1):  # the first run warms up and is not kept
    llm.reset()
    start = time.perf_counter()
    first = None
    count = 0
    for _ in llm.generate(ids, temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0, reset=True):
        count += 1
        if first is None:
            first = time.perf_counter()
        if count >= args["new_tokens"]:
            break
    end = time.perf_counter()
    if run:
        rows.append({"ttft_ms": (first - start) * 1e3, "decode_tok_s": (count - 1) / (end - first),
                     "end_to_end_tok_s": count / (end - start)})
print(json.dumps({
    "engine": "llama.cpp", "version": getattr(llama_cpp, "__version__", "?"), "threads": args["threads"],
    "runs": args["runs"], "new_tokens": args["new_tokens"], "prompt_tokens": len(ids),
    **{key: round(statistics.median(r[key] for r in rows), 1) for key in rows[0]},
}))
'''


class AnchorUnavailable(RuntimeError):
    """llama-cpp-python cannot be run here (the message says how to get it)."""


def anchor_python(explicit: str | None = None) -> str:
    """The interpreter that runs the anchor: ``explicit``, else ``$ARENA_ANCHOR_PYTHON``, else this one
    where ``llama_cpp`` imports in it (AnchorUnavailable otherwise)."""
    chosen = explicit or os.environ.get("ARENA_ANCHOR_PYTHON")
    if chosen:
        if not (Path(chosen).is_file() or shutil.which(chosen)):
            raise AnchorUnavailable(f"anchor interpreter {chosen!r} not found")
        return chosen
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is not None:
        return sys.executable
    raise AnchorUnavailable("llama-cpp-python is not importable here: build it in its own virtualenv "
                            "(README, 'Benchmarks') and pass --anchor-python /path/to/venv/bin/python")


def run_anchor(model: Path, ids: list[int], *, new_tokens: int, runs: int, threads: int | None = None,
               python: str | None = None, timeout_s: float = 900) -> dict[str, Any]:
    """llama.cpp's figures on ``model`` for the prompt ``ids``: ``{engine, version, threads, runs,
    new_tokens, prompt_tokens, ttft_ms, decode_tok_s, end_to_end_tok_s}`` (medians over ``runs``)."""
    interpreter = anchor_python(python)
    args = {"model": str(model), "ids": ids, "new_tokens": new_tokens, "runs": runs,
            "threads": threads or os.cpu_count() or 1, "n_ctx": max(512, len(ids) + new_tokens + 16)}
    done = subprocess.run([interpreter, "-c", WORKER, json.dumps(args)], capture_output=True, text=True,
                          timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise AnchorUnavailable(f"llama.cpp run failed ({interpreter}):\n{done.stderr[-1500:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def ratios(ours: dict[str, Any], anchor: dict[str, Any]) -> dict[str, float | None]:
    """Ours over llama.cpp's, from a concurrency bench (``results`` rows) and :func:`run_anchor`:
    decode at concurrency 1, ttft at 1 (below 1 is faster), and the largest concurrency's aggregate over
    llama.cpp's single-stream end-to-end rate."""
    rows = {row["concurrency"]: row for row in ours["results"]}
    one, top = rows.get(1), rows[max(rows)]

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 2) if a and b else None

    return {
        "decode_c1": ratio(one["decode_tok_s"], anchor["decode_tok_s"]) if one else None,
        "ttft_c1": ratio(one["ttft_ms"], anchor["ttft_ms"]) if one else None,
        f"aggregate_c{max(rows)}_vs_single_stream": ratio(top["aggregate_tok_s"], anchor["end_to_end_tok_s"]),
    }
