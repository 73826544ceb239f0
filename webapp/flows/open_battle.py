"""Open a battle: the pickers' choices, the battle a tab shows (a reload resumes it), the generated
dialogue the next battle plays, starting one with its first request in one transaction, and forgetting a
closed one ("New battle")."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import streamlit as st

import scenarios
from db import DBError, InvalidInput, NotFound
from db import actions as db_actions
from scenarios.generate import battle_script, draw_dialogue, next_turn, stored_form
from webapp import context as run
from webapp import metrics
from webapp.context import Context
from webapp.flows import Feedback, Refused
from webapp.views import ShownBattle, shown_battle

DEFAULT_SCENARIO = "calendar"
FREE_CHAT = "free-chat"
_BATTLE_KEY = "battle_id:{mode}"
_DIALOGUE_KEY = "dialogue:{mode}"


@dataclass(frozen=True)
class BattleSetup:
    scenario: str
    system_prompt: str
    contestants: tuple[str, ...] = ()  # chosen by name (named/direct); empty: the pair sampler picks
    names: tuple[str, ...] = ()  # their display names, shown before the battle starts
    dialogue: dict[str, Any] | None = None  # the generated dialogue played (gradable scenarios)


def scenario_choices() -> dict[str, str]:
    return {s.slug: s.title for s in scenarios.list_scenarios()}


def is_gradable(slug: str) -> bool:
    return scenarios.get_scenario(slug).gradable


def system_prompt(slug: str) -> str:
    return scenarios.get_scenario(slug).system_prompt


def next_dialogue(*, mode: str, slug: str) -> dict[str, Any] | None:
    """The generated dialogue the tab's next battle in ``slug`` plays, drawn once (a fresh seed) and kept
    until that battle starts or the scenario changes; None for free chat."""
    key = _DIALOGUE_KEY.format(mode=mode)
    kept = st.session_state.get(key)
    if kept is not None and kept.get("scenario") == slug:
        return dict(kept)
    drawn = draw_dialogue(scenarios.get_scenario(slug), seed=secrets.randbelow(2**31))
    stored = stored_form(drawn) if drawn is not None else None
    st.session_state[key] = stored
    return stored


def battle_turns(slug: str, dialogue: dict[str, Any] | None) -> tuple[scenarios.Turn, ...]:
    """The turns a battle (or the next one) plays: its dialogue's, else the reference dialogue's."""
    return battle_script(scenarios.get_scenario(slug), dialogue)


def next_scripted(slug: str, dialogue: dict[str, Any] | None,
                  battle: ShownBattle | None) -> tuple[int, int, scenarios.Turn] | None:
    """(number, of how many, turn) of the next turn to send, or None when the dialogue is done."""
    script = battle_turns(slug, dialogue)
    sent = [] if battle is None else [m.content for m in battle.sides["a"].messages if m.role == "user"]
    found = next_turn(script, sent)
    return None if found is None else (found[0], len(script), found[1])




def load_battle(ctx: Context, *, battle_id: str) -> ShownBattle:
    return shown_battle(db_actions.get_battle(ctx.engine, battle_id=battle_id))


def current_battle(ctx: Context, *, mode: str) -> ShownBattle | None:
    """The battle this tab shows: the one in session state, else (a reload) the visitor's open one or
    the one it just voted on, until *New battle* (:func:`dismiss`)."""
    key = _BATTLE_KEY.format(mode=mode)
    battle_id = st.session_state.get(key)
    if battle_id:
        try:
            return load_battle(ctx, battle_id=battle_id)
        except NotFound:
            st.session_state.pop(key, None)
    resumed = db_actions.resume_battle(ctx.engine, visitor_id=ctx.visitor_id, mode=mode)
    if resumed is None:
        return None
    st.session_state[key] = resumed.id
    return shown_battle(resumed)


def dismiss(ctx: Context, *, mode: str, battle_id: str) -> Feedback | None:
    """*New battle* after the vote: written, so a reload shows the next battle, not this one's reveal."""
    try:
        db_actions.dismiss_battle(ctx.engine, battle_id=battle_id, visitor_id=ctx.visitor_id)
    except DBError as exc:
        return Feedback("error", f"Could not start a new battle: {exc}")
    forget_battle(mode=mode)
    return None


def forget_battle(*, mode: str) -> None:
    """ "New battle": this tab stops showing the closed battle (nothing is deleted); the next one draws
    a new dialogue."""
    st.session_state.pop(_BATTLE_KEY.format(mode=mode), None)
    st.session_state.pop(_DIALOGUE_KEY.format(mode=mode), None)


def start_battle(
    ctx: Context, *, mode: str, setup: BattleSetup, first_request: str, targets: tuple[str, ...]
) -> ShownBattle:
    """Open a battle with the chosen contestants (or a pair from the sampler) and its first request,
    in one transaction: a refused message leaves no empty battle."""
    try:
        picks = list(setup.contestants) if setup.contestants else run.sample_pair(ctx, setup.scenario)
        battle = _open(ctx, mode=mode, setup=setup, picks=picks, first_request=first_request, targets=targets)
    except InvalidInput as exc:
        raise Refused(f"Your message was not recorded: {exc}") from exc
    except (DBError, run.NotEnoughModels) as exc:
        raise Refused(f"Could not start the battle: {exc}") from exc
    metrics.BATTLES.labels(mode).inc()
    st.session_state[_BATTLE_KEY.format(mode=mode)] = battle.id
    st.session_state.pop(_DIALOGUE_KEY.format(mode=mode), None)  # played: the next battle draws another
    return shown_battle(battle)


def _open(
    ctx: Context,
    *,
    mode: str,
    setup: BattleSetup,
    picks: list[str],
    first_request: str,
    targets: tuple[str, ...],
) -> Any:
    params = {slug: run.sampling(ctx, slug) for slug in picks}
    return db_actions.open_battle(
        ctx.engine,
        mode=mode,
        scenario=setup.scenario,
        contestant_a=picks[0],
        contestant_b=picks[1] if len(picks) > 1 else None,
        visitor_id=ctx.visitor_id,
        system_prompt=setup.system_prompt,
        params_a=params[picks[0]],
        params_b=params[picks[1]] if len(picks) > 1 else None,
        first_request=first_request,
        first_request_sides=targets,
        max_chars=ctx.settings.max_message_chars,
        dialogue=setup.dialogue,
    )
