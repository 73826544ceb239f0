"""Open a battle: the pickers' choices, the battle a tab shows (a reload resumes it), starting one with
its first request in one transaction, and forgetting a closed one ("New battle")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

import scenarios
from db import DBError, InvalidInput, NotFound
from db import actions as db_actions
from webapp import context as run
from webapp.context import Context
from webapp.flows import Refused
from webapp.views import ShownBattle, shown_battle

DEFAULT_SCENARIO = "calendar"
FREE_CHAT = "free-chat"
_BATTLE_KEY = "battle_id:{mode}"


@dataclass(frozen=True)
class BattleSetup:
    scenario: str
    system_prompt: str
    contestants: tuple[str, ...] = ()  # chosen by name (named/direct); empty: the pair sampler picks
    names: tuple[str, ...] = ()  # their display names, shown before the battle starts


def scenario_choices() -> dict[str, str]:
    return {s.slug: s.title for s in scenarios.list_scenarios()}


def system_prompt(slug: str) -> str:
    return scenarios.get_scenario(slug).system_prompt


def scripted_turns(slug: str) -> list[str]:
    return [t.user for t in scenarios.get_scenario(slug).turns]


def ready_contestants(ctx: Context) -> list[Any]:
    return run.ready_contestants(ctx)


def load_battle(ctx: Context, *, battle_id: str) -> ShownBattle:
    return shown_battle(db_actions.get_battle(ctx.engine, battle_id=battle_id))


def current_battle(ctx: Context, *, mode: str) -> ShownBattle | None:
    """The battle this tab shows: the one in session state, else the visitor's open one (a reload)."""
    key = _BATTLE_KEY.format(mode=mode)
    battle_id = st.session_state.get(key)
    if battle_id:
        try:
            return load_battle(ctx, battle_id=battle_id)
        except NotFound:
            st.session_state.pop(key, None)
    resumed = db_actions.resume_open_battle(ctx.engine, visitor_id=ctx.visitor_id, mode=mode)
    if resumed is None:
        return None
    st.session_state[key] = resumed.id
    return shown_battle(resumed)


def forget_battle(*, mode: str) -> None:
    """ "New battle": this tab stops showing the closed battle (nothing is deleted)."""
    st.session_state.pop(_BATTLE_KEY.format(mode=mode), None)


def start_battle(
    ctx: Context, *, mode: str, setup: BattleSetup, first_request: str, targets: tuple[str, ...]
) -> ShownBattle:
    """Open a battle with the chosen contestants (or a pair from the sampler) and its first request,
    in one transaction: a refused message leaves no empty battle."""
    try:
        picks = list(setup.contestants) if setup.contestants else run.sample_pair(ctx)
        battle = _open(ctx, mode=mode, setup=setup, picks=picks, first_request=first_request, targets=targets)
    except InvalidInput as exc:
        raise Refused(f"Your message was not recorded: {exc}") from exc
    except (DBError, run.NotEnoughModels) as exc:
        raise Refused(f"Could not start the battle: {exc}") from exc
    st.session_state[_BATTLE_KEY.format(mode=mode)] = battle.id
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
    )
