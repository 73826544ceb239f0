"""``python -m scenarios bench --replay-model M``: replay's speed on a real model, in items per minute.

A throw-away SQLite database gets ``items`` voted battles, each a generated calendar dialogue whose first
reply is prose with no call, corrected by a person ("You did not write the API call. Please write it.");
then ``python -m scenarios replay`` asks ``model`` (a catalogue slug, loaded by the real pool from the
data directory's converted weights) for the reply after each correction, ``concurrency`` in flight, and
grades each in context. The figure is the command's own ``items_per_minute`` (loading excluded). The
command line (``commands/scenarios.py``) seeds with :func:`seed_battles`, runs the replay command and
prints :func:`replay_figures`.
"""

from __future__ import annotations

from typing import Any

PROSE = "Sure, I have added that to your calendar."
CORRECTION = "You did not write the API call. Please write it."


def seed_battles(url: str, *, items: int, seed: int = 11) -> None:
    """``items`` voted battles between two placeholder contestants, each with one correction."""
    from db import actions, make_engine, upgrade_to_head
    from scenarios import get_scenario
    from scenarios.generate import generate_dialogues, stored_form

    upgrade_to_head(url)
    engine = make_engine(url)
    calendar = get_scenario("calendar")
    for slug in ("bench-a", "bench-b"):
        actions.upsert_contestant(engine, slug=slug, display_name=slug, family="bench")
    for dialogue in generate_dialogues(calendar, count=items, seed=seed):
        battle = actions.open_battle(engine, mode="anonymous", scenario="calendar", contestant_a="bench-a",
                                     contestant_b="bench-b", system_prompt=dialogue.system_prompt,
                                     dialogue=stored_form(dialogue), first_request=dialogue.turns[0].user)
        for side in ("a", "b"):
            actions.append_message(engine, battle_id=battle.id, side=side, kind="reply", content=PROSE,
                                   grader_label="garbage", grader_mistakes=[])
        actions.record_correction(engine, battle_id=battle.id, side="a", content=CORRECTION)
        actions.append_message(engine, battle_id=battle.id, side="a", kind="reply", content=PROSE)
        actions.record_vote(engine, battle_id=battle.id, choice="b")
    engine.dispose()


def replay_figures(line: dict[str, Any], *, items: int, concurrency: int) -> dict[str, Any]:
    """The bench's figures from ``replay --json``'s line for the model."""
    return {"model": line["model"], "items": items, "concurrency": concurrency,
            "items_per_minute": line["items_per_minute"], "asked": line["asked"], "errors": line["errors"],
            "fix_rate": line["fix_rate"]}
