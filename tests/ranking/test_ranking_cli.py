"""``python -m ranking fit|bench``: files, labels, options, bad input (exit 2, one line), docs/CLI.md."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from commands.ranking import build_parser, main
from ranking import leaderboard, tally

REPO = Path(__file__).resolve().parents[2]
KEYS = ["model", "rating", "ci_low", "ci_high", "rank", "battles", "wins", "losses", "ties"]


def write_csv(path: Path, rows: list[tuple[str, str, str]], header: str = "model_a,model_b,winner") -> Path:
    path.write_text(header + "\n" + "".join(f"{a},{b},{w}\n" for a, b, w in rows))
    return path


def battles(seed: int = 0, n: int = 300) -> list[tuple[str, str, str]]:
    rng = np.random.default_rng(seed)
    names = ["alpha", "beta", "gamma", "delta"]
    labels = ["a", "b", "tie", "both_bad", "model_a", "model_b", "tie (bothbad)"]
    out = []
    for _ in range(n):
        i, j = rng.choice(4, size=2, replace=False)
        out.append(
            (names[i], names[j], labels[int(rng.choice(7, p=[0.3, 0.25, 0.1, 0.05, 0.15, 0.1, 0.05]))])
        )
    return out


def run_fit(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["fit", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_fit_json_matches_library(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = battles()
    path = write_csv(tmp_path / "b.csv", rows)
    code, out, _ = run_fit(["--battles", str(path), "--bootstrap", "200", "--seed", "3", "--json"], capsys)
    assert code == 0
    records = json.loads(out)
    assert [list(r) for r in records] == [KEYS] * 4
    assert [r["rating"] for r in records] == sorted((r["rating"] for r in records), reverse=True)
    # Independent tally of the same rows: A-wins labels a/model_a, ties include both-bad.
    names = ("alpha", "beta", "delta", "gamma")
    code_of = {"a": 0, "model_a": 0, "b": 1, "model_b": 1, "tie": 2, "both_bad": 3, "tie (bothbad)": 3}
    a = np.array([names.index(r[0]) for r in rows])
    b = np.array([names.index(r[1]) for r in rows])
    o = np.array([code_of[r[2]] for r in rows])
    expected = leaderboard(names, *tally(a, b, o, n_models=4), bootstrap=200, seed=3).as_records()
    assert records == expected
    assert sum(r["battles"] for r in records) == 2 * len(rows)


def test_fit_parquet_and_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = battles(1)
    table = pa.table({k: [r[i] for r in rows] for i, k in enumerate(["model_a", "model_b", "winner"])})
    pq.write_table(table, tmp_path / "b.parquet")
    csv_path = write_csv(tmp_path / "b.csv", rows)
    args = ["--ties", "exclude", "--both-bad", "exclude", "--bootstrap", "50", "--json"]
    _, from_parquet, _ = run_fit(["--battles", str(tmp_path / "b.parquet"), *args], capsys)
    _, from_csv, _ = run_fit(["--battles", str(csv_path), *args], capsys)
    assert json.loads(from_parquet) == json.loads(from_csv)
    assert all(r["ties"] == 0 for r in json.loads(from_csv)) is False  # plain ties still reported
    code, out, _ = run_fit(
        ["--battles", str(csv_path), "--interval", "sandwich", "--anchor", "beta=1200"], capsys
    )
    assert code == 0 and re.search(r"beta\s+1200\.0", out)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("model_a,model_b\nx,y\n", "missing column(s): winner"),
        ("model_a,model_b,winner\nx,y,a\nx,z,draw\n", "row 2: unknown winner 'draw'"),
        ("model_a,model_b,winner\nx,y,a\ny,z,b\nz,z,tie\n", "row 3: model 'z' battles itself"),
        ("model_a,model_b,winner\nx,,a\n", "row 1: empty model_b"),
        ("model_a,model_b,winner\n", "has no battles"),
    ],
)
def test_bad_files_exit_2_naming_the_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(content)
    code, out, err = run_fit(["--battles", str(path), "--json"], capsys)
    assert code == 2 and out == ""
    assert message in err and err.count("\n") == 1


def test_bad_flags_exit_2_with_one_line(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "b.csv", battles())
    for args in (["--ties", "third"], ["--bootstrap", "-1"], ["--anchor", "nonsense"]):
        proc = subprocess.run(
            [sys.executable, "-m", "ranking", "fit", "--battles", str(path), *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error:")
    proc = subprocess.run(
        [sys.executable, "-m", "ranking", "fit", "--battles", str(tmp_path / "missing.csv")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "no such file" in proc.stderr


def test_bench_small_run_reports_contract_keys(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "--models", "6", "--votes", "3000", "--rounds", "20", "--repeat", "1"]
    assert main([*args, "--sampler-trials", "0", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    for key in ("full_s", "reference_s", "ratio", "elo_s", "choix_fit_s", "peak_rss_mb"):
        assert isinstance(figures[key], float) and figures[key] > 0, key
    assert figures["choix_max_abs_diff"] < 1e-6
    assert figures["reference_max_rating_diff"] < 1.0  # L-BFGS-B stops early; same method, same data


def test_cli_reference_documents_every_command_and_flag() -> None:
    readme = (REPO / "docs" / "CLI.md").read_text()
    assert "### python -m ranking" in readme
    section = readme.split("### python -m ranking", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, type(parser._subparsers._group_actions[0])))
    for name, sub in subparsers.choices.items():  # type: ignore[attr-defined]
        assert f"python -m ranking {name}" in section, name
        for action in sub._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and flag != "--help":
                    assert flag in section, f"{name} {flag} undocumented"


def test_style_control_needs_the_style_columns_and_drops_rows_without_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = write_csv(tmp_path / "plain.csv", battles())
    code, _, err = run_fit(["--battles", str(plain), "--style-control"], capsys)
    assert code == 2 and "missing column(s): length_a" in err and err.count("\n") == 1
    rng = np.random.default_rng(1)
    features = "length_a,length_b,chatty_a,chatty_b,apology_a,apology_b,multiline_a,multiline_b"
    lines = [f"{a},{b},{w}," + ",".join(f"{x:.3f}" for x in rng.random(8)) for a, b, w in battles()]
    lines[0] = lines[0].rsplit(",", 1)[0] + ","  # one missing feature: left out with a note
    styled = tmp_path / "styled.csv"
    styled.write_text(f"model_a,model_b,winner,{features}\n" + "\n".join(lines) + "\n")
    code, out, err = run_fit(["--battles", str(styled), "--style-control", "--json"], capsys)
    rows = json.loads(out)
    assert code == 0 and "1 battles without every style feature left out" in err
    assert "style coefficients" in err
    assert {r["model"] for r in rows} == {"alpha", "beta", "gamma", "delta"}
    assert sum(r["battles"] for r in rows) == 2 * (len(lines) - 1)
