"""The speed anchor: llama.cpp (through llama-cpp-python) on the same GGUF file, in the same bench run.

llama-cpp-python is never a dependency of the app or of CI: it compiles for 7-12 minutes on 2 cores.
Build it once per machine in a virtualenv of its own (docs/CLI.md, ``bench --anchor``) and point the
bench at that interpreter (``--anchor-python`` or ``ARENA_ANCHOR_PYTHON``); where ``llama_cpp`` imports
in this interpreter, that is used. Either way it runs in a child process, so its threads and memory are
its own, and both engines are measured in one command on the same token ids, their runs taking turns
(:class:`AnchorSession`).

The child runs :data:`WORKER` (standard library and ``llama_cpp`` only): it loads the file and warms up
with one run, then makes one greedy, stop-free generation of ``new_tokens`` after the given prompt ids per
request; per run the time to the first token (prompt evaluation plus one sampled token) and the decode
rate after it. llama-cpp-python decodes one sequence at
a time, so its single-stream end-to-end rate is the figure our batched aggregate is compared with.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, NoReturn

WORKER = r"""
import json, sys, time
import llama_cpp

args = json.loads(sys.argv[1])
llm = llama_cpp.Llama(model_path=args["model"], n_ctx=args["n_ctx"], n_threads=args["threads"],
                      n_threads_batch=args["threads"], n_batch=512, verbose=False)
ids = args["ids"]


def run():
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
    return {"ttft_ms": (first - start) * 1e3, "decode_tok_s": (count - 1) / (end - first),
            "end_to_end_tok_s": count / (end - start)}


run()  # warms up, not kept
print(json.dumps({"engine": "llama.cpp", "version": getattr(llama_cpp, "__version__", "?"),
                  "threads": args["threads"]}), flush=True)
for line in sys.stdin:  # one timed run per "run" line, until stdin closes
    if line.strip() != "run":
        break
    print(json.dumps(run()), flush=True)
"""
FIGURES = ("ttft_ms", "decode_tok_s", "end_to_end_tok_s")


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
                            "(docs/CLI.md, 'bench --anchor') and pass "
                            "--anchor-python /path/to/venv/bin/python")


class AnchorSession:
    """llama.cpp loaded and warmed up in a child process, one timed run per :meth:`run`, so a bench can
    alternate its own rounds with the anchor's (a shared machine's load drifts over minutes: runs taken
    one after the other compare like with like). Idle between runs: blocked on its stdin."""

    def __init__(self, model: Path, ids: list[int], *, new_tokens: int, threads: int | None = None,
                 python: str | None = None, timeout_s: float = 900) -> None:
        interpreter = anchor_python(python)
        args = {"model": str(model), "ids": ids, "new_tokens": new_tokens,
                "threads": threads or os.cpu_count() or 1, "n_ctx": max(512, len(ids) + new_tokens + 16)}
        self._timeout_s, self._interpreter = timeout_s, interpreter
        self._errors = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed by close(): the child's life)
        self._process = subprocess.Popen([interpreter, "-c", WORKER, json.dumps(args)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self._errors, text=True)
        self._header = {**self._reply(), "new_tokens": new_tokens, "prompt_tokens": len(ids)}
        self.rows: list[dict[str, float]] = []

    def run(self) -> dict[str, float]:
        """One greedy, stop-free generation of ``new_tokens``: its ttft, decode rate and end-to-end rate."""
        assert self._process.stdin is not None
        try:
            self._process.stdin.write("run\n")
            self._process.stdin.flush()
        except OSError:
            self._fail()
        reply = self._reply()
        row = {key: float(reply[key]) for key in FIGURES}
        self.rows.append(row)
        return row

    def summary(self) -> dict[str, Any]:
        """``{engine, version, threads, runs, new_tokens, prompt_tokens, ttft_ms, decode_tok_s,
        end_to_end_tok_s}``: medians over the runs so far."""
        if not self.rows:
            raise ValueError("the anchor has not run yet")
        return {**self._header, "runs": len(self.rows),
                **{key: round(statistics.median(r[key] for r in self.rows), 1) for key in FIGURES}}

    def close(self) -> None:
        if self._process.stdin is not None and not self._process.stdin.closed:
            with contextlib.suppress(OSError):  # the child may have gone already
                self._process.stdin.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._errors.close()

    def __enter__(self) -> AnchorSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _reply(self) -> dict[str, Any]:
        """The child's next JSON line, within the timeout (AnchorUnavailable with its stderr otherwise)."""
        stdout = self._process.stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], self._timeout_s)
        line = stdout.readline() if ready else ""
        if not line:
            self._fail()
        try:
            reply: dict[str, Any] = json.loads(line)
        except json.JSONDecodeError:
            self._fail(f"unexpected output: {line[:200]!r}")
        return reply

    def _fail(self, why: str = "") -> NoReturn:
        self._process.kill()
        self._process.wait()
        self._errors.seek(0)
        detail = why or self._errors.read()[-1500:] or "no reply before the timeout"
        raise AnchorUnavailable(f"llama.cpp run failed ({self._interpreter}):\n{detail}")


def run_anchor(model: Path, ids: list[int], *, new_tokens: int, runs: int, threads: int | None = None,
               python: str | None = None, timeout_s: float = 900) -> dict[str, Any]:
    """llama.cpp's figures on ``model`` for the prompt ``ids``, ``runs`` runs in a row
    (:meth:`AnchorSession.summary`)."""
    with AnchorSession(model, ids, new_tokens=new_tokens, threads=threads, python=python,
                       timeout_s=timeout_s) as session:
        for _ in range(runs):
            session.run()
        return session.summary()


def ratios(ours: dict[str, Any], anchor: dict[str, Any]) -> dict[str, float | None]:
    """Ours over llama.cpp's, from a concurrency bench (``results`` rows) and :meth:`AnchorSession.summary`:
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
