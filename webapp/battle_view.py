"""The battle screen shared by Arena (anonymous), Side by side (named) and Chat (single model).

Layout, top to bottom: scenario and model pickers (locked once the battle has started), the system
prompt, one column per side with its messages, the per-side Retry and Fixed/Not-fixed buttons, the vote
bar, then the composer (route to A / B / both, "this is a correction", the chat input). Buttons only
record intent in ``st.session_state`` via callbacks that write to the database; generation runs in the
script body so both sides can stream into their columns at once.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from scenarios import Turn
from webapp import context as run
from webapp import pool_view, render, replies
from webapp.context import Context
from webapp.flows import Feedback, Refused, judge, open_battle, send_turn, skip, vote
from webapp.flows.open_battle import BattleSetup
from webapp.views import ShownBattle, ShownSide, awaiting_verdict, last_reply, vote_problem

VOTE_BUTTONS = (
    ("a", "👈 A is better"),
    ("b", "👉 B is better"),
    ("tie", "🤝 Tie"),
    ("both_bad", "👎 Both bad"),
)
_FLASH = "flash"


def _key(mode: str, name: str) -> str:
    return f"{mode}:{name}"


def _flash(feedback: Feedback) -> None:
    st.session_state.setdefault(_FLASH, []).append(feedback)


def _show_flashes() -> None:
    for item in st.session_state.pop(_FLASH, []):
        getattr(st, item.kind)(item.text)


def show(mode: str) -> None:
    """Render the battle page for ``mode`` ("anonymous", "named" or "direct")."""
    ctx = run.context()
    needed = 1 if mode == "direct" else 2
    if not pool_view.show_pool_progress(ctx, needed=needed, pairable=mode == "anonymous"):
        return
    battle = open_battle.current_battle(ctx, mode=mode)
    setup = _pickers(ctx, mode=mode, battle=battle)
    if setup is None:
        return
    _show_flashes()
    sides = ("a",) if mode == "direct" else ("a", "b")
    placeholders = _columns(ctx, mode=mode, battle=battle, sides=sides, setup=setup)
    if battle is not None and mode != "direct":
        _vote_bar(ctx, battle=battle)
    if battle is not None and not battle.is_open:
        label = "New chat" if mode == "direct" else "New battle"
        st.button(label, key=_key(mode, "new"), type="primary", on_click=_new_battle, args=(mode, battle.id))
        return
    if battle is not None:
        # No dead ends: a chat can always start over, a battle can be left without a vote.
        label = "New chat" if mode == "direct" else "Skip this battle"
        st.button(label, key=_key(mode, "skip"), on_click=_skip, args=(mode, battle.id))
    _composer(ctx, mode=mode, battle=battle, sides=sides, setup=setup, placeholders=placeholders)
    if battle is not None:
        _follow_running(battle, placeholders)


def _follow_running(battle: ShownBattle, placeholders: dict[str, Any]) -> None:
    """Replies of this battle still being generated (the page was reloaded or rerun mid-stream): show
    them as they stream, then the page again with them stored."""
    running = replies.DESK.running(battle.id)
    if not running:
        return
    slots = {side: _reply_slot(placeholders[side]) for side in running}
    for item in send_turn.follow_replies(running, slots):
        _flash(item)
    st.rerun()


def _pickers(ctx: Context, *, mode: str, battle: ShownBattle | None) -> BattleSetup | None:
    """Scenario (and, outside the anonymous arena, model) choice; fixed once the battle exists."""
    scenarios = open_battle.scenario_choices()
    locked = battle is not None
    current = battle.scenario if battle else open_battle.DEFAULT_SCENARIO
    slugs = list(scenarios)
    scenario = st.selectbox(
        "Scenario",
        slugs,
        index=slugs.index(current) if current in slugs else 0,
        format_func=lambda s: scenarios[s],
        key=_key(mode, "scenario"),
        disabled=locked,
    )
    system_prompt = battle.sides["a"].system_prompt if battle else open_battle.system_prompt(scenario)
    if system_prompt:
        with st.expander("System prompt the models receive", expanded=False):
            st.code(system_prompt, language=None, wrap_lines=True)
    chosen: tuple[str, ...] = ()
    if mode in ("named", "direct"):
        choices = run.model_choices(ctx, scenario)  # best first: the defaults can play the scenario
        names = {c.slug: c.name for c in choices}
        labels = {c.slug: c.label for c in choices}  # a base model says so
        count = 1 if mode == "direct" else 2
        if len(names) < count:
            st.warning("Not enough models are ready yet.")
            return None
        cols = st.columns(count)
        picked = []
        for i, col in enumerate(cols):
            preset = battle.sides["ab"[i]].contestant if battle else list(names)[i]
            options = list(names) if preset in names else [preset, *names]
            picked.append(
                col.selectbox(
                    f"Model {'AB'[i]}" if count == 2 else "Model",
                    options,
                    index=options.index(preset),
                    format_func=lambda s: labels.get(s, s),
                    key=_key(mode, f"model_{i}"),
                    disabled=locked,
                )
            )
        chosen = tuple(picked)
    dialogue = battle.dialogue if battle is not None else open_battle.next_dialogue(mode=mode, slug=scenario)
    return BattleSetup(
        scenario=scenario,
        system_prompt=system_prompt,
        contestants=chosen,
        names=tuple(names.get(s, s) for s in chosen) if chosen else (),
        dialogue=dialogue,
    )


def _title(mode: str, battle: ShownBattle | None, side: str, view: ShownSide | None, planned: str) -> str:
    """The column title: 'Model A' while anonymous; the model's name in named modes and after the vote."""
    named = mode != "anonymous" or (battle is not None and not battle.is_open)
    name = view.display_name if view is not None else planned
    if named and name:
        return name if mode == "direct" else f"Model {side.upper()}: {name}"
    return f"Model {side.upper()}"


def _columns(
    ctx: Context,
    *,
    mode: str,
    battle: ShownBattle | None,
    sides: tuple[str, ...],
    setup: BattleSetup,
) -> dict[str, Any]:
    placeholders: dict[str, Any] = {}
    show_badges = battle is not None and (not battle.is_open or mode != "anonymous"
                                          or ctx.settings.show_grader_live)
    if show_badges and battle is not None and _any_badge(battle):
        st.caption(f"Badges: {render.LEGEND}")
    for side, col in zip(sides, st.columns(len(sides)), strict=True):
        view = battle.sides.get(side) if battle else None
        with col:
            planned = setup.names["ab".index(side)] if len(setup.names) > "ab".index(side) else ""
            st.subheader(_title(mode, battle, side, view, planned))
            if view is not None and battle is not None:
                outcomes = {c.reply_id: c.outcome for c in battle.corrections if c.reply_id is not None}
                _messages(view, show_badges=show_badges, outcomes=outcomes,
                          graded=open_battle.is_gradable(battle.scenario))
            placeholders[side] = st.empty()
            if battle is not None and view is not None and battle.is_open:
                _side_buttons(ctx, mode=mode, battle=battle, side=side)
    return placeholders


OUTCOME_TEXT = {"fixed": "fixed ✓", "not_fixed": "not fixed ✗"}


def _any_badge(battle: ShownBattle) -> bool:
    """Whether some reply of the battle carries a grader badge (the legend goes beside the first)."""
    return any(m.grader_label for view in battle.sides.values() for m in view.messages)


OFF_SCRIPT = "off script: not graded"


def _messages(view: ShownSide, *, show_badges: bool, outcomes: dict[int, str], graded: bool) -> None:
    for message in view.messages:
        if message.role == "user":
            st.caption(render.turn_caption(role="user", kind=message.kind))
            render.visitor_text(st, message.content)
            continue
        failed = bool(message.error or message.finish_reason == "error")
        if graded and message.grader_label is None and not failed:
            badge = OFF_SCRIPT  # says nothing about the model: shown before the vote too
        else:
            badge = render.badge(message.grader_label) if show_badges else ""
        verdict = OUTCOME_TEXT.get(outcomes.get(message.id, ""), "")
        badge = f"{badge} · {verdict}" if verdict and badge else verdict or badge
        st.caption(render.turn_caption(role="assistant", kind="reply", badge_text=badge))
        if message.error or message.finish_reason == "error":
            render.show_error(st, message.error or "unknown error")
        else:
            render.reply(st, message.content)
        if show_badges and message.grader_notes:
            render.grader_notes(st, message.grader_notes)


def _side_buttons(ctx: Context, *, mode: str, battle: ShownBattle, side: str) -> None:
    pending = awaiting_verdict(battle, side)
    if pending is not None:
        st.caption(f"Did Model {side.upper()} fix its mistake?")
        left, right = st.columns(2)
        left.button("Fixed ✓", key=_key(mode, f"fixed_{side}"), on_click=_judge, args=(pending.id, True))
        right.button(
            "Not fixed ✗", key=_key(mode, f"notfixed_{side}"), on_click=_judge, args=(pending.id, False)
        )
    messages = battle.sides[side].messages
    if last_reply(battle.sides[side]) is not None or (messages and messages[-1].role == "user"):
        # Also offered when a turn has no reply (generation interrupted by a reload).
        st.button("🔄 Retry", key=_key(mode, f"retry_{side}"), on_click=_ask_retry, args=(mode, side))


def _judge(correction_id: int, fixed: bool) -> None:
    _flash(judge.judge(run.context(), correction_id=correction_id, fixed=fixed))


def _ask_retry(mode: str, side: str) -> None:
    st.session_state[_key(mode, "retry")] = side


def _vote_bar(ctx: Context, *, battle: ShownBattle) -> None:
    question = (
        "Which is better?"
        if battle.scenario == open_battle.FREE_CHAT
        else ("Which model fixed its mistakes better?")
    )
    st.markdown(f"**{question}**")
    if battle.vote is not None:
        st.info(f"Your vote: {vote.choice_label(battle.vote)}")
        return
    problem = vote_problem(battle)
    capped = None if problem else vote.cap_problem(ctx)
    for (choice, label), col in zip(VOTE_BUTTONS, st.columns(len(VOTE_BUTTONS)), strict=True):
        col.button(
            label,
            key=_key(battle.mode, f"vote_{choice}"),
            disabled=problem is not None or capped is not None,
            on_click=_vote,
            args=(battle.id, choice),
            width="stretch",
        )
    if problem:
        st.caption(problem)
    if capped:
        st.warning(capped, icon="🗳️")


def _vote(battle_id: str, choice: str) -> None:
    _flash(vote.vote(run.context(), battle_id=battle_id, choice=choice))


def _skip(mode: str, battle_id: str) -> None:
    _flash(skip.skip(run.context(), mode=mode, battle_id=battle_id))


def _new_battle(mode: str, battle_id: str) -> None:
    problem = open_battle.dismiss(run.context(), mode=mode, battle_id=battle_id)
    if problem is not None:
        _flash(problem)


def _composer(
    ctx: Context,
    *,
    mode: str,
    battle: ShownBattle | None,
    sides: tuple[str, ...],
    setup: BattleSetup,
    placeholders: dict[str, Any],
) -> None:
    retry_side = st.session_state.pop(_key(mode, "retry"), None)
    if battle is not None and retry_side in sides:
        refused = send_turn.retry_problem(ctx, battle=battle, side=retry_side)
        if refused is None:
            _run(ctx, battle=battle, targets=(retry_side,), placeholders=placeholders, retry=True)
            return
        st.error(refused)
    targets: tuple[str, ...] = sides
    if len(sides) == 2:
        route = st.radio("Send to", ["Both", "Model A", "Model B"], horizontal=True, key=_key(mode, "route"))
        targets = {"Both": ("a", "b"), "Model A": ("a",), "Model B": ("b",)}[route]
    if st.session_state.pop(_key(mode, "reset_correction"), False):
        st.session_state[_key(mode, "correction")] = False  # one correction per tick, never sticky
    correction = st.checkbox(
        "This message corrects the last reply", key=_key(mode, "correction"), disabled=battle is None
    )
    busy = sorted(replies.DESK.running(battle.id)) if battle is not None else []
    if busy:  # one turn at a time: the next message waits for this one's replies
        who = " and ".join(f"Model {side.upper()}" for side in busy) if len(sides) > 1 else "The model"
        st.info(f"{who} {'are' if len(busy) > 1 else 'is'} still replying: you can send again when "
                f"{'they have' if len(busy) > 1 else 'it has'} finished.")
        st.chat_input("Wait for the reply…", key=_key(mode, "input"), disabled=True)
        return
    scripted = _script_hint(mode, setup, battle)
    text = st.chat_input("Type a request or a correction…", key=_key(mode, "input"))
    if text is None and scripted is not None:
        text, correction = scripted.user, scripted.kind != "request"  # sent exactly as written
    if text is None:
        return
    problem = send_turn.send_problem(ctx, battle=battle, text=text, targets=targets, correction=correction)
    if problem:
        st.error(problem)
        return
    if mode == "named" and len(set(setup.contestants)) < 2:
        st.error("Pick two different models.")
        return
    kind = "correction" if correction else "request"
    held: tuple[int, ...] | None = None  # a new battle's generations start in _run
    try:
        if battle is None:
            battle = open_battle.start_battle(
                ctx, mode=mode, setup=setup, first_request=text, targets=targets
            )
        else:
            held = send_turn.add_turn(ctx, battle=battle, targets=targets, text=text, kind=kind)
    except Refused as refused:
        st.error(str(refused))
        return
    st.session_state[_key(mode, "reset_correction")] = True
    battle = open_battle.load_battle(ctx, battle_id=battle.id)
    _run(ctx, battle=battle, targets=targets, placeholders=placeholders, retry=False, held=held)


SEND_LABELS = {"request": "Send this request", "correction": "Send this correction",
               "false_correction": "Send this claim"}


def _script_hint(mode: str, setup: BattleSetup, battle: ShownBattle | None) -> Turn | None:
    """The dialogue's next turn, and a button that sends it exactly as written (the grader follows the
    dialogue by its text); the turn when the button was pressed."""
    if battle is not None and not battle.is_open:
        return None
    found = open_battle.next_scripted(setup.scenario, setup.dialogue, battle)
    if found is None:
        return None
    number, total, turn = found
    what = {"request": "request", "correction": "correction",
            "false_correction": "test (the claim is false: a good model keeps its answer)"}[turn.kind]
    hint, button = st.columns([4, 1], vertical_alignment="center")
    hint.caption(f"This battle's dialogue, {what} {number} of {total}: {turn.user}")
    pressed = button.button(SEND_LABELS[turn.kind], key=_key(mode, f"scripted_{number}"), width="stretch")
    return turn if pressed else None


def _run(
    ctx: Context,
    *,
    battle: ShownBattle,
    targets: tuple[str, ...],
    placeholders: dict[str, Any],
    retry: bool,
    held: tuple[int, ...] | None = None,
) -> None:
    slots = {side: _live_slot(placeholders[side], battle.sides[side]) for side in targets}
    feedback = send_turn.generate(ctx, battle=battle, targets=targets, placeholders=slots, retry=retry,
                                  held=held)
    for item in feedback:
        _flash(item)
    st.rerun()


def _reply_slot(placeholder: Any) -> Any:
    """The slot of a reply still streaming whose request the page already shows."""
    box = placeholder.container()
    box.caption(render.turn_caption(role="assistant", kind="reply"))
    return box.empty()


def _live_slot(placeholder: Any, view: ShownSide) -> Any:
    """Show the visitor's just-sent message (if the turn has no reply yet) and return the reply's slot."""
    box = placeholder.container()
    if view.messages and view.messages[-1].role == "user":
        last = view.messages[-1]
        box.caption(render.turn_caption(role="user", kind=last.kind))
        render.visitor_text(box, last.content)
    box.caption(render.turn_caption(role="assistant", kind="reply"))
    return box.empty()
