"""The Arena grades every reply in its dialogue (scenarios.grade_dialogue), as the study counted it: turn
1's call with any year is correct (the year is an assumption until the visitor gives it), and the study's
own correction "The current year is 2024." followed by the fixed call is correct, not partial."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.webapp.conftest import ScriptedEngine, open_app
from tests.webapp.test_arena_app import ARENA, CORRECTION, TURN_1, _battle, _send, _texts, play_the_study

TURN_1_CALL = 'action.add_calendar_entry("Meeting with Fred", date="2023-11-11", time="17:00", duration=30)'
FIXED_CALL = 'action.add_calendar_entry("Meeting with Fred", date="2024-11-11", time="17:00", duration=30)'
STILL_WRONG = 'action.add_calendar_entry("Meeting with Fred", date="2023-11-11", time="17:00", duration=30)'


def test_replies_are_graded_in_their_dialogue(
    arena_env: Callable[..., str], mixed_catalogue: Path, engine_server: ScriptedEngine
) -> None:
    with engine_server.scripted({"gemma": TURN_1_CALL, "plain": TURN_1_CALL}):
        _play(arena_env(mixed_catalogue), engine_server)


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


NO_DURATION = 'action.add_calendar_entry("Meeting with Fred", date="2024-11-11", time="17:00")'


def test_a_badge_says_why_after_the_vote_and_the_words_are_stored(
    arena_env: Callable[..., str], mixed_catalogue: Path, engine_server: ScriptedEngine
) -> None:
    """The newcomer's probe: a near-perfect reply without ``duration`` got 🍄 with nothing saying why."""
    with engine_server.scripted({"gemma": NO_DURATION, "plain": NO_DURATION}):
        url = arena_env(mixed_catalogue)
        at = open_app(ARENA)
        play_the_study(at)
        _send(at, TURN_1)
        battle = _battle(url, at)
        for side in "ab":
            (reply,) = battle.sides[side].replies
            assert reply.grader_label == "partial", reply
            assert reply.grader_notes is not None
            assert "missing duration: the default is 30 minutes" in reply.grader_notes
        shown = " ".join(t.value for t in at.text)
        assert "missing duration" not in shown, "anonymous: the grader's words wait for the vote"
        assert not any(c.startswith("Badges:") for c in _texts(at.caption)), "no legend before any badge"

        at.button(key="anonymous:vote_a").click().run()
        shown = " ".join(t.value for t in at.text)
        assert shown.count("Grader: ") == 2 and "missing duration: the default is 30 minutes" in shown
        legend = [c for c in _texts(at.caption) if c.startswith("Badges:")]
        assert len(legend) == 1 and "🍄 a call with one or two mistakes" in legend[0], legend
