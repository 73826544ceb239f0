"""The correction writer: study-style sentences, hint vs explicit, and the scenario API around it."""

from __future__ import annotations

import sys

import pytest

from scenarios import ScenarioError, get_scenario, list_scenarios
from scenarios.catalog.calendar import API, PHRASES
from scenarios.corrections import write_correction

CALENDAR = get_scenario("calendar")
ADD = "action.add_calendar_entry"


def _correct(reply: str, turn: int, style: str = "hint") -> str | None:
    grade = CALENDAR.grade(reply, target_turn=turn)
    assert grade is not None
    return write_correction(grade, api=API, phrases=PHRASES, style=style, target=CALENDAR.turn(turn).expected)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("turn", "reply", "hint", "explicit"),
    [
        (3, f'{ADD}("Rock Concert", date="2024-11-11", time="08:00", duration=30)', "Wrong time.",
         "Wrong time: 20:00."),
        (3, f'{ADD}("Rock Concert", date="2024-11-11", time="8:00 PM", duration=30)', "Time in 24h format.",
         "Time in 24h format: 20:00."),
        (2, f'Sure, here you go: {ADD}("Meeting with Fred", date="2024-11-11", time="17:00", duration=30)',
         "Just the API call please.", "Just the API call please."),
        (2, f'{ADD}("Meeting with Fred", date="11/11/2024", time="17:00", duration=30)',
         "Respect the date format.", "Respect the date format: 2024-11-11."),
        (6, f'{ADD}("Meeting with Fred", date="2024-11-11", time="17:00", duration=30)',
         "Wrong API call: use remove_calendar_entry.", "Wrong API call: use remove_calendar_entry."),
        (2, f'{ADD}("Meeting with Fred", date="2023-11-11", time="17:00", duration=30)',
         "Fix the year in the API call.", "The current year is 2024."),
        (2, f'{ADD}("Meeting with Fred", date="2024-11-11", time="17:00")', "Duration is required.",
         "Duration is required: 30 minutes."),
        (6, 'action.remove_calendar_entry("Meeting with Fred", "2024-11-11", "17:00", 30)',
         "API requires three params.", "API requires three params."),
        (2, f'{ADD}("Meeting with Fred", date="2024-11-11", time="17:00", duration=30))',
         "Extra parenthesis.", "Extra parenthesis."),
        (5, f'{ADD}("Meeting with Paul", date="2024-11-11", time="08:00", duration=30)', "Wrong date.",
         "Wrong date: 2024-11-12."),
        (6, 'action.remove_calendar_entry("Rock Concert", "2024-11-11", "17:00")',
         "It's the wrong event now.", "It's the wrong event now: \"Meeting with Fred\"."),
        (4, f'{ADD}("Rock Concert", date="2024-11-11", time="20:00", duration=30)', "Wrong duration.",
         "Wrong duration: 180 minutes."),
    ],
)
def test_correction_sentences(turn: int, reply: str, hint: str, explicit: str) -> None:
    assert _correct(reply, turn) == hint
    assert _correct(reply, turn, "explicit") == explicit


def _fix(reply: str, turn: int) -> str | None:
    grade = CALENDAR.grade(reply, target_turn=turn)
    assert grade is not None
    return CALENDAR.correction(grade, target_turn=turn)  # the default style, with the turn's request


@pytest.mark.parametrize(
    ("turn", "reply", "fix"),
    [
        (3, (ROCK := f'{ADD}("Rock Concert", date="2024-11-11", time="20:00"') + ")",
         "Use the default duration."),
        (3, ROCK + ", duration=60)", "Use the default duration."),
        (4, ROCK + ", duration=30)", "The duration is 3 hours."),
        (5, f'{ADD}("Meeting with Paul", date="2024-11-12", time="08:00")', "The duration is 30 minutes."),
        (3, f'{ADD}("Rock Concert", date="2024-11-11", time="8:00 PM", duration=30)', "Time in 24h format."),
        (2, f'{ADD}("Meeting with Fred", date="2023-11-11", time="17:00", duration=30)',
         "Fix the year in the API call."),
        (3, f'{ADD}("Rock Concert", date="2024-11-11", time="08:00", duration=30)', "The time is 20:00."),
        (5, f'{ADD}("Meeting with Paul", date="2024-11-11", time="08:00", duration=30)',
         "The date is November 12."),
        (2, f'{ADD}("Meeting with Fred", date="11/11/2024", time="17:00", duration=30)',
         "Date in YYYY-MM-DD format."),
        (6, FRED := f'{ADD}("Meeting with Fred", date="2024-11-11", time="17:00", duration=30)',
         "Use remove_calendar_entry to cancel."),
        (6, 'action.remove_calendar_entry("Rock Concert", "2024-11-11", "17:00")',
         'The event is "Meeting with Fred".'),
        (2, FRED + ")", "Remove the extra parenthesis."),
        (2, "Sure! " + FRED, "Just the API call please."),
    ],
)
def test_fix_style_names_the_fix(turn: int, reply: str, fix: str) -> None:
    assert _fix(reply, turn) == fix


def test_fix_style_without_the_request_assumes_an_unstated_default() -> None:
    grade = CALENDAR.grade(f'{ADD}("Meeting with Paul", date="2024-11-12", time="08:00")', target_turn=5)
    assert grade is not None
    target = CALENDAR.turn(5).expected
    assert write_correction(grade, api=API, phrases=PHRASES, target=target) == "Use the default duration."
    hint = write_correction(grade, api=API, phrases=PHRASES, style="hint", target=target)
    assert hint == "Duration is required."


def test_correction_names_the_first_mistake_only() -> None:
    reply = f'Sure! {ADD}("Meeting with Fred", date="2024-11-11", time="5:00 AM", duration=30)'
    assert _correct(reply, 2) == "Just the API call please."
    fixed_chat = f'{ADD}("Meeting with Fred", date="2024-11-11", time="5:00 AM", duration=30)'
    assert _correct(fixed_chat, 2) == "Time in 24h format."


def test_no_correction_for_a_correct_reply_and_garbage_gets_one() -> None:
    assert _correct(CALENDAR.turn(4).expected, 4) is None
    assert _correct("Dear Fred, see you soon.", 1) == "Reply with a single line of code calling " \
        "action.add_calendar_entry."
    assert _correct("no", 6, "explicit") == f"Reply with the API call only: {CALENDAR.turn(6).expected}"


def test_bad_style_and_missing_target_are_typed_errors() -> None:
    grade = CALENDAR.grade("nothing", target_turn=2)
    assert grade is not None
    with pytest.raises(ValueError, match="unknown correction style"):
        write_correction(grade, api=API, phrases=PHRASES, style="rude")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs the target"):
        write_correction(grade, api=API, phrases=PHRASES, style="explicit")


def test_scenario_registry_and_free_chat() -> None:
    assert [s.slug for s in list_scenarios()] == ["calendar", "shopping-list", "smart-home", "free-chat"]
    free = get_scenario("free-chat")
    assert free.grade("anything", target_turn=1) is None and not free.gradable
    assert len(CALENDAR.turns) == 6 and "single line of executable code" in CALENDAR.system_prompt
    assert CALENDAR.turns[1].user == "The current year is 2024."
    with pytest.raises(ScenarioError, match="unknown scenario"):
        get_scenario("chess")
    with pytest.raises(ScenarioError, match="out of range"):
        CALENDAR.grade("x", target_turn=7)
    grade = CALENDAR.grade("x", target_turn=1)
    assert grade is not None and CALENDAR.correction(grade, target_turn=1) is not None


def test_grader_imports_nothing_heavy() -> None:
    import subprocess

    code = ("import sys, scenarios, scenarios.grader, scenarios.corrections; "
            "heavy = [m for m in sys.modules if m.split('.')[0] in "
            "('jax', 'keras', 'keras_hub', 'numpy', 'sqlalchemy', 'db', 'inference', 'streamlit')]; "
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
