"""Replay: a person's correction of one model's mistake becomes a test for every model.

A battle is played as the web app stores it (a generated calendar dialogue; model A answers the first
request with prose and no call, the person corrects it and judges the fix). ``python -m scenarios replay``
then asks other models (remote engines on a scripted OpenAI-compatible server on loopback: the edge of
the world) for the reply after the correction, grades each in context and stores it once. The export's
``replay`` view carries the same items to ``replay --from FILE``, which gives the same grades.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from commands.db import main as db_main
from commands.ranking import main as ranking_main
from commands.scenarios import main
from db import actions
from db.engine import make_engine
from db.export import REPLAY_VERSION as EXPORTED_VERSION
from db.migrate import upgrade_to_head
from db.models import ReplayResult
from scenarios import get_scenario
from scenarios.dialogue import DialogueMessage
from scenarios.generate import Dialogue, draw_dialogue, stored_form
from scenarios.replay import REPLAY_VERSION, ReplayItem, follows, grade_answer, outcome_of
from settings import get_settings
from tests.webapp.conftest import ScriptedEngine

CALENDAR = get_scenario("calendar")
PROSE = "Sure, I have added that to your calendar."
CORRECTION = "You did not write the API call. Please write it."
ADD = "action.add_calendar_entry("
TINY = (  # a real local model (random weights: gibberish) through the real pool and its batcher
    '[[model]]\nslug = "tiny-llama"\nname = "Tiny Llama"\nfamily = "llama"\nsource = "tiny:llama"\n'
    'template = "chatml"\ncontext_length = 1024\nweights = "float32"\n[model.sampling]\nmax_new_tokens = 8\n'
)


@pytest.fixture(scope="module")
def engine_server() -> Iterator[ScriptedEngine]:
    with ScriptedEngine.running() as server:
        yield server


@pytest.fixture
def arena_env(tmp_path: Path, engine_server: ScriptedEngine,
              monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A database, and a catalogue of three models behind the scripted engine (alpha made the mistake),
    in the environment the commands read (``db export`` caches its settings: cleared around the test)."""
    catalogue = tmp_path / "served.toml"
    catalogue.write_text("".join(
        f'[[model]]\nslug = "{slug}"\nname = "{slug.title()}"\nfamily = "remote"\n'
        f'source = "remote:{engine_server.url}"\nremote_model = "{slug}"\n\n'
        for slug in ("alpha", "beta", "gamma")) + TINY)
    url = f"sqlite:///{tmp_path / 'arena.db'}"
    for name, value in {"ARENA_DATABASE_URL": url, "ARENA_CATALOGUE_PATH": str(catalogue),
                        "ARENA_DATA_DIR": str(tmp_path), "ARENA_ENVIRONMENT": "test", "ARENA_MESH": "off",
                        "ARENA_PUBLIC_EXPORT_DELAY_HOURS": "0", "ARENA_COMPILATION_CACHE": "false"}.items():
        monkeypatch.setenv(name, value)
    upgrade_to_head(url)
    get_settings.cache_clear()
    yield url
    get_settings.cache_clear()


def _play_battle(url: str, dialogue: Dialogue) -> int:
    """Alpha against beta on ``dialogue``: alpha's first reply is prose, the person corrects it, alpha
    fixes it and the person says so, then votes. Returns the correction's id."""
    engine = make_engine(url)
    try:
        for slug in ("alpha", "beta"):
            actions.upsert_contestant(engine, slug=slug, display_name=slug.title(), family="remote")
        visitor = actions.get_or_create_visitor(engine, anon_id="visitor-1")
        battle = actions.open_battle(engine, mode="anonymous", scenario="calendar", contestant_a="alpha",
                                     contestant_b="beta", visitor_id=visitor.id,
                                     system_prompt=dialogue.system_prompt, dialogue=stored_form(dialogue))
        first = dialogue.turns[0]
        for side in ("a", "b"):
            actions.append_message(engine, battle_id=battle.id, side=side, kind="request", content=first.user)
        actions.append_message(engine, battle_id=battle.id, side="a", kind="reply", content=PROSE,
                               grader_label="garbage", grader_mistakes=["no_call"])
        actions.append_message(engine, battle_id=battle.id, side="b", kind="reply", content=first.expected,
                               grader_label="correct")
        correction = actions.record_correction(engine, battle_id=battle.id, side="a", content=CORRECTION)
        actions.append_message(engine, battle_id=battle.id, side="a", kind="reply", content=first.expected,
                               grader_label="correct")
        actions.set_correction_outcome(engine, correction_id=correction.id, outcome="fixed",
                                       judged_by="person", visitor_id=visitor.id)
        actions.record_vote(engine, battle_id=battle.id, choice="a", visitor_id=visitor.id)
        return correction.id
    finally:
        engine.dispose()


def _stored(url: str) -> list[tuple[int, str, bool, str]]:
    """(correction, model, own, outcome) of every stored replay result."""
    from db.models import Contestant

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(ReplayResult.correction_id, Contestant.slug, ReplayResult.own,
                                       ReplayResult.outcome)
                                .join(Contestant, Contestant.id == ReplayResult.contestant_id)
                                .order_by(Contestant.slug, ReplayResult.correction_id)).all()
            return [tuple(row) for row in rows]  # type: ignore[misc]
    finally:
        engine.dispose()


def _lines(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    return {line["model"]: line for line in map(json.loads, capsys.readouterr().out.splitlines())}


def _replies(dialogue: Dialogue) -> dict[str, str | None]:
    """Alpha and beta answer with the expected call (fixed); gamma repeats the prose (not fixed)."""
    return {"alpha": dialogue.turns[0].expected, "beta": dialogue.turns[0].expected, "gamma": PROSE}


def test_a_correction_replayed_to_other_models_is_graded_in_context_and_stored_once(
        arena_env: str, engine_server: ScriptedEngine, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    dialogue = draw_dialogue(CALENDAR, seed=5)
    assert dialogue is not None
    correction_id = _play_battle(arena_env, dialogue)

    monkeypatch.setenv("ARENA_PUBLIC_EXPORT_DELAY_HOURS", "24")  # closed just now: not public yet
    with engine_server.scripted(_replies(dialogue)):
        assert main(["replay", "--models", "beta", "--json"]) == 0
    assert _lines(capsys)["beta"]["items"] == 0 and _stored(arena_env) == []

    monkeypatch.setenv("ARENA_PUBLIC_EXPORT_DELAY_HOURS", "0")
    with engine_server.scripted(_replies(dialogue)):
        assert main(["replay", "--models", "beta,gamma,alpha", "--concurrency", "2", "--json"]) == 0
    lines = _lines(capsys)
    assert lines["beta"]["answers"] == {str(correction_id): "fixed"}
    assert lines["gamma"]["answers"] == {str(correction_id): "not_fixed"}
    assert lines["beta"]["other"] == {"fixed": 1, "not_fixed": 0, "regression": 0}
    assert lines["alpha"]["own"] == {"fixed": 1, "not_fixed": 0, "regression": 0}, "its own mistake"
    assert lines["gamma"]["fix_rate"]["value"] == 0.0 and lines["gamma"]["fix_rate"]["n"] == 1
    assert all(line["stored"] == 1 and line["skipped"] == 0 for line in lines.values())
    assert _stored(arena_env) == [(correction_id, "alpha", True, "fixed"),
                                  (correction_id, "beta", False, "fixed"),
                                  (correction_id, "gamma", False, "not_fixed")]

    with engine_server.scripted(_replies(dialogue)):  # again: each model has answered it already
        assert main(["replay", "--models", "beta,gamma", "--json"]) == 0
    again = _lines(capsys)
    assert all(line["asked"] == 0 and line["already_answered"] == 1 for line in again.values())
    assert len(_stored(arena_env)) == 3


def test_a_local_model_answers_through_the_pool_and_its_answers_are_stored(
        arena_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    dialogue = draw_dialogue(CALENDAR, seed=5)
    assert dialogue is not None
    first, second = _play_battle(arena_env, dialogue), _play_battle(arena_env, dialogue)
    assert main(["replay", "--models", "tiny-llama", "--limit", "1", "--concurrency", "2", "--json"]) == 0
    line = _lines(capsys)["tiny-llama"]
    assert line["asked"] == 1 and line["items"] == 2 and line["errors"] == 0
    assert line["answers"] == {str(first): "not_fixed"}, "gibberish fixes nothing; the oldest item first"
    assert line["items_per_minute"] > 0
    assert main(["replay", "--models", "tiny-llama", "--concurrency", "2", "--json"]) == 0
    line = _lines(capsys)["tiny-llama"]
    assert line["already_answered"] == 1 and list(line["answers"]) == [str(second)]
    stored = [row[:3] for row in _stored(arena_env)]
    assert stored == [(first, "tiny-llama", False), (second, "tiny-llama", False)]


def test_the_exported_replay_file_gives_the_same_grades(
        arena_env: str, engine_server: ScriptedEngine, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    dialogue = draw_dialogue(CALENDAR, seed=8)
    assert dialogue is not None
    correction_id = _play_battle(arena_env, dialogue)
    with engine_server.scripted(_replies(dialogue)):
        assert main(["replay", "--models", "beta,gamma", "--json"]) == 0
    from_db = {model: line["answers"] for model, line in _lines(capsys).items()}

    for fmt in ("jsonl", "parquet"):
        out = tmp_path / f"replay.{fmt}"
        assert db_main(["export", "--url", arena_env, "--format", fmt, "--view", "replay", "--out", str(out),
                        "--no-progress"]) == 0
        capsys.readouterr()
        with engine_server.scripted(_replies(dialogue)):
            assert main(["replay", "--from", str(out), "--models", "beta,gamma", "--json"]) == 0
        lines = _lines(capsys)
        assert {model: line["answers"] for model, line in lines.items()} == from_db, fmt
        assert all(line["stored"] == 0 and line["source"] == str(out) for line in lines.values())
    assert len(_stored(arena_env)) == 2, "a file's replay stores nothing"

    pairs, votes = tmp_path / "rank" / "pairs.parquet", tmp_path / "rank" / "votes.parquet"
    for view, path in (("replay_pairs", pairs), ("battles", votes)):
        assert db_main(["export", "--url", arena_env, "--format", "parquet", "--view", view, "--out",
                        str(path), "--no-progress"]) == 0
    capsys.readouterr()
    assert ranking_main(["fit", "--battles", str(votes), "--battles", str(pairs), "--composite",
                         "--bootstrap", "10", "--json"]) == 0
    composite = json.loads(capsys.readouterr().out)
    assert composite["battles"] == {"human": 1, "replay": 1}, "alpha beat beta; beta fixed what gamma did not"
    ratings = {r["model"]: r for r in composite["models"]}
    assert ratings["gamma"]["human"] is None and ratings["beta"]["automatic"]["rating"] > 1000

    monkeypatch.setenv("ARENA_PUBLIC_EXPORT_DELAY_HOURS", "24")  # the file holds public battles only
    get_settings.cache_clear()
    assert db_main(["export", "--url", arena_env, "--format", "jsonl", "--view", "replay", "--out",
                    str(tmp_path / "later" / "replay.jsonl"), "--no-progress"]) == 0
    assert (tmp_path / "later" / "replay.jsonl").read_text() == ""

    (record,) = [json.loads(x) for x in (tmp_path / "replay.jsonl").read_text().splitlines()]
    assert record["id"] == correction_id and record["version"] == REPLAY_VERSION == EXPORTED_VERSION
    assert [m["kind"] for m in record["history"]] == ["request", "reply", "correction"]
    assert record["correction"] == CORRECTION and record["faulty_reply"] == PROSE
    assert record["person_verdict"] == "fixed" and record["grader_fixed"] is True
    assert record["model"] == "alpha"
    assert json.loads(record["dialogue"])["id"] == dialogue.id
    card = (tmp_path / "README.md").read_text()
    assert "## Replay: every correction as a test" in card and "`history.kind`" in card


def test_bad_input_exits_2_with_one_line_and_stores_nothing(
        arena_env: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dialogue = draw_dialogue(CALENDAR, seed=5)
    assert dialogue is not None
    _play_battle(arena_env, dialogue)
    out = tmp_path / "replay.jsonl"
    assert db_main(["export", "--url", arena_env, "--format", "jsonl", "--view", "replay", "--out", str(out),
                    "--no-progress"]) == 0
    (record,) = [json.loads(x) for x in out.read_text().splitlines()]
    bad_files = {
        "version": {**record, "version": 2},
        "missing": {k: v for k, v in record.items() if k != "history"},
        "scenario": {**record, "scenario": "retired-scenario"},
        "dialogue": {**record, "dialogue": json.dumps({"id": "x", "turns": [{"user": 1}]})},
    }
    cases: list[list[str]] = [["--models", "gpt-9"], ["--models", "beta", "--limit", "0"],
                              ["--models", "beta", "--since", "yesterday"],
                              ["--models", "beta", "--from", str(tmp_path / "none.jsonl")]]
    for name, bad in bad_files.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text(json.dumps(bad) + "\n")
        cases.append(["--models", "beta", "--from", str(path)])
    for args in cases:
        capsys.readouterr()
        assert main(["replay", *args]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1, (args, err)
    assert "version 2" in _err_of(["--models", "beta", "--from", str(tmp_path / "version.jsonl")], capsys)
    assert "'retired-scenario' no longer exists" in _err_of(
        ["--models", "beta", "--from", str(tmp_path / "scenario.jsonl")], capsys)
    assert _stored(arena_env) == []
    engine = make_engine(arena_env)
    try:
        with engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(ReplayResult)).scalar_one() == 0
        assert {c.slug for c in actions.list_contestants(engine)} == {"alpha", "beta"}, "no model registered"
    finally:
        engine.dispose()


def _err_of(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["replay", *args]) == 2
    return capsys.readouterr().err


def _item(dialogue: Dialogue, history: list[tuple[str, str, str]]) -> ReplayItem:
    return ReplayItem(id=1, scenario="calendar", system_prompt=dialogue.system_prompt,
                      history=tuple(DialogueMessage(role=r, kind=k, content=c) for r, k, c in history),  # type: ignore[arg-type]
                      model="alpha", dialogue=stored_form(dialogue))


def test_grading_in_context_tells_fixed_from_regression_and_skips_off_script() -> None:
    dialogue = draw_dialogue(CALENDAR, seed=3)  # two requests that each add an entry
    assert dialogue is not None and all(t.expected.startswith(ADD) for t in dialogue.turns[:2])
    first, second = dialogue.turns[0], dialogue.turns[1]
    item = _item(dialogue, [("user", "request", first.user), ("assistant", "reply", first.expected),
                            ("user", "request", second.user), ("assistant", "reply", PROSE),
                            ("user", "correction", CORRECTION)])
    assert follows(CALENDAR, item)
    fixed = grade_answer(CALENDAR, item, second.expected)
    assert fixed is not None and outcome_of(fixed) == "fixed"
    unfixed = grade_answer(CALENDAR, item, PROSE)
    assert unfixed is not None and outcome_of(unfixed) == "not_fixed"
    # The second event added, the first one (right before) removed: a regression, judged in context.
    broke = grade_answer(CALENDAR, item, f"{second.expected}\n{_removal(first.expected)}")
    assert broke is not None and broke.regression and outcome_of(broke) == "regression"

    off_script = _item(dialogue, [("user", "request", "Tell me a joke about calendars."),
                                  ("assistant", "reply", PROSE), ("user", "correction", CORRECTION)])
    assert not follows(CALENDAR, off_script), "the grader cannot follow a request it has no turn for"


def _removal(added: str) -> str:
    """The call that removes the entry ``added`` (an ``add_calendar_entry`` call) adds."""
    pattern = r'action\.add_calendar_entry\("([^"]+)", date="([^"]+)", time="([^"]+)".*'
    title, date, time = re.fullmatch(pattern, added).groups()  # type: ignore[union-attr]
    return f'action.remove_calendar_entry("{title}", "{date}", "{time}")'


def test_the_replay_bench_times_a_real_model(arena_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--replay-model", "tiny-llama", "--replay-items", "2", "--concurrency", "2"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["asked"] == 2 and figures["errors"] == 0 and figures["items_per_minute"] > 0
    assert figures["fix_rate"]["n"] == 2, "every answer graded in context"
    assert _stored(arena_env) == [], "the bench writes to its own throw-away database"
    assert main(["bench", "--replay-model", "gpt-9"]) == 2
    assert capsys.readouterr().err.startswith("error: unknown model(s) gpt-9")
