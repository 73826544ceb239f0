"""The automatic arena's own logic, with a scripted ChatModel test double (real models: test_arena_e2e)."""

from __future__ import annotations

import pytest

from inference.protocol import GenerationParams
from scenarios.premade import load_premade
from scenarios.records import RunRecord, run_symbols
from scenarios.report import build_report, render_markdown
from scenarios.runner import Progress, RunnerConfig, run_arena
from tests.scenarios.scripted import (
    CALENDAR,
    ScriptedModel,
    always_chatty,
    chatty_then_fixed,
    guesses_durations,
    perfect,
)

CASES = load_premade()


ALL = ("reliability", "dialogue", "fixing")


def _run(*models: ScriptedModel, protocols=ALL, **config) -> list[RunRecord]:
    return run_arena(scenario=CALENDAR, models=models, protocols=protocols, config=RunnerConfig(**config),
                     cases=CASES)


def test_perfect_model_fills_all_three_tables() -> None:
    records = _run(ScriptedModel("perfect", perfect))
    report = build_report(records, scenario=CALENDAR)
    # Turn 1 cannot know the year (study: "a call with one mistake"); turn 2 is the scripted year fix.
    assert report.text() == {"perfect": {
        "reliability": "✓✓✓✓✓",
        "turn1": "🍄", "turn2": "🥦", "turn3": "✔︎", "turn4": "✔︎", "turn5": "✔︎", "turn6": "✔︎",
        "wrong_time": "🥦🥦🥦", "api_only": "🥦🥦🥦", "wrong_api": "🥦🥦🥦",
    }}
    assert report.summary()["perfect"] == {"✔︎": 9, "🥦": 10, "🍄": 1, "🔥": 0}
    text = render_markdown(report, scenario=CALENDAR, cases=CASES)
    assert "| perfect | ✓✓✓✓✓ |" in text and "| Model | wrong time | API call only | wrong API |" in text


def test_dialogue_corrects_like_a_person_and_records_outcomes() -> None:
    (record,) = _run(ScriptedModel("chatty", chatty_then_fixed), protocols=("dialogue",))
    cells = run_symbols(record, scenario=CALENDAR)
    # Chatty again on every new turn: from turn 2 on it is a recurring mistake, (🍄), fixed each time.
    assert cells == ["🍄🥦"] + ["(🍄)🥦"] * 5
    feedback = [record.messages[c.feedback].content for c in record.corrections]
    assert feedback[0] == "Just the API call please."
    assert feedback[1] == "The current year is 2024."  # turn 2 is itself a correction of turn 1's reply
    # The year correction's reply was chatty again: not fixed; every "Just the API call please." worked.
    assert [c.outcome for c in record.corrections] == ["fixed", "not_fixed"] + ["fixed"] * 5
    kinds = [m.kind for m in record.messages]
    assert kinds[:7] == ["request", "reply", "correction", "reply", "correction", "reply", "correction"]


def test_dialogue_gives_up_after_k_attempts_and_marks_recurring_mistakes() -> None:
    (record,) = _run(ScriptedModel("stubborn", always_chatty), protocols=("dialogue",), max_fix_attempts=2)
    cells = run_symbols(record, scenario=CALENDAR)
    assert cells[0] == "🍄🍄🍄"
    assert cells[2] == "(🍄)🍄🍄"  # chatty again on a new turn: a recurring mistake
    assert cells[1] == "(🍄)🍄🍄"  # the scripted year correction, then two automatic ones
    # K=2 automatic corrections on each of 6 turns, plus turn 2's scripted year correction: none fixed.
    assert [c.outcome for c in record.corrections] == ["not_fixed"] * (2 * 6 + 1)
    (no_fix,) = _run(ScriptedModel("stubborn", always_chatty), protocols=("dialogue",), max_fix_attempts=0)
    assert run_symbols(no_fix, scenario=CALENDAR)[2] == "(🍄)"


def test_fixing_uses_the_premade_reply_and_its_correction() -> None:
    model = ScriptedModel("perfect", perfect)
    records = _run(model, protocols=("fixing",))
    assert [(r.case, r.attempt) for r in records] == [(c.kind, a) for c in CASES for a in range(3)]
    wrong_api = records[-1]
    seen_by_model, _ = model.calls[-1]
    assert seen_by_model[-2].content == CASES[2].faulty and seen_by_model[-1].content == CASES[2].correction
    assert len(seen_by_model) == 1 + 2 * CASES[2].turn + 1
    faulty = wrong_api.messages[wrong_api.corrections[0].faulty]
    assert faulty.scripted and faulty.grade is not None and faulty.grade.mistakes == ["wrong_function"]
    chatty = _run(ScriptedModel("chatty", always_chatty), protocols=("fixing",))
    assert build_report(chatty, scenario=CALENDAR).fixing["chatty"]["api_only"] == ["🍄", "🍄", "🍄"]


def test_seeds_vary_per_attempt_and_params_are_passed() -> None:
    model = ScriptedModel("perfect", perfect)
    params = GenerationParams(max_new_tokens=40, temperature=0.5, seed=100)
    _run(model, protocols=("reliability",), repeats=3, params=params)
    assert [p.seed for _, p in model.calls] == [100, 101, 102]
    assert {p.max_new_tokens for _, p in model.calls} == {40}
    assert model.calls[0][0][0].content == CALENDAR.system_prompt


def test_a_failing_model_is_recorded_as_errors_not_a_crash() -> None:
    records = _run(ScriptedModel("broken", perfect, fail=True), ScriptedModel("ok", perfect),
                   protocols=("reliability",), repeats=2)
    report = build_report(records, scenario=CALENDAR)
    assert report.reliability == {"broken": ["🔥", "🔥"], "ok": ["✓", "✓"]}
    # Two garbage attempts are two 🔥, not one 🔥🔥 ("three or more mistakes").
    assert report.summary() == {"broken": {"✔︎": 0, "🥦": 0, "🍄": 0, "🔥": 2},
                                "ok": {"✔︎": 2, "🥦": 0, "🍄": 0, "🔥": 0}}
    reply = records[0].messages[-1]
    assert reply.result is not None and reply.result.finish_reason == "error"
    assert reply.result.error is not None and "device lost" in reply.result.error


def test_sink_and_progress_see_every_run_in_order() -> None:
    stored: list[RunRecord] = []
    events: list[Progress] = []
    models = [ScriptedModel("a", perfect), ScriptedModel("b", perfect)]
    records = run_arena(scenario=CALENDAR, models=models, config=RunnerConfig(repeats=2), cases=CASES,
                        sink=stored.append, progress=events.append)
    assert stored == records and len(records) == 2 * (2 + 1 + 9)
    assert [e.done for e in events] == list(range(1, 25)) and {e.total for e in events} == {24}


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="repeats"):
        RunnerConfig(repeats=0)
    with pytest.raises(ValueError, match="unknown protocol"):
        _run(ScriptedModel("x", perfect), protocols=("chess",))
    from scenarios import get_scenario

    with pytest.raises(ValueError, match="no scripted dialogue"):
        run_arena(scenario=get_scenario("free-chat"), models=[ScriptedModel("x", perfect)])


def test_summary_counts_every_symbol_once() -> None:
    (record,) = _run(ScriptedModel("stubborn", always_chatty), protocols=("dialogue",), max_fix_attempts=2)
    report = build_report([record], scenario=CALENDAR)
    # 6 turns x 3 replies each, all 🍄 or (🍄): 18 mushrooms, nothing else.
    assert report.summary()["stubborn"] == {"✔︎": 0, "🥦": 0, "🍄": 18, "🔥": 0}


def test_correction_styles_run_one_dialogue_each_and_are_recorded() -> None:
    model = ScriptedModel("qwen-like", guesses_durations)
    fix, hint = _run(model, protocols=("dialogue",), correction_styles=("fix", "hint"))
    assert (fix.style, hint.style) == ("fix", "hint")

    def turn3(record: RunRecord) -> list[tuple[str, str]]:
        return [(record.messages[c.feedback].content, c.outcome) for c in record.corrections
                if record.messages[c.faulty].target_turn == 3]

    assert turn3(fix) == [("Use the default duration.", "fixed")]
    assert turn3(hint) == [("Duration is required.", "not_fixed"), ("Wrong duration.", "not_fixed")]
    report = build_report([fix, hint], scenario=CALENDAR)
    assert list(report.dialogue) == ["qwen-like (fix)", "qwen-like (hint)"]
    cells = report.text()["qwen-like"]
    assert (cells["fix:turn3"], cells["hint:turn3"]) == ("🍄🥦", "🍄🍄🍄")
    assert "| qwen-like (hint) |" in render_markdown(report, scenario=CALENDAR)
    with pytest.raises(ValueError, match="correction_styles"):
        RunnerConfig(correction_styles=("rude",))  # type: ignore[arg-type]
