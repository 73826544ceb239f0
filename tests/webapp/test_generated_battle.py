"""A gradable battle plays a generated dialogue: the page hints its next turn with a button that sends it
exactly as written, both sides get the same requests, every reply is graded in that dialogue, a reply to
an off-script request says it is not graded, and the dialogue's id is stored and exported."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from db.export import export_bytes
from db.vote_filters import VoteFilters
from scenarios import get_scenario
from scenarios.generate import Dialogue
from tests.webapp.conftest import ScriptedEngine, open_app
from tests.webapp.test_arena_app import ARENA, _battle, _engine, _send, _texts


def test_a_battle_plays_its_drawn_dialogue_turn_by_turn(
    arena_env: Callable[..., str], mixed_catalogue: Path, engine_server: ScriptedEngine
) -> None:
    url = arena_env(mixed_catalogue)
    at = open_app(ARENA)
    drawn = at.session_state["dialogue:anonymous"]
    dialogue = Dialogue.from_json({**drawn, "system_prompt": ""}, get_scenario("calendar"))
    assert dialogue.id.startswith("calendar-") and dialogue.seed is not None
    first = dialogue.turns[0]
    assert any(first.user in c and "1 of" in c for c in _texts(at.caption)), "the next turn is hinted"

    engine_server.replies.update({"gemma": first.expected, "plain": "I cannot help with calendars."})
    try:
        at.button(key="anonymous:scripted_1").click().run()
        assert not at.exception, [e.value for e in at.exception]
        battle = _battle(url, at)
        assert battle.dialogue is not None and battle.dialogue["id"] == dialogue.id
        for side in "ab":
            assert battle.sides[side].messages[0].content == first.user  # sent exactly as written
        labels = {battle.sides[s].contestant.slug: battle.sides[s].replies[0].grader_label for s in "ab"}
        assert labels == {"gemma-served": "correct", "plain-served": "garbage"}
        assert any("2 of" in c for c in _texts(at.caption)), "the hint moves on to the second turn"

        # A request of the visitor's own is off script: its replies are not graded, and the page says so.
        _send(at, "What's the weather like tomorrow?")
        battle = _battle(url, at)
        assert all(battle.sides[s].replies[-1].grader_label is None for s in "ab")
        assert sum("off script: not graded" in c for c in _texts(at.caption)) == 2
    finally:
        engine_server.replies.clear()

    engine = _engine(url)
    try:
        blob = export_bytes(engine, fmt="jsonl", salt="s",
                            filters=VoteFilters(modes=None, exclude_flagged=False, include_open=True))
        records = [json.loads(line) for line in blob.data.decode().splitlines()]
        assert [r["dialogue_id"] for r in records if r["battle_id"] == battle.id] == [dialogue.id]
    finally:
        engine.dispose()
