"""``python -m db export``: the command line over a real SQLite file written through ``db.actions``.

Success prints one JSON line; bad input (format, view, date, path) exits 2 with one line on stderr.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from sqlalchemy import update

from commands.db import main
from db import actions
from db.engine import make_engine
from db.export import visitor_hash
from db.models import Base, Battle
from settings import REPO_ROOT, get_settings


@pytest.fixture
def db_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A SQLite arena with two battles (one with a correction), and a known hashing salt in settings."""
    monkeypatch.setenv("ARENA_HASH_SALT", "cli-test-salt")
    get_settings.cache_clear()
    url = f"sqlite:///{tmp_path / 'arena.db'}"
    engine = make_engine(url)
    Base.metadata.create_all(engine)
    for slug in ("m1", "m2"):
        actions.upsert_contestant(engine, slug=slug, display_name=slug)
    visitor = actions.get_or_create_visitor(engine, anon_id="cli-visitor")
    ids = []
    for day, scenario in ((3, "calendar"), (5, "free")):
        battle = actions.open_battle(engine, mode="anonymous", scenario=scenario, contestant_a="m1",
                                     contestant_b="m2", visitor_id=visitor.id)
        for side in ("a", "b"):
            actions.append_message(engine, battle_id=battle.id, side=side, kind="request", content="hello")
            actions.append_message(engine, battle_id=battle.id, side=side, kind="reply", content=f"hi {side}")
        with engine.begin() as conn:
            conn.execute(update(Battle).where(Battle.id == battle.id).values(
                created_at=dt.datetime(2026, 11, day, 10, tzinfo=dt.UTC)))
        ids.append(battle.id)
    actions.record_correction(engine, battle_id=ids[0], side="b", content="Say hello back.")
    actions.abandon_battle(engine, battle_id=ids[0])
    actions.record_vote(engine, battle_id=ids[1], choice="a")
    engine.dispose()
    yield url
    get_settings.cache_clear()


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_export_jsonl_prints_counts_and_hashes_with_settings_salt(db_file: str, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "export" / "battles.jsonl"
    code, stdout, err = _run(capsys, "export", "--url", db_file, "--format", "jsonl", "--out", str(out))
    assert code == 0, err
    summary = json.loads(stdout)
    assert summary["counts"]["battles"] == 2 and summary["counts"]["messages"] == 9
    assert summary["files"] == {str(out): 2} and Path(summary["card"]) == out.parent / "README.md"
    assert "battle" in err  # the progress bar went to stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["visitor"] for r in records} == {visitor_hash("cli-visitor", salt="cli-test-salt")}
    assert "cli-visitor" not in out.read_text()


def test_filters_and_views_from_the_command_line(db_file: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    def battles(*extra: str) -> int:
        out = tmp_path / f"f{len(list(tmp_path.iterdir()))}" / "b.parquet"
        code, stdout, err = _run(capsys, "export", "--url", db_file, "--format", "parquet", "--out", str(out),
                                 "--no-progress", *extra)
        assert code == 0 and err == "", err
        return pq.read_table(out).num_rows

    assert battles() == 2
    assert battles("--scenario", "free") == 1
    assert battles("--until", "2026-11-03") == 1  # a bare date includes that day
    assert battles("--since", "2026-11-04", "--until", "2026-11-30T00:00:00") == 1
    assert battles("--corrections-only") == 1
    assert battles("--since", "2026-12-01") == 0
    out = tmp_path / "views" / "prefs.jsonl"
    code, stdout, _ = _run(capsys, "export", "--url", db_file, "--format", "jsonl", "--out", str(out),
                           "--view", "preferences", "--no-progress", "--chunk-size", "1")
    assert code == 0 and json.loads(stdout)["counts"]["records"] == 1
    (pref,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert pref["chosen"] == [{"role": "assistant", "content": "hi a"}]
    tables = tmp_path / "tables"
    code, stdout, _ = _run(capsys, "export", "--url", db_file, "--format", "csv", "--out", str(tables),
                           "--no-progress")
    assert code == 0 and sorted(p.name for p in tables.iterdir()) == [
        "README.md", "battles.csv", "conversations.csv", "corrections.csv", "messages.csv", "votes.csv"]


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--format", "xml"], "unknown format 'xml'"),
        (["--format", "jsonl", "--view", "votes"], "unknown view 'votes'"),
        (["--format", "jsonl", "--since", "30/11/2026"], "bad date '30/11/2026'"),
        (["--format", "jsonl", "--since", "2026-11-05", "--until", "2026-11-01"], "since must be before"),
        (["--format", "csv", "--chunk-size", "0"], "--chunk-size must be >= 1"),
    ],
)
def test_bad_input_exits_2_with_one_line(db_file: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         args: list[str], reason: str) -> None:
    out = tmp_path / "never" / "x.out"
    code, stdout, err = _run(capsys, "export", "--url", db_file, "--out", str(out), *args)
    assert code == 2 and stdout == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and reason in err
    assert not out.parent.exists()


def test_unwritable_or_clashing_paths_exit_2(db_file: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    for out, reason in ((blocker / "x.jsonl", "cannot create folder"), (tmp_path, "is a folder")):
        code, _, err = _run(capsys, "export", "--url", db_file, "--format", "jsonl", "--out", str(out))
        assert code == 2 and err.count("\n") == 1 and reason in err
    (tmp_path / "README.md").write_text("# somebody's notes\n")
    code, _, err = _run(capsys, "export", "--url", db_file, "--format", "jsonl",
                        "--out", str(tmp_path / "x.jsonl"))
    assert code == 2 and "not a dataset card" in err
    assert (tmp_path / "README.md").read_text() == "# somebody's notes\n"


def test_entry_point_runs_as_a_module(db_file: str, tmp_path: Path) -> None:
    """The real ``python -m db export`` process: wired into db/__main__.py, exit codes included."""
    env = {**os.environ, "ARENA_HASH_SALT": "cli-test-salt", "PYTHONPATH": str(REPO_ROOT)}
    out = tmp_path / "o.parquet"
    ok = subprocess.run(
        [sys.executable, "-m", "db", "export", "--url", db_file, "--format", "parquet", "--out", str(out),
         "--corrections-only"], capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["counts"]["corrections"] == 1 and pq.read_table(out).num_rows == 1
    bad = subprocess.run(
        [sys.executable, "-m", "db", "export", "--url", db_file, "--format", "xml", "--out", str(out)],
        capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=120)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "unknown format" in bad.stderr


def test_open_battles_are_left_out_unless_include_open(
    db_file: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Probe: an open anonymous battle was exported with both contestants before its visitor voted."""
    engine = make_engine(db_file)
    live = actions.open_battle(engine, mode="anonymous", scenario="calendar", contestant_a="m1",
                               contestant_b="m2", first_request="hello")
    engine.dispose()
    out = tmp_path / "public.jsonl"
    code, stdout, _ = _run(capsys, "export", "--url", db_file, "--format", "jsonl", "--out", str(out))
    assert code == 0 and json.loads(stdout)["counts"]["battles"] == 2
    assert live.id not in out.read_text()
    code, stdout, _ = _run(capsys, "export", "--url", db_file, "--format", "jsonl", "--out", str(out),
                           "--include-open")
    assert code == 0 and json.loads(stdout)["counts"]["battles"] == 3 and live.id in out.read_text()


def test_mode_filter_keeps_only_the_listed_modes(
    db_file: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = make_engine(db_file)
    direct = actions.open_battle(engine, mode="direct", scenario="calendar", contestant_a="m1")
    actions.append_message(engine, battle_id=direct.id, side="a", kind="request", content="hello")
    actions.abandon_battle(engine, battle_id=direct.id)
    engine.dispose()
    out = tmp_path / "modes.jsonl"
    code, stdout, _ = _run(capsys, "export", "--url", db_file, "--format", "jsonl", "--out", str(out),
                           "--mode", "direct")
    assert code == 0 and json.loads(stdout)["counts"]["battles"] == 1 and direct.id in out.read_text()
    code, stdout, _ = _run(capsys, "export", "--url", db_file, "--format", "jsonl", "--out", str(out),
                           "--mode", "anonymous,named")
    assert code == 0 and json.loads(stdout)["counts"]["battles"] == 2 and direct.id not in out.read_text()
    code, _, stderr = _run(capsys, "export", "--url", db_file, "--format", "jsonl", "--out", str(out),
                           "--mode", "anonymous,robot")
    assert code == 2 and "unknown mode(s) robot" in stderr and stderr.strip().count("\n") == 0
