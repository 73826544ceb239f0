"""Grading that follows the dialogue, on the simulated calendar: the study's dialogue and labelled ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scenarios import get_scenario, state
from scenarios.catalog.calendar import API, overlaps
from scenarios.dialogue import DialogueMessage, answered_turn, grade_dialogue, match_turn
from scenarios.fields import DateValue

CALENDAR = get_scenario("calendar")
LABELED = Path(__file__).resolve().parents[1] / "data" / "labeled_dialogues.json"
DIALOGUES = json.loads(LABELED.read_text(encoding="utf-8"))["dialogues"]
ADD = "action.add_calendar_entry"
FRED_2024 = f'{ADD}("Meeting with Fred", date="2024-11-11", time="17:00", duration=30)'


def user(text: str, kind: str = "request") -> DialogueMessage:
    return DialogueMessage.from_mapping({"role": "user", "kind": kind, "content": text})


def Entry(title: str, date: DateValue, time: tuple[int, int], duration: float) -> state.Record:
    return state.Record("entries", (("title", title), ("date", date), ("time", time), ("duration", duration)))


def apply_reply(calendar: state.State, text: str) -> state.State:
    return state.apply_reply(API, calendar, text)


def overlap_count(calendar: state.State) -> int:
    return overlaps(API, calendar)


def states_match(actual: state.State, expected: state.State) -> bool:
    return state.states_match(API, actual, expected)


def reply(text: str) -> DialogueMessage:
    return DialogueMessage(role="assistant", kind="reply", content=text)


@pytest.mark.parametrize("dialogue", DIALOGUES, ids=[d["name"] for d in DIALOGUES])
def test_labelled_dialogue(dialogue: dict) -> None:
    messages = [DialogueMessage.from_mapping(item) for item in dialogue["messages"]]
    got = [g.as_json() for g in grade_dialogue(CALENDAR, messages)]
    assert got == dialogue["expected"]


def test_labelled_dialogues_cover_the_new_verdicts() -> None:
    lines = [line for d in DIALOGUES for line in d["expected"]]
    assert any(line["regression"] for line in lines) and any(line["recurrence"] for line in lines)
    assert {line["fixed"] for line in lines} == {True, False, None}
    assert {"double_booking", "regression"} <= {m for line in lines for m in line["mistakes"]}


@pytest.mark.parametrize("year", ["2023", "2024", "2025", "1999"])
def test_a_perfect_turn_one_is_correct_whatever_the_year(year: str) -> None:
    call = FRED_2024.replace("2024", year)
    (graded,) = grade_dialogue(CALENDAR, [user(CALENDAR.turn(1).user), reply(call)])
    assert (graded.turn, graded.label, graded.assumed) == (1, "correct", ("year",))
    assert graded.fixed is None and graded.state_matches is True


def test_the_study_correction_then_a_correct_reply_is_fixed() -> None:
    first = FRED_2024.replace("2024", "2023")
    for kind in ("correction", "request"):
        graded = grade_dialogue(CALENDAR, [user(CALENDAR.turn(1).user), reply(first),
                                           user("The current year is 2024.", kind), reply(FRED_2024)])
        assert graded[1].as_json() == {"turn": 2, "label": "correct", "mistakes": [], "assumed": [],
                                       "fixed": True, "regression": False, "recurrence": False,
                                       "maintained": None}
        # The corrected reply was retracted: one Fred meeting, in 2024, as expected.
        assert graded[1].state_matches is True


def test_a_fix_that_breaks_fred_is_a_regression() -> None:
    messages = [user(CALENDAR.turn(1).user), reply(FRED_2024), user(CALENDAR.turn(2).user, "correction"),
                reply(FRED_2024), user(CALENDAR.turn(3).user),
                reply(f'{ADD}("Rock Concert", date="2024-11-11", time="8pm", duration=30)'),
                user("Time in 24h format.", "correction"),
                reply(f'{ADD}("Meeting with Fred", "2024-11-11", "17:00", 240)')]  # Fred lengthened
    graded = grade_dialogue(CALENDAR, messages)[-1]
    assert graded.regression and graded.fixed is False and "regression" in graded.as_json()["mistakes"]
    # The same fix without touching Fred: no regression, fixed.
    messages[-1] = reply(f'{ADD}("Rock Concert", "2024-11-11", "20:00", 30)')
    graded = grade_dialogue(CALENDAR, messages)[-1]
    assert (graded.regression, graded.fixed, graded.label) == (False, True, "correct")


def test_answered_turn_follows_requests_and_corrections() -> None:
    t1, t2, t3 = (CALENDAR.turn(n).user for n in (1, 2, 3))
    assert answered_turn(CALENDAR, [user(t1)]) == 1
    assert answered_turn(CALENDAR, [user(t1), reply("x"), user("Wrong time.", "correction")]) == 1
    assert answered_turn(CALENDAR, [user(t1), reply("x"), user(t2, "correction")]) == 2
    assert answered_turn(CALENDAR, [user(t1), reply("x"), user("  the current YEAR is 2024 ")]) == 2
    assert answered_turn(CALENDAR, [user(t3.replace("8pm", "8 pm"))]) == 3  # near-verbatim
    assert answered_turn(CALENDAR, [user("What's the weather like?")]) is None
    assert answered_turn(get_scenario("free-chat"), [user(t1)]) is None
    assert match_turn(CALENDAR, "") is None


def test_stored_message_views_are_accepted_and_system_messages_skipped() -> None:
    from types import SimpleNamespace

    views = [SimpleNamespace(role="system", kind="request", content=CALENDAR.system_prompt),
             SimpleNamespace(role="user", kind="request", content=CALENDAR.turn(1).user),
             SimpleNamespace(role="assistant", kind="reply", content=FRED_2024)]
    (graded,) = grade_dialogue(CALENDAR, views)
    assert (graded.turn, graded.label) == (1, "correct")
    assert answered_turn(CALENDAR, views[:2]) == 1


def test_the_grader_refuses_a_message_that_is_not_a_dialogue_s() -> None:
    from types import SimpleNamespace

    with pytest.raises(ValueError, match="kind"):
        grade_dialogue(CALENDAR, [SimpleNamespace(role="user", kind="question", content="x")])
    with pytest.raises(ValueError, match="assistant"):
        answered_turn(CALENDAR, [SimpleNamespace(role="user", kind="reply", content="x")])


def test_messages_are_validated() -> None:
    with pytest.raises(ValueError, match="kind"):
        DialogueMessage.from_mapping({"role": "user", "kind": "question", "content": "x"})
    with pytest.raises(ValueError, match="assistant"):
        DialogueMessage.from_mapping({"role": "user", "kind": "reply", "content": "x"})
    with pytest.raises(ValueError, match="string"):
        DialogueMessage.from_mapping({"role": "user", "kind": "request", "content": 3})


# --- the simulated calendar ------------------------------------------------------------------------


def test_calls_bind_positionally_or_by_keyword_and_arithmetic_is_read() -> None:
    keyword = apply_reply((), f'{ADD}(title="Rock Concert", duration=60*3, time="20:00", date="2024-11-11")')
    positional = apply_reply((), f'{ADD}("Rock Concert", "2024-11-11", "20:00", 180)')
    assert keyword == positional == (Entry("Rock Concert", DateValue(2024, 11, 11), (20, 0), 180.0),)


def test_add_updates_the_same_slot_remove_needs_an_exact_slot() -> None:
    calendar = apply_reply((), FRED_2024)
    assert apply_reply(calendar, FRED_2024.replace("30)", "45)"))[0].get("duration") == 45.0
    assert apply_reply(calendar, 'action.remove_calendar_entry("Fred", "2024-11-11", "18:00")') == calendar
    assert apply_reply(calendar, 'action.remove_calendar_entry("fred meeting", "2024-11-11", "17:00")') == ()
    assert apply_reply(calendar, "I can't do that.") == calendar
    assert apply_reply(calendar, f'{ADD}("Fred", date="tomorrow", time="17:00")') == calendar  # unreadable


def test_overlaps_and_state_comparison() -> None:
    calendar = apply_reply((), FRED_2024 + "\n" + f'{ADD}("Call", "2024-11-11", "17:29", 10)')
    assert overlap_count(calendar) == 1
    assert overlap_count(apply_reply((), FRED_2024 + "\n" + f'{ADD}("Call", "2024-11-11", "17:30", 10)')) == 0
    expected = (Entry("Meeting with Fred", DateValue(None, 11, 11), (17, 0), 30.0),)  # any year
    assert states_match(apply_reply((), FRED_2024.replace("2024", "2031")), expected)
    assert not states_match(calendar, expected)
