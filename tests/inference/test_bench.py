"""``python -m inference bench --concurrency … --json``: the issue-7 JSON contract on a tiny model.

Shapes and invariants only; speed figures live in docs/BENCHMARKS.md, never in assertions on time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.inference import fixed_prompt
from commands.inference import main
from settings import get_settings

REPO = Path(__file__).resolve().parents[2]
ROW_KEYS = {"concurrency", "ttft_ms", "decode_tok_s", "aggregate_tok_s", "reused_prompt_tokens"}


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("ARENA_CATALOGUE_PATH", str(REPO / "tests/data/tiny_catalogue.toml"))
    monkeypatch.setenv("ARENA_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


def test_fixed_prompt_has_the_length_and_keeps_the_generation_header() -> None:
    assert fixed_prompt([1, 2, 3], 7) == [3, 1, 2, 3, 1, 2, 3]
    long = list(range(250))
    assert fixed_prompt(long, 100) == long[-100:]
    with pytest.raises(ValueError):
        fixed_prompt([], 5)


def test_bench_json_contract_on_a_tiny_model(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "--model", "tiny-llama", "--concurrency", "1,3", "--runs", "1", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {"model", "cold_start_s", "rss_mb", "stored_weights", "results"} <= set(out)
    assert out["model"] == "tiny-llama" and out["stored_weights"] is False  # a tiny: source is never stored
    assert out["prompt_tokens"] == 100 and out["new_tokens"] == 64 and out["batching"] is True
    assert out["cold_start_s"] > 0 and out["rss_mb"] > 100  # JAX + keras alone are hundreds of MB
    assert [row["concurrency"] for row in out["results"]] == [1, 3]
    for row in out["results"]:
        assert set(row) == ROW_KEYS
        assert row["ttft_ms"] > 0 and row["decode_tok_s"] > 0 and row["aggregate_tok_s"] > 0
    # every round starts cold; the 3 identical requests of a round copy the first one's whole prompt
    assert [row["reused_prompt_tokens"] for row in out["results"]] == [0, 2 * 100]
    follow = out["follow_up"]  # prompt + 64-token reply + 20 tokens; the reply's last token was never fed
    assert follow["prompt_tokens"] == 184 and follow["reused_prompt_tokens"] == 100 + 63
    assert follow["ttft_ms"] > 0 and follow["ttft_ms_cold"] > 0


def test_serial_bench_keeps_the_shape(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--model", "tiny-llama", "--concurrency", "2", "--runs", "1", "--serial"]) == 0
    out = capsys.readouterr().out
    assert "aggregate tok/s" in out and "cold start" in out  # the table, not JSON


@pytest.mark.parametrize("flag", ["0,4", "a,b", ",", "-1"])
def test_bad_concurrency_exits_2(env: Path, flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--model", "tiny-llama", "--concurrency", flag, "--json"]) == 2
    assert "--concurrency" in capsys.readouterr().err


def test_weights_flag_overrides_the_catalogue_format(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "--model", "tiny-llama", "--concurrency", "2", "--runs", "1", "--json"]
    assert main([*args, "--weights", "int8"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["weights"] == "int8"  # the tiny catalogue says float32
    with pytest.raises(SystemExit):
        main([*args, "--weights", "int4"])


def test_resident_bench_holds_every_listed_model(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--model", "tiny-llama,tiny-gemma3", "--resident"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["models"] == ["tiny-llama", "tiny-gemma3"]
    assert out["rss_mb"] > 100 and set(out["weights_mb"]) == {"tiny-llama", "tiny-gemma3"}
    assert all(n > 0 for n in out["reply_tokens"].values())
    assert main(["bench", "--model", "tiny-llama,nope", "--resident"]) == 2


def test_fidelity_bench_compares_every_low_precision_format(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "--model", "tiny-gemma3", "--fidelity", "--new-tokens", "12"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["model"] == "tiny-gemma3" and out["positions"] > 12
    assert set(out["formats"]) == {"bfloat16", "int8", "q8", "q4", "q8a8", "q4a8"}
    for figures in out["formats"].values():
        assert 0.0 <= figures["top1_agreement"] <= 1.0 and figures["mean_kl"] >= 0.0
        # the same text one token a step through a cache, as replies are computed
        assert 0.0 <= figures["decode_top1_agreement"] <= 1.0 and figures["decode_mean_kl"] >= 0.0
    # bfloat16 rounds the same values whether the positions come at once or one at a time
    assert out["formats"]["bfloat16"]["decode_top1_agreement"] >= 0.9
    # Coarser weights move the model further: int8 never agrees more than bfloat16 on the same text.
    assert out["formats"]["int8"]["mean_kl"] >= out["formats"]["bfloat16"]["mean_kl"]
    # The random tiny model has no 4-bit structure: q4 falls back to q8 blocks matrix by matrix, and
    # 32-weight blocks follow the weights closer than one int8 scale per output channel.
    assert out["formats"]["q4"] == out["formats"]["q8"]
    assert out["formats"]["q4a8"] == out["formats"]["q8a8"]
    assert out["formats"]["q8"]["mean_kl"] <= out["formats"]["int8"]["mean_kl"]
    # Rounding the activations too moves the model further than the same blocks with float activations.
    assert out["formats"]["q8a8"]["mean_kl"] > out["formats"]["q8"]["mean_kl"]


def test_fidelity_of_one_format_runs_that_one_alone(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--model", "tiny-gemma3", "--fidelity", "--weights", "q8",
                 "--new-tokens", "6"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out.strip().splitlines()[-1])
    assert list(out["formats"]) == ["q8"] and out["positions"] > 6
    assert "tiny-gemma3: fidelity q8" in captured.err and "fidelity q4" not in captured.err
    assert main(["bench", "--model", "tiny-gemma3", "--fidelity", "--weights", "float32"]) == 2
    assert "give one of bfloat16, int8, q8, q4, q8a8, q4a8 or auto, not float32" in capsys.readouterr().err


def test_an_absent_anchor_is_refused_before_our_bench(
    env: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ARENA_ANCHOR_PYTHON", raising=False)
    missing = tmp_path / "no-python"
    assert main(["bench", "--model", "tiny-llama", "--concurrency", "1", "--anchor", "llama.cpp",
                 "--anchor-python", str(missing)]) == 2
    assert "not found" in capsys.readouterr().err
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None:  # the project's own environment never has it
        assert main(["bench", "--model", "tiny-llama", "--concurrency", "1", "--anchor", "llama.cpp"]) == 2
        assert "--anchor-python" in capsys.readouterr().err


def test_anchor_ratios_compare_like_with_like() -> None:
    from bench.inference_anchor import ratios

    ours = {"results": [{"concurrency": 1, "ttft_ms": 200.0, "decode_tok_s": 90.0, "aggregate_tok_s": 60.0},
                        {"concurrency": 8, "ttft_ms": 900.0, "decode_tok_s": 40.0, "aggregate_tok_s": 240.0}]}
    anchor = {"ttft_ms": 400.0, "decode_tok_s": 100.0, "end_to_end_tok_s": 80.0}
    assert ratios(ours, anchor) == {"decode_c1": 0.9, "ttft_c1": 0.5, "aggregate_c8_vs_single_stream": 3.0}


# A stand-in for llama-cpp-python in the anchor's child process (the real one is a 7-12 minute build that
# CI never has; tests/inference/test_llama_cpp_anchor.py runs it where it is built): it logs every
# generation it starts, so the tests see when the child worked.
FAKE_LLAMA_CPP = '''
import os, time
__version__ = "fake"

class Llama:
    def __init__(self, model_path, **settings):
        if not os.path.exists(model_path):
            raise ValueError(f"Model path does not exist: {model_path}")

    def reset(self):
        pass

    def generate(self, ids, **sampling):
        with open(os.environ["FAKE_LLAMA_LOG"], "a") as log:
            log.write(f"{len(ids)}\\n")
        for i in range(1000):
            time.sleep(0.002)
            yield i
'''


@pytest.fixture
def fake_anchor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The GGUF path to give it; this interpreter runs the child, with the stand-in importable."""
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "llama_cpp.py").write_text(FAKE_LLAMA_CPP)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "fake"))
    monkeypatch.setenv("FAKE_LLAMA_LOG", str(tmp_path / "runs.log"))
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    return model


def test_the_anchor_runs_once_per_request_and_reports_medians(fake_anchor: Path) -> None:
    import sys

    from bench.inference_anchor import AnchorSession, run_anchor

    log = fake_anchor.parent / "runs.log"
    with AnchorSession(fake_anchor, [1, 2, 3], new_tokens=5, threads=2, python=sys.executable) as session:
        assert log.read_text().splitlines() == ["3"]  # loaded and warmed up before the first request
        rows = [session.run() for _ in range(3)]
        assert len(log.read_text().splitlines()) == 4  # one generation a request, none between them
        summary = session.summary()
    assert {"engine": "llama.cpp", "version": "fake", "threads": 2, "runs": 3, "new_tokens": 5,
            "prompt_tokens": 3}.items() <= summary.items()
    for key in ("ttft_ms", "decode_tok_s", "end_to_end_tok_s"):
        assert summary[key] == round(sorted(r[key] for r in rows)[1], 1) and summary[key] > 0
    # 5 tokens 2 ms apart: about 250 tokens/s after the first (sleep only ever runs long)
    assert 50 < summary["decode_tok_s"] <= 500
    assert run_anchor(fake_anchor, [1, 2], new_tokens=3, runs=2, python=sys.executable)["runs"] == 2


def test_an_anchor_that_cannot_load_says_why(fake_anchor: Path) -> None:
    import sys

    from bench.inference_anchor import AnchorSession, AnchorUnavailable

    with pytest.raises(AnchorUnavailable, match="Model path does not exist"):
        AnchorSession(fake_anchor.with_name("missing.gguf"), [1], new_tokens=2, python=sys.executable)


def test_serve_bench_runs_the_same_streams_in_process_and_over_http(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--serve``: the pool in process, then a real ``inference serve`` process read by the remote client."""
    code = main(["bench", "--model", "tiny-llama", "--concurrency", "2", "--runs", "1", "--new-tokens", "8",
                 "--serve"])
    assert code == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["model"] == "tiny-llama" and out["new_tokens"] == 8 and "llama_cpp_server" not in out
    for engine in ("in_process", "serve"):
        assert [row["concurrency"] for row in out[engine]] == [2]
        for row in out[engine]:
            assert row["errors"] == 0 and row["first_error"] is None, row
            assert 0 < row["new_tokens"] <= 8 * row["concurrency"] and row["aggregate_tok_s"] > 0
            assert 0 <= row["fewest_tokens"] <= 8
            assert row["ttft_ms_p50"] is not None and row["ttft_ms_p50"] <= row["ttft_ms_max"]
    assert set(out["serve_over_in_process"]) == {"2"}


def test_serve_bench_needs_concurrency(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--model", "tiny-llama", "--serve"]) == 2
    assert "--serve needs --concurrency" in capsys.readouterr().err
