"""The Arena grades every reply in its dialogue (scenarios.grade_dialogue), as the study counted it: turn
1's call with any year is correct (the year is an assumption until the visitor gives it), and the study's
own correction "The current year is 2024." followed by the fixed call is correct, not partial."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.webapp.conftest import ScriptedEngine, open_app
from tests.webapp.test_arena_app import ARENA, CORRECTION, TURN_1, _battle, _send, play_the_study

TURN_1_CALL = 'action.add_calendar_entry("Meeting with Fred", date="2023-11-11", time="17:00", duration=30)'
FIXED_CALL = 'action.add_calendar_entry("Meeting with Fred", date="2024-11-11", time="17:00", duration=30)'
STILL_WRONG = 'action.add_calendar_entry("Meeting with Fred", date="2023-11-11", time="17:00", duration=30)'


def test_replies_are_graded_in_their_dialogue(
    arena_env: Callable[..., str], mixed_catalogue: Path, engine_server: ScriptedEngine
) -> None:
    engine_server.replies.update({"gemma": TURN_1_CALL, "plain": TURN_1_CALL})
    try:
        _play(arena_env(mixed_catalogue), engine_server)
    finally:
        engine_server.replies.clear()


def _play(url: str, engine_server: ScriptedEngine) -> None:
    at = open_app(ARENA)
    play_the_study(at)
    _send(at, TURN_1)
    battle = _battle(url, at)
    for side in "ab":
        (first,) = battle.sides[side].replies
        assert first.grader_label == "correct", first  # the year was not given yet: an assumption

    engine_server.replies.update({"gemma": FIXED_CALL, "plain": STILL_WRONG})
    _send(at, CORRECTION, route="Both", correction=True)
    battle = _battle(url, at)
    by_model = {battle.sides[s].contestant.slug: battle.sides[s].replies[-1] for s in "ab"}
    assert by_model["gemma-served"].grader_label == "correct"  # took the correction
    assert by_model["plain-served"].grader_label != "correct"  # ignored it: wrong year now
    assert "wrong_year" in (by_model["plain-served"].grader_mistakes or ())
