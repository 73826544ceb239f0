"""``python -m scenarios grade`` and ``bench``, in process (``run`` is covered by test_arena_e2e)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from commands.scenarios import main

ADD = "action.add_calendar_entry"


def test_grade_one_reply_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    reply = f'Sure! {ADD}("Meeting with Fred", date="2024-11-11", time="5:00 PM", duration=30)'
    assert main(["grade", "--scenario", "calendar", "--target", "2", "--reply", reply, "--json"]) == 0
    line = json.loads(capsys.readouterr().out)
    assert line == {"label": "partial", "mistakes": ["chatty", "bad_format"], "assumed": [],
                    "correction": "Just the API call please."}


def test_grade_batch_file_one_line_per_reply(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        {"target": 3, "reply": f'{ADD}("Rock Concert", date="2024-11-11", time="08:00", duration=30)'},
        {"target": 6, "reply": 'action.remove_calendar_entry("Meeting with Fred", "2024-11-11", "17:00")'},
        {"target": 1, "reply": "Dear Fred, see you Monday."},
    ]
    path = tmp_path / "replies.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    args = ["grade", "--scenario", "calendar", "--replies", str(path), "--json", "--style", "explicit"]
    assert main(args) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["label"] for x in lines] == ["partial", "correct", "garbage"]
    assert lines[0] == {"label": "partial", "mistakes": ["wrong_time"], "assumed": [],
                        "correction": "Wrong time: 20:00."}
    assert lines[1]["correction"] is None and lines[2]["mistakes"] == []


def test_grade_human_readable_line(capsys: pytest.CaptureFixture[str]) -> None:
    reply = f'{ADD}("Rock Concert", "2024-11-11", "20:00", 60*3)'
    assert main(["grade", "--target", "4", "--reply", reply]) == 0
    assert capsys.readouterr().out.strip() == "✓ correct"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["grade", "--reply", "x"], "needs --target"),
        (["grade", "--target", "0", "--reply", "x"], "out of range"),
        (["grade", "--scenario", "free-chat", "--target", "1", "--reply", "x"], "no grader"),
        (["grade", "--scenario", "chess", "--target", "1", "--reply", "x"], "unknown scenario"),
        (["grade", "--replies", "/nonexistent/file.jsonl"], "cannot read"),
        (["bench", "--rounds", "0"], "--rounds"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1


def test_batch_file_with_a_bad_line_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"target": 1, "reply": "x"}\n{"target": "one", "reply": "x"}\n', encoding="utf-8")
    assert main(["grade", "--replies", str(path), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and f"{path}:2:" in captured.err


def test_bench_reports_figures_and_hostile_labels(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--rounds", "1"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["replies"] >= 60 and figures["grade_and_correct_ms_per_reply"] > 0
    assert figures["hostile"]["1 MB of text"]["label"] == "garbage"
    assert figures["hostile"]["100k nested parens"]["label"] == "garbage"


def test_every_command_and_flag_is_documented_in_the_cli_reference() -> None:
    from commands.scenarios import build_parser as _parser

    readme = (Path(__file__).resolve().parents[2] / "docs" / "CLI.md").read_text(encoding="utf-8")
    section = readme.split("### python -m scenarios", 1)[1].split("\n## ", 1)[0]
    sub = next(a for a in _parser()._actions if a.dest == "command")
    for name, parser in sub.choices.items():  # type: ignore[union-attr]
        assert f"`{name}" in section, name
        for action in parser._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and flag != "--help":
                    assert flag in section, f"{name} {flag} is not in docs/CLI.md"


def test_grade_a_dialogue_prints_one_line_per_reply(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from scenarios import get_scenario

    calendar = get_scenario("calendar")
    messages = [
        {"role": "user", "kind": "request", "content": calendar.turn(1).user},
        {"role": "assistant", "kind": "reply", "content": calendar.turn(1).expected},
        {"role": "user", "kind": "correction", "content": "The current year is 2024."},
        {"role": "assistant", "kind": "reply", "content": "Sure! " + calendar.turn(2).expected},
        {"role": "user", "kind": "correction", "content": "Just the API call please."},
        {"role": "assistant", "kind": "reply", "content": calendar.turn(2).expected},
    ]
    path = tmp_path / "dialogue.json"
    path.write_text(json.dumps(messages), encoding="utf-8")
    assert main(["grade", "--scenario", "calendar", "--dialogue", str(path), "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines == [
        {"turn": 1, "label": "correct", "mistakes": [], "assumed": ["year"], "fixed": None,
         "regression": False, "recurrence": False, "maintained": None},
        {"turn": 2, "label": "partial", "mistakes": ["chatty"], "assumed": [], "fixed": False,
         "regression": False, "recurrence": False, "maintained": None},
        {"turn": 2, "label": "correct", "mistakes": [], "assumed": [], "fixed": True,
         "regression": False, "recurrence": False, "maintained": None},
    ]
    assert main(["grade", "--dialogue", str(path)]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0] == "turn 1: ✓ correct (assumed year)" and text[2].endswith("— fixed")


@pytest.mark.parametrize(
    ("content", "message"),
    [("{}", "JSON list"), ("[1]", "message 1 is not an object"), ("not json", "not JSON"),
     ('[{"role": "user", "kind": "reply", "content": "x"}]', "message 1: a reply comes from the assistant")],
)
def test_a_bad_dialogue_file_exits_2(tmp_path: Path, content: str, message: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    assert main(["grade", "--dialogue", str(path), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and message in captured.err


def test_run_style_takes_a_comma_separated_list() -> None:
    from commands.scenarios import build_parser as _parser

    args = _parser().parse_args(["run", "calendar", "--models", "x", "--style", "fix, hint,fix"])
    assert args.style == ("fix", "hint")
    assert _parser().parse_args(["run", "calendar", "--models", "x"]).style == ("fix",)
    with pytest.raises(SystemExit) as exit_info:
        _parser().parse_args(["run", "calendar", "--models", "x", "--style", "rude"])
    assert exit_info.value.code == 2
