"""The Arena page end to end in AppTest: real pool (tiny random keras models), real SQLite database."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import create_engine

from db import actions as db_actions
from db import boards as db_boards
from tests.webapp.conftest import open_app

TURN_1 = "Add a meeting with Fred on Nov 11 at 5PM"
CORRECTION = "The current year is 2024."
ARENA = "pages/arena.py"


def _engine(url: str):  # noqa: ANN202 -- a plain SQLAlchemy engine on the test database
    return create_engine(url)


def _send(at, text: str, *, route: str = "Both", correction: bool = False) -> None:  # noqa: ANN001
    if at.radio(key="anonymous:route").value != route:
        at.radio(key="anonymous:route").set_value(route)
    box = at.checkbox(key="anonymous:correction")
    if correction or not box.disabled:
        box.set_value(correction)
    at.chat_input(key="anonymous:input").set_value(text).run()
    assert not at.exception, [e.value for e in at.exception]


def play_the_study(at, mode: str = "anonymous") -> None:  # noqa: ANN001
    """Pin the tab's next battle to the study's own dialogue (a new battle draws a generated one), so the
    study's texts are on script."""
    from scenarios import get_scenario
    from scenarios.generate import stored_form, study_dialogue

    at.session_state[f"dialogue:{mode}"] = stored_form(study_dialogue(get_scenario("calendar")))


def _battle(url: str, at):  # noqa: ANN001, ANN202
    battle_id = at.session_state["battle_id:anonymous"]
    return db_actions.get_battle(_engine(url), battle_id=battle_id)


def _texts(elements) -> list[str]:  # noqa: ANN001
    return [str(e.value) for e in elements]


def test_full_battle_correct_fix_vote_reveal_new(arena_env: Callable[..., str]) -> None:
    url = arena_env()
    at = open_app(ARENA)
    assert at.subheader[0].value == "Model A" and at.subheader[1].value == "Model B"
    assert at.selectbox(key="anonymous:scenario").value == "calendar"
    assert any("vocal assistant" in c for c in _texts(at.code)), "the calendar system prompt is shown"

    play_the_study(at)
    _send(at, TURN_1)
    battle = _battle(url, at)
    assert [m.kind for m in battle.sides["a"].messages] == ["request", "reply"]
    assert [m.kind for m in battle.sides["b"].messages] == ["request", "reply"]
    assert all(m.grader_label is not None for s in "ab" for m in battle.sides[s].replies), "graded"
    # Names stay hidden and grader badges wait for the vote.
    assert at.subheader[0].value == "Model A"
    assert at.selectbox(key="anonymous:scenario").disabled, "the scenario is fixed once the battle started"

    _send(at, CORRECTION, route="Model A", correction=True)
    battle = _battle(url, at)
    assert [m.kind for m in battle.sides["a"].messages] == ["request", "reply", "correction", "reply"]
    assert [m.kind for m in battle.sides["b"].messages] == ["request", "reply"], "B was not corrected"
    (correction,) = battle.sides["a"].corrections
    assert correction.outcome == "unknown" and correction.next_reply_message_id is not None

    at.button(key="anonymous:fixed_a").click().run()
    battle = _battle(url, at)
    assert battle.sides["a"].corrections[0].outcome == "fixed"
    assert battle.sides["a"].corrections[0].judged_by == "person"
    assert "Recorded: fixed ✓" in _texts(at.success)

    at.button(key="anonymous:vote_a").click().run()
    battle = _battle(url, at)
    assert battle.vote is not None and battle.vote.choice == "a" and battle.status == "voted"
    names = {battle.sides[s].contestant.display_name for s in "ab"}
    shown = " ".join(_texts(at.subheader))
    assert all(name in shown for name in names), f"names revealed after the vote: {shown}"
    assert not _has_input(at), "inputs close after the vote"
    assert any(b in " ".join(_texts(at.caption)) for b in ("✓", "🍄", "🔥")), "badges appear after the vote"

    counts = db_boards.pairwise_counts(_engine(url))
    assert counts.total == 1

    at.button(key="anonymous:new").click().run()
    assert "battle_id:anonymous" not in at.session_state
    assert at.selectbox(key="anonymous:scenario").disabled is False
    assert _has_input(at)


def _has_input(at) -> bool:  # noqa: ANN001
    return any(ci.key == "anonymous:input" for ci in at.chat_input)


def test_vote_before_both_replies_is_refused(arena_env: Callable[..., str]) -> None:
    url = arena_env()
    at = open_app(ARENA)
    _send(at, TURN_1, route="Model A")
    vote_a = at.button(key="anonymous:vote_a")
    assert vote_a.disabled, "the vote bar stays disabled until both sides replied"
    assert any("Both models must reply" in c for c in _texts(at.caption))
    battle = _battle(url, at)
    assert battle.vote is None and battle.status == "open"


def test_double_vote_from_a_second_tab_is_refused(arena_env: Callable[..., str]) -> None:
    url = arena_env()
    first = open_app(ARENA)
    visitor = first.session_state["visitor_id"]
    _send(first, TURN_1)
    second = open_app(ARENA, visitor=visitor)  # same visitor, another tab: resumes the open battle
    assert second.session_state["battle_id:anonymous"] == first.session_state["battle_id:anonymous"]
    first.button(key="anonymous:vote_b").click().run()
    second.button(key="anonymous:vote_a").click().run()  # a stale tab still shows the vote bar
    assert "This battle already has a vote." in _texts(second.error)
    battle = _battle(url, first)
    assert battle.vote is not None and battle.vote.choice == "b"


def test_reload_resumes_the_open_battle(arena_env: Callable[..., str]) -> None:
    arena_env()
    first = open_app(ARENA)
    _send(first, TURN_1)
    reloaded = open_app(ARENA, visitor=first.session_state["visitor_id"])
    assert reloaded.session_state["battle_id:anonymous"] == first.session_state["battle_id:anonymous"]
    assert TURN_1 in _texts(reloaded.text)


def test_after_the_vote_a_reload_shows_the_reveal_until_new_battle(arena_env: Callable[..., str]) -> None:
    """The newcomer's probe: after a vote, a reload landed on an empty new battle."""
    arena_env()
    first = open_app(ARENA)
    _send(first, TURN_1)
    first.button(key="anonymous:vote_a").click().run()
    visitor, voted = first.session_state["visitor_id"], first.session_state["battle_id:anonymous"]
    reloaded = open_app(ARENA, visitor=visitor)
    assert reloaded.session_state["battle_id:anonymous"] == voted
    assert reloaded.subheader[0].value.startswith("Model A: "), "the names stay revealed"
    assert TURN_1 in _texts(reloaded.text) and not _has_input(reloaded)
    reloaded.button(key="anonymous:new").click().run()
    again = open_app(ARENA, visitor=visitor)
    assert "battle_id:anonymous" not in again.session_state, "New battle was pressed: a fresh one"
    assert again.subheader[0].value == "Model A" and _has_input(again)


def test_limits_have_clear_messages(arena_env: Callable[..., str]) -> None:
    arena_env(max_message_chars="60", generations_per_minute="3", max_turns_per_battle="2")
    at = open_app(ARENA)
    _send(at, "x" * 61)
    assert any("limit is 60" in e for e in _texts(at.error))
    assert "battle_id:anonymous" not in at.session_state, "nothing was written for a refused message"
    _send(at, TURN_1)  # 2 messages (one per side)
    _send(at, "again", route="Model A")  # 3rd message
    _send(at, "too many", route="Model B")
    assert any("Slow down" in e for e in _texts(at.error))


def test_turn_limit(arena_env: Callable[..., str]) -> None:
    arena_env(max_turns_per_battle="1")
    at = open_app(ARENA)
    _send(at, TURN_1)
    _send(at, "second turn")
    assert any("limit of 1 turns" in e for e in _texts(at.error))


def test_battles_per_hour(arena_env: Callable[..., str]) -> None:
    arena_env(battles_per_visitor_per_hour="1")
    at = open_app(ARENA)
    _send(at, TURN_1)
    at.button(key="anonymous:vote_tie").click().run()
    at.button(key="anonymous:new").click().run()
    _send(at, TURN_1)
    assert any("battles in the last hour" in e for e in _texts(at.error))
