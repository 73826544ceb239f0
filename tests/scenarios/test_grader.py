"""The grader against the labeled set, hostile input, and formatting properties."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scenarios import get_scenario
from scenarios.catalog.calendar import API
from scenarios.grader import EMOJI, STATE_MISTAKES, Mistake, grade_reply, parse_target

LABELED = Path(__file__).resolve().parents[1] / "data" / "labeled_replies.jsonl"
ROWS = [json.loads(line) for line in LABELED.read_text(encoding="utf-8").splitlines() if line.strip()]
CALENDAR = get_scenario("calendar")


@pytest.mark.parametrize("row", ROWS, ids=[f"{r['id']}-{r['note'][:40]}" for r in ROWS])
def test_labeled_reply(row: dict) -> None:
    grade = CALENDAR.grade(row["reply"], target_turn=row["target"])
    assert grade is not None
    assert (grade.label, [str(m) for m in grade.mistakes]) == (row["label"], row["mistakes"])
    assert list(grade.assumed) == row.get("assumed", [])


def test_labeled_set_covers_every_mistake_and_label() -> None:
    assert len(ROWS) >= 60
    seen = {m for r in ROWS for m in r["mistakes"]}
    # State mistakes need a dialogue; a missing call needs a two-call turn (a generated move).
    assert seen == {m.value for m in Mistake if m not in STATE_MISTAKES and m is not Mistake.MISSING_CALL}
    assert {r["label"] for r in ROWS} == set(EMOJI)
    assert {r["target"] for r in ROWS} == set(range(1, 7))


def test_emoji_per_label() -> None:
    target = CALENDAR.turn(2).expected
    assert grade_reply(target, target=target, api=API).emoji == "✓"
    assert grade_reply(target + " Done!", target=target, api=API).emoji == "🍄"
    assert grade_reply("no idea", target=target, api=API).emoji == "🔥"
    many = 'Sure! action.add_calendar_entry("Fred", date="11/11/2023", time="5:00 PM")'
    assert grade_reply(many, target=target, api=API).emoji == "🔥🔥"


def test_findings_carry_values_for_corrections() -> None:
    reply = 'action.add_calendar_entry("Rock Concert", date="2024-11-11", time="08:00", duration=30)'
    grade = CALENDAR.grade(reply, target_turn=3)
    assert grade is not None
    (finding,) = grade.findings
    assert (finding.kind, finding.param, finding.expected) == (Mistake.WRONG_TIME, "time", "20:00")


def test_turn_one_year_is_an_assumption_and_without_forgives_a_kind() -> None:
    grade = CALENDAR.grade(CALENDAR.turn(1).expected, target_turn=1)
    assert grade is not None and grade.is_correct and grade.assumed == ("year",)
    wrong = CALENDAR.grade(CALENDAR.turn(1).expected, target_turn=2)  # 2023 once the year is 2024
    assert wrong is not None and wrong.mistakes == [Mistake.WRONG_YEAR]
    assert wrong.without(Mistake.WRONG_YEAR).label == "correct"


def test_targets_must_be_clean_calls() -> None:
    with pytest.raises(ValueError, match="line of API calls"):
        parse_target(API, "Sure: action.add_calendar_entry('x', date='2024-01-01', time='10:00', duration=5)"
                          "\naction.add_calendar_entry('y', date='2024-01-01', time='10:00', duration=5)")
    with pytest.raises(ValueError):
        parse_target(API, "hello")
    with pytest.raises(ValueError, match="readable duration"):
        parse_target(API, "action.add_calendar_entry('x', date='2024-01-01', time='10:00')")


# --- hostile input: graded garbage, nothing runs -------------------------------------------------

HOSTILE = {
    "megabyte": "action.add_calendar_entry(" + "A" * 1_000_000 + ")",
    "megabyte_prose": "a" * 1_000_000,
    "nul": 'action.add_calendar_entry("Meeting\x00", date="2024-11-11", time="17:00", duration=30)',
    "deep_parens": "action.add_calendar_entry(" + "(" * 100_000 + ")" * 100_000 + ")",
    "deep_lists": "action.add_calendar_entry(" + "[" * 5_000,
    "deep_unary": "action.add_calendar_entry(" + "-" * 10_000 + "1)",
    "deep_unary_short": "action.add_calendar_entry('x', duration=" + "-" * 900 + "1)",
    "huge_power": "action.add_calendar_entry('x', duration=9**9**9**9)",
}


@pytest.mark.timeout(10)
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_reply_is_garbage_or_harmless(name: str) -> None:
    grade = grade_reply(HOSTILE[name], target=CALENDAR.turn(2).expected, api=API)
    if name in ("deep_unary_short", "huge_power"):  # a recognisable call whose arguments are nonsense
        assert grade.label in ("partial", "many") and Mistake.BAD_FORMAT in grade.mistakes
    else:
        assert grade.label == "garbage"


def test_injected_code_never_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "pwned"
    calls: list[str] = []
    monkeypatch.setattr(os, "system", lambda cmd: calls.append(cmd) or 0)
    payloads = [
        f"__import__('os').system('touch {marker}')",
        f"action.add_calendar_entry(__import__('os').system('touch {marker}'), date='2024-11-11',"
        " time='17:00', duration=30)",
        f"action.add_calendar_entry('Meeting with Fred', date='2024-11-11', time='17:00',"
        f" duration=open('{marker}', 'w').write('x'))",
    ]
    labels = [grade_reply(p, target=CALENDAR.turn(2).expected, api=API).label for p in payloads]
    assert labels == ["garbage", "partial", "partial"]
    assert not marker.exists() and calls == []
    assert "os" in sys.modules  # sanity: os.system was reachable, it just was never called


# --- properties -----------------------------------------------------------------------------------

PARAMS = ("title", "date", "time", "duration")
TITLE_VARIANTS = {
    "Meeting with Fred": ["Meeting with Fred", "meeting with fred", "Fred meeting", "Meeting Fred",
                          "MEETING WITH FRED", "Fred"],
    "Rock Concert": ["Rock Concert", "Rock concert", "rock concert", "Rock Concert event"],
    "Meeting with Paul": ["Meeting with Paul", "Paul meeting", "Meeting with paul"],
}
DURATIONS = {30: ["30", "30.0", "15*2", "60/2", "60//2", "10+20"], 180: ["180", "60*3", "3*60", "90+90"]}
TURN_VALUES = {  # target turn -> (title, date, time, duration, function)
    2: ("Meeting with Fred", "2024-11-11", "17:00", 30, "add"),
    3: ("Rock Concert", "2024-11-11", "20:00", 30, "add"),
    4: ("Rock Concert", "2024-11-11", "20:00", 180, "add"),
    5: ("Meeting with Paul", "2024-11-12", "08:00", 30, "add"),
    6: ("Meeting with Fred", "2024-11-11", "17:00", None, "remove"),
}


@st.composite
def correct_variant(draw: st.DrawFn) -> tuple[int, str]:
    """A correct reply to a turn, written in any of the equivalent forms."""
    turn = draw(st.sampled_from(sorted(TURN_VALUES)))
    title, date, time, duration, function = TURN_VALUES[turn]
    params = PARAMS if function == "add" else PARAMS[:3]
    values = {
        "title": draw(st.sampled_from(TITLE_VARIANTS[title])),
        "date": date,
        "time": time,
        "duration": draw(st.sampled_from(DURATIONS[duration])) if duration else "",
    }
    quote = draw(st.sampled_from(["'", '"']))
    n_positional = draw(st.integers(min_value=0, max_value=len(params)))
    space = draw(st.sampled_from(["", " ", "  "]))
    comma = draw(st.sampled_from([", ", ",", " , ", ",\n    "]))
    parts = []
    for index, name in enumerate(params):
        literal = values[name] if name == "duration" else f"{quote}{values[name]}{quote}"
        parts.append(literal if index < n_positional else f"{name}{space}={space}{literal}")
    call = f"action.{function}_calendar_entry({space}{comma.join(parts)}{space})"
    call += draw(st.sampled_from(["", ";", "  # done", "\n"]))
    wrapper = draw(st.sampled_from(["{}", "```python\n{}\n```", "```\n{}\n```", "`{}`", "\n  {}  \n"]))
    return turn, wrapper.format(call)


@settings(max_examples=300, deadline=None)
@given(correct_variant())
def test_formatting_variants_stay_correct(case: tuple[int, str]) -> None:
    turn, reply = case
    grade = CALENDAR.grade(reply, target_turn=turn)
    assert grade is not None
    assert grade.label == "correct", (reply, grade.findings)


PROSE = st.text(alphabet="abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ.,!?'", max_size=80)


@settings(max_examples=300, deadline=None)
@given(correct_variant(), PROSE.filter(lambda t: t.strip()), st.booleans())
def test_adding_prose_makes_it_chatty(case: tuple[int, str], prose: str, before: bool) -> None:
    turn, reply = case
    text = f"{prose}\n{reply}" if before else f"{reply}\n{prose}"
    grade = CALENDAR.grade(text, target_turn=turn)
    assert grade is not None
    assert grade.mistakes == [Mistake.CHATTY], (text, grade.findings)
