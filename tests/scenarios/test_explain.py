"""A grade in words: every finding of every scenario reads as a short sentence a visitor understands, with
the values it quotes; an assumption is said as one; the legend names every badge the app shows."""

from __future__ import annotations

import pytest

from scenarios import get_scenario
from scenarios.dialogue import ReplyGrade
from scenarios.explain import BADGE_MEANINGS, LEGEND, MAX_NOTES, explain, explain_grade, finding_text
from scenarios.generate import generate_dialogues
from scenarios.grader import build_grade
from scenarios.mistakes import Finding, Mistake
from tests.scenarios.dialogues import play
from webapp.render import BADGES

CALENDAR = get_scenario("calendar")


def _words(reply: str, turn: int = 1) -> tuple[str, ...]:
    grade = CALENDAR.grade(reply, target_turn=turn)
    assert grade is not None
    return explain_grade(grade, CALENDAR.api)


def test_a_missing_duration_names_the_default_and_the_year_is_an_assumption() -> None:
    words = _words('action.add_calendar_entry("Meeting with Fred", date="2023-11-11", time="17:00")')
    assert words == ("took 2023 as the year: not said yet, an assumption, not a mistake",
                     "missing duration: the default is 30 minutes")


def test_values_are_quoted_and_each_mistake_is_one_note() -> None:
    words = _words('Sure! action.add_calendar_entry("Lunch", date="2024-11-12", time="5pm", duration=30)')
    assert "prose around the call (just the API call was asked)" in words
    assert 'time written as "5pm", expected a form like 17:00' in words
    assert any(w.startswith(("wrong title: \"Lunch\"", "wrong title: Lunch")) for w in words), words
    assert any(w.startswith("wrong date") and "2024-11-12" in w for w in words), words
    assert _words("I'm not sure what you mean.") == ("no recognisable API call",)
    assert _words('action.add_calendar_entry("Meeting with Fred", date="2024-11-11", time="17:00", '
                  "duration=30)") == ("took 2024 as the year: not said yet, an assumption, not a mistake",)


@pytest.mark.parametrize("slug", ["calendar", "shopping-list", "smart-home"])
def test_every_kind_of_every_scenario_reads_as_words(slug: str) -> None:
    scenario = get_scenario(slug)
    assert scenario.api is not None
    kinds = {str(m) for m in Mistake} | {k for f in scenario.api.functions for p in f.params
                                         for k in p.mistake_kinds}
    for kind in sorted(kinds):
        text = finding_text(Finding(kind, param="x", got="7", expected="8"), scenario.api)
        assert text and "_" not in text.replace("x", ""), (kind, text)  # words, not identifiers


def test_a_right_dialogue_has_no_mistake_words_a_recurrence_is_said_and_long_lists_are_cut() -> None:
    assert CALENDAR.api is not None
    dialogue = generate_dialogues(CALENDAR, count=1, seed=2, false_share=0.0)[0]
    grades = play(CALENDAR, dialogue.turns, [t.expected for t in dialogue.turns])
    assert grades and all(g.label == "correct" for g in grades)
    assert all(all("assumption" in w for w in explain(g, CALENDAR.api)) for g in grades)
    came_back = ReplyGrade(index=0, turn=1, grade=grades[0].grade, recurrence=True)
    assert explain(came_back, CALENDAR.api)[-1] == "a mistake it had already fixed came back"
    times = [Finding(Mistake.WRONG_TIME, param="time", got=f"{h}:00") for h in range(10)]
    many = build_grade(times, call=None)
    notes = explain_grade(many, CALENDAR.api)
    assert len(notes) == MAX_NOTES + 1 and notes[-1] == f"and {10 - MAX_NOTES} more"
    assert notes[0] == "wrong time: 0:00"


def test_the_legend_names_every_badge_the_app_shows() -> None:
    assert set(BADGES.values()) == set(BADGE_MEANINGS)
    assert all(f"{badge} {meaning}" in LEGEND for badge, meaning in BADGE_MEANINGS.items())
