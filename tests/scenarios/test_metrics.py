"""Fixing-board counts from automatic runs (scripted models: the counts follow from the script)."""

from __future__ import annotations

from scenarios.metrics import run_totals
from scenarios.premade import load_premade
from scenarios.runner import RunnerConfig, run_arena
from tests.scenarios.scripted import CALENDAR, ScriptedModel, always_chatty, guesses_durations, perfect


def test_totals_of_a_perfect_and_a_chatty_model() -> None:
    records = run_arena(scenario=CALENDAR, models=[ScriptedModel("perfect", perfect),
                                                   ScriptedModel("chatty", always_chatty)],
                        config=RunnerConfig(repeats=5, max_fix_attempts=1), cases=load_premade())
    perfect_totals, chatty_totals = run_totals(records)
    assert perfect_totals.model == "perfect"
    # 5 reliability attempts + the dialogue's first reply, all correct (turn 1's year is assumed).
    assert (perfect_totals.first_correct, perfect_totals.first_attempts) == (6, 6)
    assert perfect_totals.tasks == [(5, 5)]
    # Turn 2's scripted correction and 9 pre-made ones, all fixed.
    assert (perfect_totals.fixed, perfect_totals.judged) == (10, 10)
    assert perfect_totals.chatty == 0 and perfect_totals.regressions == 0
    assert chatty_totals.first_correct == 0 and chatty_totals.tasks == [(0, 5)]
    # Dialogue: 1 automatic correction per turn (6) + turn 2's scripted one; fixing: 9. None fixed.
    assert (chatty_totals.fixed, chatty_totals.judged) == (0, 16)
    assert chatty_totals.chatty == chatty_totals.graded == 5 + (5 + 7) + 9  # first tries + after fixes
    # Chatty throughout: never cleared, so never a recurrence.
    assert chatty_totals.recurrences == 0
    assert len(chatty_totals.links) == 16 and len({link[0] for link in chatty_totals.links}) == 16


def test_totals_per_style() -> None:
    model = ScriptedModel("qwen-like", guesses_durations)
    records = run_arena(scenario=CALENDAR, models=[model], protocols=("reliability", "dialogue"),
                        config=RunnerConfig(repeats=2, correction_styles=("fix", "hint")))
    by_style = {t.style: t for t in run_totals(records, by_style=True)}
    assert set(by_style) == {"fix", "hint"}
    # Turn 2's year correction is fixed in both; turn 3's duration only with the named fix.
    assert (by_style["fix"].fixed, by_style["fix"].judged) == (2, 2)
    assert (by_style["hint"].fixed, by_style["hint"].judged) == (1, 3)
