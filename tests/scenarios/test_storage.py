"""Automatic runs stored as ``auto`` battles on real SQLite and PostgreSQL, and read back unchanged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from db.actions import get_battle
from db.boards import auto_battle_ids as fixing_ids
from db.boards import first_try_counts, fix_counts
from db.engine import make_engine
from db.migrate import upgrade_to_head
from scenarios.premade import load_premade
from scenarios.records import RunRecord
from scenarios.report import build_report, render_markdown
from scenarios.runner import RunnerConfig, run_arena
from scenarios.storage import db_label, ensure_contestant, load_runs, store_run
from tests.scenarios.scripted import CALENDAR, ScriptedModel, always_chatty, chatty_then_fixed, perfect

CASES = load_premade()


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[Engine]:
    url = f"sqlite:///{tmp_path / 'arena.db'}"
    upgrade_to_head(url)
    engine = make_engine(url)
    yield engine
    engine.dispose()


@pytest.fixture
def postgres_engine(pg_schema_url: str) -> Iterator[Engine]:
    """A private schema in the shared test database (the shared ``pg_schema_url`` fixture)."""
    upgrade_to_head(pg_schema_url)
    engine = make_engine(pg_schema_url)
    yield engine
    engine.dispose()


def _store_and_reload(engine: Engine) -> tuple[list[RunRecord], list[RunRecord], list[str]]:
    models = [ScriptedModel("chatty", chatty_then_fixed), ScriptedModel("stubborn", always_chatty),
              ScriptedModel("broken", perfect, fail=True)]
    for model in models:
        ensure_contestant(engine, slug=model.slug, name=model.slug.title())
    ids: list[str] = []
    records = run_arena(scenario=CALENDAR, models=models, config=RunnerConfig(repeats=1), cases=CASES,
                        sink=lambda r: ids.append(store_run(engine, r)))
    return records, load_runs(engine, battle_ids=ids, scenario=CALENDAR), ids


def _check_round_trip(engine: Engine) -> None:
    live, reread, ids = _store_and_reload(engine)
    per_model = 1 + 1 + 9  # reliability, dialogue, 3 fixing cases x 3 attempts
    assert len(ids) == len(live) == 3 * per_model
    live_md = render_markdown(build_report(live, scenario=CALENDAR), scenario=CALENDAR, cases=CASES)
    reread_md = render_markdown(build_report(reread, scenario=CALENDAR), scenario=CALENDAR, cases=CASES)
    assert reread_md == live_md
    assert "| stubborn | 🍄🍄🍄 | (🍄)🍄🍄 | (🍄)🍄🍄 |" in live_md
    for before, after in zip(live, reread, strict=True):
        assert (after.protocol, after.model, after.case, after.attempt) == \
            (before.protocol, before.model, before.case, before.attempt)
        assert [(m.kind, m.content, m.target_turn, m.scripted) for m in after.messages] == \
            [(m.kind, m.content, m.target_turn, m.scripted) for m in before.messages]
        assert after.corrections == before.corrections and after.style == before.style
        assert [m.grade and (m.grade.label, m.grade.mistakes) for m in after.messages] == \
            [m.grade and (m.grade.label, m.grade.mistakes) for m in before.messages]
        assert [m.context and m.context.as_json() for m in after.messages] == \
            [m.context and m.context.as_json() for m in before.messages]
        assert after.params == before.params

    battle = get_battle(engine, battle_id=ids[per_model + 1])  # the stubborn model's dialogue
    assert battle.mode == "auto" and battle.scenario == "calendar" and set(battle.sides) == {"a"}
    side = battle.sides["a"]
    graded = [m for m in side.messages if m.kind == "reply"]
    live_dialogue = live[per_model + 1]
    assert live_dialogue.protocol == "dialogue"
    expected_labels = [db_label(m.grade) for m in live_dialogue.messages if m.kind == "reply" and m.grade]
    assert [m.grader_label for m in graded] == expected_labels
    assert {c.judged_by for c in side.corrections} == {"grader"}

    errored = get_battle(engine, battle_id=ids[2 * per_model]).sides["a"].messages[-1]
    assert errored.error is not None and "device lost" in errored.error and errored.grader_label == "garbage"

    counts = fix_counts(engine, scenario="calendar", modes=["auto"])
    fixed = {slug: (int(s), int(t)) for slug, s, t in zip(counts.models, counts.successes, counts.trials,
                                                          strict=True)}
    live_fixed = {}
    for record in live:
        done, total = live_fixed.get(record.model, (0, 0))
        live_fixed[record.model] = (done + sum(c.outcome == "fixed" for c in record.corrections),
                                    total + len(record.corrections))
    assert {k: v for k, v in fixed.items() if v[1]} == {k: v for k, v in live_fixed.items() if v[1]}


def test_runs_round_trip_through_sqlite(sqlite_engine: Engine) -> None:
    _check_round_trip(sqlite_engine)


def test_a_perfect_first_try_is_stored_correct_with_the_year_assumed(sqlite_engine: Engine) -> None:
    """The year of turn 1 is an assumption: first-try accuracy counts a perfect call (was 0%)."""
    ensure_contestant(sqlite_engine, slug="perfect", name="Perfect")
    ids: list[str] = []
    (record,) = run_arena(scenario=CALENDAR, models=[ScriptedModel("perfect", perfect)],
                          protocols=("reliability",), config=RunnerConfig(repeats=1),
                          sink=lambda r: ids.append(store_run(sqlite_engine, r)))
    reply = record.messages[-1]
    assert reply.context is not None and reply.context.assumed == ("year",)
    counts = first_try_counts(sqlite_engine, scenario="calendar", modes=["auto"])
    assert (int(counts.successes[0]), int(counts.trials[0])) == (1, 1)


@pytest.mark.postgres
def test_runs_round_trip_through_postgres(postgres_engine: Engine) -> None:
    _check_round_trip(postgres_engine)


def test_fixing_case_stores_history_as_scripted_and_not_first_try(sqlite_engine: Engine) -> None:
    ensure_contestant(sqlite_engine, slug="perfect", name="Perfect")
    model = ScriptedModel("perfect", perfect)
    (record,) = run_arena(scenario=CALENDAR, models=[model], protocols=("fixing",),
                          config=RunnerConfig(fixing_attempts=1), cases=CASES[:1])
    battle = get_battle(sqlite_engine, battle_id=store_run(sqlite_engine, record))
    messages = battle.sides["a"].messages
    scripted = [m for m in messages if m.finish_reason == "scripted"]
    assert len(scripted) == CASES[0].turn  # two history replies and the faulty one
    assert scripted[0].first_try and scripted[0].grader_label is None  # never counted as a first try
    assert scripted[-1].content == CASES[0].faulty and scripted[-1].grader_mistakes == ("wrong_time",)
    (correction,) = battle.sides["a"].corrections
    assert correction.faulty_message_id == scripted[-1].id and correction.outcome == "fixed"


def test_many_is_stored_as_its_own_label() -> None:
    many = CALENDAR.grade('Sure! action.add_calendar_entry("Fred", date="11/11/2023", time="5:00 PM")',
                          target_turn=2)
    assert many is not None and many.label == "many"
    assert db_label(many) == "many"
    partial = CALENDAR.grade(CALENDAR.turn(1).expected, target_turn=2)  # 2023 once the year is 2024
    assert partial is not None and db_label(partial) == "partial"


def test_report_command_reads_the_stored_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from commands.scenarios import main

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert main(["report", "--url", url]) == 0  # an empty database: empty tables, a note on stderr
    assert "no automatic runs" in capsys.readouterr().err
    upgrade_to_head(url)
    engine = make_engine(url)
    live, _, _ = _store_and_reload(engine)
    engine.dispose()
    out = tmp_path / "report.md"
    assert main(["report", "calendar", "--url", url, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    expected = render_markdown(build_report(live, scenario=CALENDAR), scenario=CALENDAR, cases=CASES)
    assert printed == expected == out.read_text(encoding="utf-8")
    assert main(["report", "--url", url, "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["cells"] == build_report(live, scenario=CALENDAR).text()
    assert set(figures["summary"]) == {"chatty", "stubborn", "broken"}


def test_the_report_shows_each_models_latest_run_per_protocol(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import dataclasses

    from commands.scenarios import main

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    upgrade_to_head(url)
    engine = make_engine(url)
    ensure_contestant(engine, slug="chatty", name="Chatty")

    def run(behaviour: object, run_id: str, protocols: tuple[str, ...]) -> list[RunRecord]:
        model = ScriptedModel("chatty", behaviour)  # type: ignore[arg-type]
        return run_arena(scenario=CALENDAR, models=[model], protocols=protocols,  # type: ignore[arg-type]
                         config=RunnerConfig(repeats=2), cases=CASES,
                         sink=lambda r: store_run(engine, dataclasses.replace(r, run=run_id)))

    first = run(always_chatty, "first", ("reliability", "dialogue"))
    second = run(perfect, "second", ("reliability",))  # a later run of one protocol only
    reread = load_runs(engine, battle_ids=fixing_ids(engine), scenario=CALENDAR)
    engine.dispose()
    assert [r.run for r in reread] == ["first"] * len(first) + ["second"] * len(second)
    assert main(["report", "--url", url, "--json"]) == 0
    cells = json.loads(capsys.readouterr().out)["cells"]["chatty"]
    latest = build_report([*second, *[r for r in first if r.protocol == "dialogue"]], scenario=CALENDAR)
    assert cells == latest.text()["chatty"]
    assert main(["report", "--url", url, "--json", "--all-runs"]) == 0
    every = json.loads(capsys.readouterr().out)["cells"]["chatty"]
    assert every == build_report([*first, *second], scenario=CALENDAR).text()["chatty"] != cells
