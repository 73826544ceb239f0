"""Fixing suites: generated dialogues played with corrections, several in flight, figures with intervals
over dialogues; stored runs re-read give the same figures; the CLI's suite contract on a tiny model."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from commands.scenarios import main
from commands.scenarios_suite import SuiteRequest, figures, run_suite_command
from db.engine import make_engine
from db.migrate import upgrade_to_head
from inference.protocol import ChatMessage, GenerationParams
from ranking.counts import CountsError
from ranking.suites import mean_over_dialogues, ratio_over_dialogues
from scenarios import get_scenario
from scenarios.generate import Dialogue, generate_dialogues
from scenarios.records import RunRecord
from scenarios.storage import ensure_contestant, load_runs, store_run
from scenarios.suite import SuiteConfig, run_suite
from scenarios.suite_counts import suite_pairs
from settings import REPO_ROOT, Settings
from tests.scenarios.scripted import ScriptedModel

CALENDAR = get_scenario("calendar")
TINY_CATALOGUE = REPO_ROOT / "tests" / "data" / "tiny_catalogue.toml"
PARAMS = GenerationParams(max_new_tokens=64, temperature=0.0, seed=0)


def _responder(dialogues: Sequence[Dialogue], *, chatty: bool = False, caves: bool = False):  # noqa: ANN202
    """A model that knows each dialogue's expected replies: ``chatty`` wraps a request's first reply in
    prose (then answers clean after a correction); ``caves`` changes the call after a false correction."""
    by_first = {d.turns[0].user: d for d in dialogues}
    assert len(by_first) == len(dialogues)

    def respond(messages: Sequence[ChatMessage]) -> str:
        users = [m.content for m in messages if m.role == "user"]
        turns = {t.user: t for t in by_first[users[0]].turns}
        scripted = [turns[u] for u in users if u in turns]
        turn = scripted[-1]
        last = users[-1]
        if turn.is_false_correction and last == turn.user and caves:
            return turn.expected.replace("(", "(\"Changed\", ", 1)
        if chatty and last == turn.user and turn.kind == "request":
            return f"Sure! {turn.expected}"
        return turn.expected

    return respond


def _suite(respond, dialogues: list[Dialogue], *, k: int = 3, concurrency: int = 4):  # noqa: ANN001, ANN202
    model = ScriptedModel("scripted", respond)
    config = SuiteConfig(params=PARAMS, k=k, concurrency=concurrency)
    stored: list[RunRecord] = []
    outcome = run_suite(scenario=CALENDAR, model=model, dialogues=dialogues, config=config,
                        sink=stored.append)
    return outcome, stored, model


def test_a_perfect_model_passes_everything_and_holds_its_ground() -> None:
    dialogues = generate_dialogues(CALENDAR, count=8, seed=3, false_share=1.0)
    outcome, stored, model = _suite(_responder(dialogues), dialogues)
    assert outcome.dialogues == 8 and len(outcome.records) == len(stored) == 8 * 3  # its run, k - 1 samples
    assert outcome.failed == 0 and outcome.dialogues_per_minute > 0
    got = figures(outcome.records, k=3)["scripted"]
    assert got["pass_at_1"].value == 1.0 and got["pass_hat_k"].value == 1.0
    held = sum(len(d.false_turns) for d in dialogues)
    assert held >= 5 and got["maintenance_rate"].value == 1.0 and got["maintenance_rate"].n == held
    assert got["regression_rate"].value == 0.0 and math.isnan(got["fix_within_1"].value)  # nothing to fix
    assert got["pass_at_1"].n == 8 and got["pass_at_1"].dialogues == 8
    # every dialogue was played as written: the model saw each turn's user text in order
    first = next(r for r in outcome.records if r.protocol == "suite")
    assert first.dialogue is not None
    users = [m.content for m in first.messages if m.kind != "reply"]
    assert users == [t.user for t in first.dialogue.turns]


def test_pass_hat_k_counts_the_dialogues_own_first_reply_among_its_k_samples() -> None:
    dialogues = generate_dialogues(CALENDAR, count=3, seed=6, false_share=0.0)
    right = _responder(dialogues)
    asked: dict[str, int] = {}

    def twice_right(messages: Sequence[ChatMessage]) -> str:  # right the first two asks of a first turn
        users = [m.content for m in messages if m.role == "user"]
        if len(users) == 1:
            asked[users[0]] = asked.get(users[0], 0) + 1
            if asked[users[0]] > 2:
                return f"Sure! {right(messages)}"
        return right(messages)

    outcome, _, _ = _suite(twice_right, dialogues, k=3, concurrency=3)
    assert sorted(asked.values()) == [3, 3, 3]  # the suite's own ask and k - 1 = 2 first tries
    assert figures(outcome.records, k=3)["scripted"]["pass_hat_k"].value == 0.0  # C(2, 3) = 0
    assert figures(outcome.records, k=2)["scripted"]["pass_hat_k"].value == pytest.approx(1 / 3)  # 1 / C(3,2)


def test_a_chatty_model_is_fixed_by_one_correction_and_a_caving_one_fails_maintenance() -> None:
    dialogues = generate_dialogues(CALENDAR, count=6, seed=4, false_share=1.0)
    outcome, _, _ = _suite(_responder(dialogues, chatty=True, caves=True), dialogues, k=2)
    got = figures(outcome.records, k=2)["scripted"]
    assert got["pass_at_1"].value == 0.0 and got["pass_hat_k"].value == 0.0
    assert got["fix_within_1"].value == 1.0 and got["fix_within_2"].value == 1.0
    assert got["turns_to_fix"].value == 1.0
    requests = sum(1 for d in dialogues for t in d.turns if t.kind == "request")
    assert got["fix_within_1"].n == requests  # one mistake per request turn
    assert got["maintenance_rate"].value == 0.0
    assert got["maintenance_rate"].n == sum(len(d.false_turns) for d in dialogues) > 0


def test_stored_suite_runs_reread_give_the_same_figures(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'suite.db'}"
    upgrade_to_head(url)
    engine = make_engine(url)
    try:
        ensure_contestant(engine, slug="scripted", name="Scripted")
        dialogues = generate_dialogues(CALENDAR, count=4, seed=5, false_share=0.5)
        outcome, stored, _ = _suite(_responder(dialogues, chatty=True), dialogues, k=2, concurrency=2)
        ids = [store_run(engine, r) for r in stored]
        reread = load_runs(engine, battle_ids=ids, scenario=CALENDAR)
    finally:
        engine.dispose()
    assert [r.dialogue for r in reread] == [r.dialogue for r in stored]
    assert figures(reread, k=2) == figures(outcome.records, k=2)


def test_an_engine_that_fails_leaves_every_dialogue_recorded_and_counted() -> None:
    dialogues = generate_dialogues(CALENDAR, count=3, seed=6)
    model = ScriptedModel("broken", _responder(dialogues), fail=True)
    outcome = run_suite(scenario=CALENDAR, model=model, dialogues=dialogues,
                        config=SuiteConfig(params=PARAMS, k=1, concurrency=2))
    assert outcome.dialogues == 3 and outcome.failed == 3
    assert figures(outcome.records, k=1)["broken"]["pass_at_1"].value == 0.0


def test_ratio_over_dialogues_is_seeded_and_brackets_the_value() -> None:
    units = [(1.0, 2.0), (0.0, 1.0), (3.0, 3.0), (2.0, 4.0), (0.0, 0.0)]
    estimate = ratio_over_dialogues(units)
    assert estimate.value == pytest.approx(6 / 10) and estimate.n == 10 and estimate.dialogues == 4
    assert estimate.low <= estimate.value <= estimate.high and estimate.low < estimate.high
    assert ratio_over_dialogues(units) == estimate  # the same seed, the same interval
    narrow = ratio_over_dialogues(units * 25)
    assert narrow.high - narrow.low < estimate.high - estimate.low  # more dialogues, a tighter interval
    assert math.isnan(ratio_over_dialogues([(0.0, 0.0)]).value)
    assert ratio_over_dialogues([(0.0, 0.0)]).as_json() == {"value": None, "low": None, "high": None, "n": 0}
    with pytest.raises(CountsError):
        ratio_over_dialogues([(3.0, 2.0)])
    assert mean_over_dialogues([(3.0, 2.0), (1.0, 1.0)]).value == pytest.approx(4 / 3)


def _settings(tmp_path: Path) -> Settings:
    return Settings(environment="test", data_dir=tmp_path, catalogue_path=TINY_CATALOGUE,
                    compilation_cache=False, database_url=f"sqlite:///{tmp_path / 'arena.db'}", mesh="off")


def test_a_tiny_model_suite_prints_one_json_line_with_every_figure(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    request = SuiteRequest(scenario=get_scenario("smart-home"), slugs=["tiny-llama"], dialogues=2, seed=1,
                           concurrency=2, k=2, max_fix_attempts=1, style="fix", false_share=0.5,
                           overrides={"max_new_tokens": 8}, store=True)
    assert run_suite_command(settings=_settings(tmp_path), request=request, as_json=True,
                             show_progress=False) == 0
    (line,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert {k: line[k] for k in ("model", "scenario", "dialogues", "seed")} == {
        "model": "tiny-llama", "scenario": "smart-home", "dialogues": 2, "seed": 1}
    assert line["dialogues_per_minute"] > 0
    assert set(line["metrics"]) == {"pass_at_1", "pass_hat_k", "fix_within_1", "fix_within_2", "turns_to_fix",
                                    "regression_rate", "recurrence_rate", "maintenance_rate"}
    assert line["metrics"]["pass_hat_k"]["k"] == 2
    # random weights write gibberish: nothing passes, every first reply is a mistake the suite corrected
    assert line["metrics"]["pass_at_1"] == {"value": 0.0, "low": 0.0, "high": 0.0, "n": 2}
    assert line["metrics"]["fix_within_1"]["n"] >= 2
    assert (tmp_path / "arena.db").exists()


def test_suite_bad_input_exits_2_and_stores_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARENA_CATALOGUE_PATH", str(TINY_CATALOGUE))
    monkeypatch.setenv("ARENA_DATA_DIR", str(tmp_path))
    for args in (["--dialogues", "0"], ["--dialogues", "2", "--concurrency", "0"],
                 ["--dialogues", "2", "--k", "0"], ["--dialogues", "2", "--models", "gpt-9"]):
        argv = ["run", "calendar", "--models", "tiny-llama", *args]
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1, (argv, err)
    assert main(["run", "nope", "--models", "tiny-llama", "--dialogues", "2"]) == 2
    assert not any(tmp_path.iterdir())


def test_report_renders_the_stored_suite_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'suite.db'}"
    upgrade_to_head(url)
    engine = make_engine(url)
    try:
        ensure_contestant(engine, slug="scripted", name="Scripted")
        dialogues = generate_dialogues(CALENDAR, count=3, seed=9, false_share=1.0)
        outcome, stored, _ = _suite(_responder(dialogues, chatty=True), dialogues, k=2)
        for record in stored:
            store_run(engine, record)
    finally:
        engine.dispose()
    assert main(["report", "calendar", "--url", url, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    (line,) = printed["suites"]
    got = (line["model"], line["scenario"], line["dialogues"], line["seed"])
    assert got == ("scripted", "calendar", 3, 9)
    live = figures(outcome.records, k=2)["scripted"]
    assert line["metrics"]["fix_within_1"] == live["fix_within_1"].as_json()
    assert line["metrics"]["pass_hat_k"]["k"] == 2
    assert printed["cells"] == {}  # suites are not the study's tables
    assert main(["report", "calendar", "--url", url]) == 0
    markdown = capsys.readouterr().out
    assert "## Fixing suites" in markdown and "| scripted | greedy | 3 | 0% (0–0, n=3) |" in markdown
    assert (line["temperature"], line["style"]) == (0.0, "fix")


def test_a_greedy_and_a_sampled_suite_of_one_model_are_reported_apart(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Stored together, a model's greedy suite and its suite at 0.7 keep their own figures: the sampled
    suite's first-turn samples do not count towards the greedy suite's pass^k, nor the reverse."""
    url = f"sqlite:///{tmp_path / 'suite.db'}"
    upgrade_to_head(url)
    engine = make_engine(url)
    dialogues = generate_dialogues(CALENDAR, count=4, seed=5, false_share=0.0)
    sampled = GenerationParams(max_new_tokens=64, temperature=0.7, seed=0)
    try:
        ensure_contestant(engine, slug="scripted", name="Scripted")
        settings = ((PARAMS, _responder(dialogues)), (sampled, _responder(dialogues, chatty=True)))
        for params, respond in settings:
            run_suite(scenario=CALENDAR, model=ScriptedModel("scripted", respond), dialogues=dialogues,
                      config=SuiteConfig(params=params, k=3, concurrency=2),
                      sink=lambda record: store_run(engine, record))
    finally:
        engine.dispose()
    assert main(["report", "calendar", "--url", url, "--json"]) == 0
    lines = {line["temperature"]: line for line in json.loads(capsys.readouterr().out)["suites"]}
    assert set(lines) == {0.0, 0.7} and {line["dialogues"] for line in lines.values()} == {4}
    greedy, hot = lines[0.0]["metrics"], lines[0.7]["metrics"]
    assert greedy["pass_at_1"]["value"] == 1.0 and hot["pass_at_1"]["value"] == 0.0
    assert greedy["pass_hat_k"]["value"] == 1.0 and hot["pass_hat_k"]["value"] == 0.0
    assert greedy["pass_hat_k"]["k"] == hot["pass_hat_k"]["k"] == 3  # not 6 samples pooled
    assert greedy["fix_within_1"]["n"] == 0 and hot["fix_within_1"]["value"] == 1.0
    assert main(["report", "calendar", "--url", url]) == 0
    markdown = capsys.readouterr().out
    assert "| scripted | greedy | 4 | 100% " in markdown
    assert "| scripted | temperature 0.7 | 4 | 0% " in markdown


def test_a_false_claim_is_only_made_after_a_right_reply() -> None:
    dialogues = generate_dialogues(CALENDAR, count=6, seed=4, false_share=1.0)
    outcome, _, _ = _suite(lambda messages: "I'd rather not.", dialogues, k=1)
    claims = {t.user for d in dialogues for t in d.turns if t.is_false_correction}
    assert claims
    sent = {m.content for r in outcome.records for m in r.messages if m.kind == "correction"}
    assert not sent & claims  # every reply was wrong: no claim tested anything
    assert figures(outcome.records, k=1)["scripted"]["maintenance_rate"].n == 0


def test_suite_pairs_compare_two_models_on_the_same_dialogue() -> None:
    dialogues = generate_dialogues(CALENDAR, count=4, seed=6, false_share=0.0)
    records: list[RunRecord] = []
    for model in (ScriptedModel("perfect", _responder(dialogues)),
                  ScriptedModel("chatty", _responder(dialogues, chatty=True)),
                  ScriptedModel("stubborn", lambda messages: "I'd rather not.")):
        records += run_suite(scenario=CALENDAR, model=model, dialogues=dialogues,
                             config=SuiteConfig(params=PARAMS, k=1, concurrency=2)).records
    rows = suite_pairs(records)
    assert len(rows) == 4 * 3, "three pairs per dialogue"
    outcome = {(a, b) for a, b, _, _ in rows}
    assert outcome == {("chatty", "perfect"), ("chatty", "stubborn"), ("perfect", "stubborn")}
    ties = [w for a, b, w, _ in rows if (a, b) == ("chatty", "perfect")]
    assert ties == ["tie"] * 4, "both fixed (or had none)"
    assert all(w == "a" for a, b, w, _ in rows if b == "stubborn"), "stubborn never fixes"


def test_report_writes_the_suites_pairs_for_the_composite_fit(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from commands.ranking import main as ranking_main

    url = f"sqlite:///{tmp_path / 'suite.db'}"
    upgrade_to_head(url)
    engine = make_engine(url)
    dialogues = generate_dialogues(CALENDAR, count=3, seed=9, false_share=0.0)
    try:
        for model in (ScriptedModel("chatty", _responder(dialogues, chatty=True)),
                      ScriptedModel("stubborn", lambda messages: "I'd rather not.")):
            ensure_contestant(engine, slug=model.slug, name=model.slug.title())
            run_suite(scenario=CALENDAR, model=model, dialogues=dialogues,
                      config=SuiteConfig(params=PARAMS, k=1, concurrency=2),
                      sink=lambda record: store_run(engine, record))
    finally:
        engine.dispose()
    pairs = tmp_path / "pairs.csv"
    assert main(["report", "calendar", "--url", url, "--pairs", str(pairs)]) == 0
    lines = pairs.read_text().splitlines()
    assert lines[0] == "model_a,model_b,winner,source,scenario,item"
    assert sorted(lines[1:]) == sorted(f"chatty,stubborn,a,suite,calendar,{d.id}" for d in dialogues)
    capsys.readouterr()
    assert ranking_main(["fit", "--battles", str(pairs), "--composite", "--bootstrap", "0", "--json"]) == 0
    fitted = json.loads(capsys.readouterr().out)
    assert fitted["battles"] == {"suite": 3} and fitted["models"][0]["human"] is None
    assert main(["report", "calendar", "--url", url, "--pairs", str(tmp_path / "no" / "such" / "p.csv")]) == 2
