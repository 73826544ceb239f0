"""Every gradable scenario on its generated dialogues: the expected replies grade correct, mutations do
not, false corrections are maintained by the expected reply and caved by a changed one; the CLI's
``generate``/``grade --dialogue``/``list`` contract and its refusals."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from commands.scenarios import main
from scenarios import get_scenario, list_scenarios
from scenarios.api import Api
from scenarios.base import Scenario, Turn
from scenarios.dialogue import ReplyGrade
from scenarios.fields import DateValue
from scenarios.generate import Dialogue, generate_dialogues, study_dialogue
from scenarios.grader import parse_target
from scenarios.values import ANY
from tests.scenarios.dialogues import dialogue_messages, play, rewrite_call

GENERATED = [s for s in list_scenarios() if s.generator is not None]
COUNT = 30


def _graded(scenario: Scenario, dialogue: Dialogue, replies: list[str]) -> list[ReplyGrade]:
    return play(scenario, dialogue.turns, replies)


def _dialogues(scenario: Scenario, seed: int = 7) -> list[Dialogue]:
    return generate_dialogues(scenario, count=COUNT, seed=seed, false_share=0.5)


@pytest.mark.parametrize("scenario", GENERATED, ids=[s.slug for s in GENERATED])
def test_expected_replies_grade_correct_and_false_corrections_are_maintained(scenario: Scenario) -> None:
    dialogues = _dialogues(scenario)
    assert sum(bool(d.false_turns) for d in dialogues) >= 5
    assert any(t.assumes for d in dialogues for t in d.turns), "the trap appears in some dialogues"
    for dialogue in dialogues:
        graded = _graded(scenario, dialogue, [t.expected for t in dialogue.turns])
        assert [g.label for g in graded] == ["correct"] * len(dialogue.turns), dialogue.id
        assert all(g.state_matches for g in graded), dialogue.id
        for turn, grade in zip(dialogue.turns, graded, strict=True):
            assert grade.maintained is (True if turn.is_false_correction else None), dialogue.id
            assert grade.fixed is (True if turn.is_correction else None), dialogue.id
            assert set(grade.assumed) == set(turn.assumes), dialogue.id
            assert not grade.recurrence and not grade.regression, dialogue.id


def _mutations(api: Api, turn: Turn) -> dict[str, str]:
    """Replies that must not grade correct for ``turn``: prose, each changed argument, another function,
    no call."""
    targets = parse_target(api, turn.expected)
    first = targets[0]
    rest = "; ".join(rewrite_call(api, t) for t in targets[1:])

    def joined(call: str) -> str:
        return f"{call}; {rest}" if rest else call

    out = {"prose": f"Sure! Here you go: {turn.expected}", "no call": "I have noted that for you."}
    for param in first.function.params:
        value = first.value(param.name)
        if value is None or value is ANY or param.name in turn.assumes:
            continue
        if isinstance(value, DateValue) and value.year is None:
            continue
        out[f"changed {param.name}"] = joined(rewrite_call(api, first, change=param.name))
    others = [f.name for f in api.functions if f.name != first.function.name]
    out["another function"] = joined(rewrite_call(api, first, function=others[0]))
    return out


@pytest.mark.parametrize("scenario", GENERATED, ids=[s.slug for s in GENERATED])
def test_mutated_replies_do_not_grade_correct(scenario: Scenario) -> None:
    assert scenario.api is not None
    checked = 0
    for dialogue in _dialogues(scenario, seed=11)[:12]:
        expected = [t.expected for t in dialogue.turns]
        for index, turn in enumerate(dialogue.turns):
            # the written-back call itself is correct: the mutations below differ in one thing only
            targets = parse_target(scenario.api, turn.expected)
            rebuilt = "; ".join(rewrite_call(scenario.api, t) for t in targets)
            same = _graded(scenario, dialogue, [*expected[:index], rebuilt, *expected[index + 1:]])
            assert same[index].label == "correct", (dialogue.id, rebuilt)
            for name, reply in _mutations(scenario.api, turn).items():
                graded = _graded(scenario, dialogue, [*expected[:index], reply, *expected[index + 1:]])
                assert graded[index].label != "correct", (dialogue.id, turn.user, name, reply)
                if turn.is_false_correction:
                    assert graded[index].maintained is False, (dialogue.id, name)
                checked += 1
    assert checked > 100


def test_a_year_that_returns_after_the_correction_is_a_recurrence_and_both_forms_agree(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    calendar = get_scenario("calendar")
    study = study_dialogue(calendar)
    wrong_year = study.turns[2].expected.replace("2024", "2023")
    graded = _graded(calendar, study, [study.turns[0].expected, study.turns[1].expected, wrong_year,
                                      *[t.expected for t in study.turns[3:]]])
    assert graded[0].label == "correct" and graded[0].assumed == ("year",)
    assert graded[2].recurrence is True and graded[2].grade is not None
    assert graded[2].grade.mistakes == ["wrong_year"]
    # --replies and --dialogue agree on turn 1
    assert main(["grade", "--target", "1", "--reply", study.turns[0].expected, "--json"]) == 0
    single = json.loads(capsys.readouterr().out)
    assert (single["label"], single["mistakes"], single["assumed"]) == ("correct", [], ["year"])
    path = tmp_path / "d.json"
    messages = [{"role": m.role, "kind": m.kind, "content": m.content}
                for m in dialogue_messages(study.turns, [t.expected for t in study.turns])]
    path.write_text(json.dumps({"dialogue": study.as_json(), "messages": messages}), encoding="utf-8")
    assert main(["grade", "--dialogue", str(path), "--json"]) == 0
    first = json.loads(capsys.readouterr().out.splitlines()[0])
    assert (first["label"], first["mistakes"], first["assumed"]) == ("correct", [], ["year"])


def test_generate_is_seeded_and_grade_reads_what_generate_printed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = GENERATED[-1]
    assert main(["generate", "--scenario", scenario.slug, "--dialogues", "5", "--seed", "3", "--json"]) == 0
    first = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main(["generate", "--scenario", scenario.slug, "--dialogues", "3", "--seed", "3", "--json"]) == 0
    again = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main(["generate", "--scenario", scenario.slug, "--dialogues", "5", "--seed", "4", "--json"]) == 0
    other = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert first[:3] == again and [d["turns"] for d in first] != [d["turns"] for d in other]
    assert set(first[0]) == {"id", "scenario", "seed", "system_prompt", "turns"}
    assert {k for t in first[0]["turns"] for k in t} <= {"user", "kind", "expected", "assumes"}
    assert len({d["id"] for d in first + other}) == 10
    for item in first:
        turns = item["turns"]
        messages = []
        for turn in turns:
            messages += [{"role": "user", "kind": "request" if turn["kind"] == "request" else "correction",
                          "content": turn["user"]},
                         {"role": "assistant", "kind": "reply", "content": turn["expected"]}]
        path = tmp_path / f"{item['id']}.json"
        path.write_text(json.dumps({"dialogue": item, "messages": messages}), encoding="utf-8")
        assert main(["grade", "--scenario", scenario.slug, "--dialogue", str(path), "--json"]) == 0
        lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
        assert [x["label"] for x in lines] == ["correct"] * len(turns)
        assert [x["maintained"] for x in lines] == [True if t["kind"] == "false_correction" else None
                                                    for t in turns]


def test_list_names_every_scenario_and_its_functions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["slug"] for r in rows] == [s.slug for s in list_scenarios()]
    by_slug = {r["slug"]: r for r in rows}
    assert by_slug["calendar"]["functions"] == ["add_calendar_entry", "remove_calendar_entry"]
    assert by_slug["free-chat"] == {"slug": "free-chat", "title": "Free chat", "gradable": False,
                                    "functions": []}
    gradable = [r for r in rows if r["gradable"]]
    assert len(gradable) >= 3 and all(len(r["functions"]) >= 2 for r in gradable)
    assert len({tuple(r["functions"]) for r in gradable}) == len(gradable)  # each its own API


def _bad(tmp_path: Path, content: object) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    calendar = get_scenario("calendar")
    item = generate_dialogues(calendar, count=1, seed=0)[0].as_json()
    other = next(s for s in GENERATED if s.slug != "calendar")
    foreign = generate_dialogues(other, count=1, seed=0)[0].as_json()
    broken_turn = dict(item, turns=[dict(item["turns"][0], expected="print('hi')")])
    cases = [
        ["generate", "--scenario", "nope", "--dialogues", "3"],
        ["generate", "--dialogues", "0"],
        ["generate", "--dialogues", "many"],
        ["generate", "--scenario", "free-chat", "--dialogues", "2"],
        ["generate", "--dialogues", "2", "--false-corrections", "1.5"],
        ["grade", "--dialogue", str(_bad(tmp_path, "{not json"))],
        ["grade", "--dialogue", str(_bad(tmp_path, {"dialogue": item}))],
        ["grade", "--dialogue", str(_bad(tmp_path, {"dialogue": foreign, "messages": []}))],
        ["grade", "--dialogue", str(_bad(tmp_path, {"dialogue": broken_turn, "messages": []}))],
        ["grade", "--dialogue", str(_bad(tmp_path, {"dialogue": dict(item, turns="x"), "messages": []}))],
        ["grade", "--dialogue", str(_bad(tmp_path, {"dialogue": item, "messages": [{"role": "user"}]}))],
    ]
    for argv in cases:
        assert main(argv) == 2, argv
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.startswith("error: "), argv
        assert captured.err.count("\n") == 1, argv


def test_dialogue_json_round_trips_and_the_study_is_verbatim() -> None:
    calendar = get_scenario("calendar")
    study = study_dialogue(calendar)
    assert study.turns == calendar.turns and study.seed is None
    assert [t.kind for t in study.turns] == ["request", "correction", *["request"] * 4]
    for scenario in GENERATED:
        for dialogue in generate_dialogues(scenario, count=5, seed=1, false_share=1.0):
            assert Dialogue.from_json(json.loads(json.dumps(dialogue.as_json())), scenario) == dialogue
    with pytest.raises(ValueError, match="not 'calendar'"):
        Dialogue.from_json(dataclasses.replace(study, scenario="other").as_json(), calendar)


def test_maintained_judges_the_claimed_reply_only_and_needs_a_right_reply_to_keep() -> None:
    calendar = get_scenario("calendar")
    dialogue = next(d for d in generate_dialogues(calendar, count=40, seed=21, false_share=1.0)
                    if d.false_turns and d.false_turns[0] > 2)
    claim = dialogue.false_turns[0] - 1  # 0-based index of the false correction
    expected = [t.expected for t in dialogue.turns]
    assert calendar.api is not None
    wrong_first = rewrite_call(calendar.api, parse_target(calendar.api, expected[0])[0], change="title")
    # An earlier mistake left uncorrected does not make holding the right call a cave.
    graded = _graded(calendar, dialogue, [wrong_first, *expected[1:]])
    assert graded[0].label != "correct" and graded[claim].maintained is True
    # A claim after a wrong reply tests nothing: the reply before it was not right to keep.
    before = parse_target(calendar.api, expected[claim - 1])[0]
    wrong_before = rewrite_call(calendar.api, before, change="title")
    graded = _graded(calendar, dialogue, [*expected[:claim - 1], wrong_before, wrong_before,
                                          *expected[claim + 1:]])
    assert graded[claim].maintained is None and graded[claim].fixed is None
