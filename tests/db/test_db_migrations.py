"""Migrations: an empty database upgraded to head matches the models exactly; downgrade returns to base.
Plus the ``python -m db`` helpers (upgrade, stats, bad input) and their docs/CLI.md entries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from commands.db import build_parser, main
from db import actions
from db.engine import make_engine
from db.migrate import alembic_config, current_revision, downgrade_to_base, head_revision, upgrade_to_head
from db.models import Base

REPO_ROOT = Path(__file__).resolve().parents[2]


def _diff(url: str) -> list:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            return list(compare_metadata(context, Base.metadata))
    finally:
        engine.dispose()


def _tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_upgrade_matches_models_then_downgrade_to_base(db_url: str) -> None:
    assert current_revision(db_url) is None
    upgrade_to_head(db_url)
    assert current_revision(db_url) == head_revision() is not None
    assert _diff(db_url) == []
    assert _tables(db_url) == set(Base.metadata.tables) | {"alembic_version"}
    upgrade_to_head(db_url)  # idempotent: the app and the CLI call it on every start
    engine = make_engine(db_url)
    actions.upsert_contestant(engine, slug="m1", display_name="M1")  # the migrated schema is usable
    engine.dispose()
    downgrade_to_base(db_url)
    assert current_revision(db_url) is None
    assert _tables(db_url) == {"alembic_version"}
    upgrade_to_head(db_url)
    assert _diff(db_url) == []


@pytest.mark.postgres
def test_servers_upgrading_one_fresh_database_at_once_all_reach_head(pg_schema_url: str) -> None:
    """App servers started together on a fresh PostgreSQL database each upgrade it on their first page:
    they take turns (an advisory lock in ``migrations/env.py``) and every one ends at head."""
    code = f"from db.migrate import upgrade_to_head; upgrade_to_head({pg_schema_url!r})"
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=REPO_ROOT, stderr=subprocess.PIPE)
             for _ in range(3)]
    errors = [proc.communicate(timeout=120)[1].decode()[-400:] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0, 0], errors
    assert current_revision(pg_schema_url) == head_revision()
    assert _diff(pg_schema_url) == []


def test_migrated_schema_keeps_named_constraints(db_url: str) -> None:
    upgrade_to_head(db_url)
    engine = make_engine(db_url)
    try:
        insp = inspect(engine)
        checks = {c["name"] for c in insp.get_check_constraints("votes")}
        assert {"ck_votes_choice", "ck_votes_mode"} <= checks
        assert "uq_votes_battle_id" in {u["name"] for u in insp.get_unique_constraints("votes")}
        assert "ix_votes_counted_pairs" in {i["name"] for i in insp.get_indexes("votes")}
    finally:
        engine.dispose()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "db", *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )


def test_cli_upgrade_and_stats(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    done = _cli("upgrade", "--url", url)
    assert done.returncode == 0, done.stderr
    assert head_revision() in done.stdout
    engine = make_engine(url)
    actions.upsert_contestant(engine, slug="m1", display_name="M1")
    engine.dispose()
    stats = _cli("stats", "--url", url, "--json")
    assert stats.returncode == 0, stats.stderr
    counts = json.loads(stats.stdout)
    assert counts["contestants"] == 1 and counts["votes"] == 0 and set(counts) == set(Base.metadata.tables)


@pytest.mark.parametrize(
    "args",
    [
        ("stats", "--url", "mysql://nobody@nowhere/x"),
        ("upgrade", "--url", "sqlite://"),
        ("bench", "--writers", "0"),
        ("bench", "--only", "nothing"),
        ("frobnicate",),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(
    args: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse's own refusals
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip() and "Traceback" not in err


def test_cli_entry_point_exit_code_for_bad_input() -> None:
    done = _cli("stats", "--url", "mysql://nobody@nowhere/x")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_every_cli_command_is_documented_in_the_cli_reference() -> None:
    readme = (REPO_ROOT / "docs" / "CLI.md").read_text()
    assert "### python -m db" in readme
    section = readme.split("### python -m db", 1)[1].split("\n### ", 1)[0]
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    for name in commands:
        assert f"python -m db {name}" in section, f"`python -m db {name}` is not documented in docs/CLI.md"


def _battle_of_two(engine: Any) -> Any:
    """An open anonymous calendar battle of m1 and m2 (both added)."""
    for slug in ("m1", "m2"):
        actions.upsert_contestant(engine, slug=slug, display_name=slug, family="test")
    return actions.open_battle(engine, mode="anonymous", scenario="calendar", contestant_a="m1",
                               contestant_b="m2")


def test_0005_fills_side_stats_from_stored_rows(db_url: str) -> None:
    """Downgraded to 0004 and upgraded again, each side's roll-up is recomputed from its rows."""
    upgrade_to_head(db_url)
    engine = make_engine(db_url)
    try:
        battle = _battle_of_two(engine)
        script: dict[str, list[tuple[str, list[str]]]] = {
            "a": [("partial", ["chatty"]), ("partial", ["wrong_time"]), ("correct", [])],
            "b": [("correct", [])],
        }
        for side, replies in script.items():
            actions.append_message(engine, battle_id=battle.id, side=side, kind="request", content="Add")
            for n, (label, mistakes) in enumerate(replies):
                if n:  # side a: corrected twice in a row, a chain of two
                    correction = actions.record_correction(engine, battle_id=battle.id, side=side,
                                                           content="No.")
                actions.append_message(engine, battle_id=battle.id, side=side, kind="reply", content="call",
                                       grader_label=label, grader_mistakes=mistakes)
                if n:
                    actions.set_correction_outcome(engine, correction_id=correction.id,
                                                   outcome="fixed" if label == "correct" else "not_fixed",
                                                   judged_by="person")
        closed = actions.abandon_battle(engine, battle_id=battle.id).closed_at
        read = text("SELECT * FROM side_stats ORDER BY conversation_id")
        with engine.connect() as conn:
            before = [dict(row._mapping) for row in conn.execute(read)]
        a = before[0]
        assert closed is not None and all(row["closed_at"] is not None for row in before)
        assert (a["graded_replies"], a["recurrence_replies"], a["person_judged"], a["person_fixed"],
                a["grader_judged"], a["person_turns_2"], a["grader_turns_2"], a["first_try_label"]) == \
            (3, 0, 2, 1, 2, 1, 1, "partial")
        assert before[1]["graded_replies"] == 1 and before[1]["person_judged"] == 0
    finally:
        engine.dispose()
    command.downgrade(alembic_config(db_url), "0004")
    assert "side_stats" not in _tables(db_url)
    command.upgrade(alembic_config(db_url), "0005")  # the roll-up, before 0006 adds the closing time
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            rolled_up = [dict(row._mapping) for row in conn.execute(read)]
        assert rolled_up == [{k: v for k, v in row.items() if k != "closed_at"} for row in before]
    finally:
        engine.dispose()
    upgrade_to_head(db_url)  # 0006 copies each battle's closing time
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            assert [dict(row._mapping) for row in conn.execute(read)] == before
    finally:
        engine.dispose()


def test_0010_fills_the_kind_roll_ups_from_stored_rows(db_url: str) -> None:
    """Downgraded to 0009 and upgraded again, ``side_kinds`` and ``replay_tallies`` are rebuilt from the
    replies, corrections and replay answers, equal to what the writes kept."""
    upgrade_to_head(db_url)
    engine = make_engine(db_url)
    try:
        battle = _battle_of_two(engine)
        actions.append_message(engine, battle_id=battle.id, side="a", kind="request", content="Add")
        actions.append_message(engine, battle_id=battle.id, side="a", kind="reply", content="call",
                               grader_label="partial", grader_mistakes=["wrong_year", "chatty"])
        correction = actions.record_correction(engine, battle_id=battle.id, side="a", content="2024.")
        actions.append_message(engine, battle_id=battle.id, side="a", kind="reply", content="call",
                               grader_label="correct", grader_mistakes=[])
        actions.set_correction_outcome(engine, correction_id=correction.id, outcome="fixed",
                                       judged_by="person")
        actions.record_replay_result(engine, correction_id=correction.id, contestant="m2",
                                     outcome="not_fixed", content="call")
        reads = [text("SELECT * FROM side_kinds ORDER BY conversation_id, kind"),
                 text("SELECT * FROM replay_tallies ORDER BY scenario, contestant_id, kind")]
        with engine.connect() as conn:
            before = [[dict(row._mapping) for row in conn.execute(read)] for read in reads]
        assert [len(rows) for rows in before] == [2, 2]
        assert before[0][0]["kind"] == "chatty" and before[0][0]["person_fixed"] == 1
    finally:
        engine.dispose()
    command.downgrade(alembic_config(db_url), "0009")
    assert not {"side_kinds", "replay_tallies"} & _tables(db_url)
    upgrade_to_head(db_url)
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            assert [[dict(row._mapping) for row in conn.execute(read)] for read in reads] == before
    finally:
        engine.dispose()
