"""The automatic arena end to end: real keras-hub models through the real pool, runs in a real database.

Fast: the tiny random models of ``tests/data/tiny_catalogue.toml`` (gibberish, but every code path of
the real models runs). Slow: the bundled GGUF models (SmolLM2-135M, Gemma 3 270M).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from commands.run_models import RunInputError
from commands.scenarios_arena import run_and_store
from db.actions import get_battle
from db.engine import make_engine
from scenarios import get_scenario
from scenarios.premade import load_premade
from scenarios.report import build_report, render_markdown
from scenarios.storage import load_runs
from settings import REPO_ROOT, Settings

CALENDAR = get_scenario("calendar")
TINY_CATALOGUE = REPO_ROOT / "tests" / "data" / "tiny_catalogue.toml"
TABLES = ("## Reliability", "## Full dialogue", "## Fixing pre-made mistakes", "## Summary")


def _settings(tmp_path: Path, catalogue: Path) -> Settings:
    # mesh="off": the tests' 8 virtual CPU devices would shard every model (ARENA_MESH=auto), and two
    # sharded models loading and stepping at once on virtual CPU devices can stall XLA's collectives
    # past its 40 s rendezvous limit, which aborts the process.
    return Settings(environment="test", data_dir=tmp_path, catalogue_path=catalogue, compilation_cache=False,
                    database_url=f"sqlite:///{tmp_path / 'arena.db'}", mesh="off")


def _check_outcome(outcome, settings: Settings, slugs: list[str], *, repeats: int, fixing: int = 3) -> None:
    assert not outcome.skipped
    per_model = repeats + 1 + 3 * fixing
    assert len(outcome.records) == len(outcome.battle_ids) == per_model * len(slugs)
    for heading in TABLES:
        assert heading in outcome.markdown
    for slug in slugs:
        assert f"| {slug} |" in outcome.markdown
    engine = make_engine(settings.resolved_database_url)
    try:
        reread = load_runs(engine, battle_ids=outcome.battle_ids, scenario=CALENDAR)
        report = build_report(reread, scenario=CALENDAR)
        again = render_markdown(report, scenario=CALENDAR, cases=load_premade())
        assert again == outcome.markdown
        battle = get_battle(engine, battle_id=outcome.battle_ids[0])
        assert battle.mode == "auto" and battle.sides["a"].contestant.slug == slugs[0]
        reply = battle.sides["a"].messages[-1]
        assert reply.kind == "reply" and reply.grader_label is not None
        assert reply.total_ms is not None and reply.total_ms > 0 and reply.finish_reason in ("stop", "length")
    finally:
        engine.dispose()


def test_tiny_models_produce_all_three_tables_and_stored_runs_match(tmp_path: Path) -> None:
    settings = _settings(tmp_path, TINY_CATALOGUE)
    slugs = ["tiny-llama", "tiny-gemma3"]
    outcome = run_and_store(settings=settings, scenario=CALENDAR, slugs=slugs,
                            protocols=("reliability", "dialogue", "fixing"), repeats=1, max_fix_attempts=1,
                            overrides={"max_new_tokens": 8}, show_progress=False)
    _check_outcome(outcome, settings, slugs, repeats=1)
    # Random weights write gibberish: no call is recognisable, so every reply burns and every wrong
    # dialogue reply gets its one correction: 1 reliability + 6 turns x 2 + 3 cases x 3 = 22 per model.
    summary = build_report(outcome.records, scenario=CALENDAR).summary()
    assert summary == {slug: {"✔︎": 0, "🥦": 0, "🍄": 0, "🔥": 22} for slug in slugs}


def test_unknown_model_is_refused_before_anything_loads(tmp_path: Path) -> None:
    with pytest.raises(RunInputError, match="unknown model"):
        run_and_store(settings=_settings(tmp_path, TINY_CATALOGUE), scenario=CALENDAR, slugs=["gpt-9"],
                      protocols=("reliability",), repeats=1, max_fix_attempts=0, show_progress=False)
    assert not (tmp_path / "arena.db").exists()


def test_cli_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "ARENA_CATALOGUE_PATH": str(TINY_CATALOGUE), "ARENA_DATA_DIR": str(tmp_path)}
    for args in (["run", "calendar", "--models", "nope"], ["run", "free-chat", "--models", "all"],
                 ["run", "calendar", "--models", "all", "--repeats", "0"],
                 ["grade", "--target", "7", "--reply", "x"]):
        proc = subprocess.run([sys.executable, "-m", "scenarios", *args], capture_output=True, text=True,
                              cwd=REPO_ROOT, env=env, timeout=120)
        assert proc.returncode == 2, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("error: ")


@pytest.mark.slow
@pytest.mark.timeout(3600)  # on a loaded 2-core CPU one generation takes 30-50 s
def test_bundled_gguf_models_run_the_whole_study(tmp_path: Path) -> None:
    settings = _settings(tmp_path, REPO_ROOT / "inference" / "catalogue.toml")
    slugs = ["smollm2-135m-instruct", "gemma3-270m"]
    # Sized for a shared 2-core CPU (10 generations per model: automatic corrections are covered by the
    # fast test, the fixing cases still correct); `python -m scenarios run` runs the study's full sizes.
    outcome = run_and_store(settings=settings, scenario=CALENDAR, slugs=slugs,
                            protocols=("reliability", "dialogue", "fixing"), repeats=1, max_fix_attempts=0,
                            fixing_attempts=1, overrides={"max_new_tokens": 32}, show_progress=False)
    _check_outcome(outcome, settings, slugs, repeats=1, fixing=1)
    print(outcome.markdown)
