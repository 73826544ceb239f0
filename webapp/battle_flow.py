"""The visitor's actions on a battle: send (to A, B or both), retry a side, judge a fix, vote.

Each action writes (and commits) to the database through ``gateway`` before the UI confirms anything;
generation streams both sides at once into the placeholders the page hands in, and each reply is
written the moment its side finishes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from inference.protocol import GenerationResult
from webapp import gateway, limits, render
from webapp.identity import identity_terms, reveals_identity
from webapp.inflight import Busy
from webapp.streaming import StreamJob, stream_pair
from webapp.views import (
    ShownBattle,
    ShownSide,
    history_for_retry,
    last_reply,
    model_history,
    turns_taken,
    vote_problem,
)

BUSY_ERROR = "ModelBusyError"  # a reply refused by a full model line (inference.pool.ModelBusyError)
REVEALED_WARNING = (
    "One model named itself, so this battle is no longer anonymous: your vote will be recorded but not "
    "counted on the leaderboard."
)


@dataclass(frozen=True)
class Feedback:
    """What the page tells the visitor after an action (kind: success | info | warning | error)."""

    kind: str
    text: str


def send_problem(
    ctx: gateway.Context, *, battle: ShownBattle | None, text: str, targets: tuple[str, ...], correction: bool
) -> str | None:
    """Why this message cannot be sent now (limits, closed battle, nothing to correct), or None."""
    settings = ctx.settings
    problem = limits.message_problem(text, settings=settings)
    # A new battle's models are not drawn yet: any full line may be the one it gets.
    slugs = [battle.sides[s].contestant for s in targets] if battle else list(gateway.line_lengths(ctx))
    problem = problem or _generation_problem(ctx, planned=len(targets), slugs=slugs)
    if problem:
        return problem
    if battle is None:
        return limits.battles_problem(*gateway.battles_last_hour(ctx), settings=settings)
    if not battle.is_open:
        return "This battle is closed. Start a new battle."
    problem = limits.turns_problem(turns_taken(battle), settings=settings, mode=battle.mode)
    if problem:
        return problem
    if correction:
        for side in targets:
            if last_reply(battle.sides[side]) is None:
                return f"Model {side.upper()} has no reply to correct yet."
    return None


def _generation_problem(ctx: gateway.Context, *, planned: int, slugs: Iterable[str]) -> str | None:
    """One generation in flight per visitor, the per-minute limits with ``planned`` more, and room in
    the lines of the models ``slugs``."""
    if gateway.in_flight().busy(ctx.visitor_id):
        return limits.BUSY
    rate = limits.rate_problem(*gateway.generations_last_minute(ctx), planned=planned, settings=ctx.settings)
    return rate or limits.line_problem(gateway.line_lengths(ctx), slugs, settings=ctx.settings)


def retry_problem(ctx: gateway.Context, *, battle: ShownBattle, side: str) -> str | None:
    """Why this side cannot regenerate now: a retry is a generation like any other."""
    if not battle.is_open:
        return "This battle is closed. Start a new battle."
    view = battle.sides[side]
    problem = _generation_problem(ctx, planned=1, slugs=[view.contestant])
    return problem or limits.retries_problem(view.generated, settings=ctx.settings)


def generate(
    ctx: gateway.Context,
    *,
    battle: ShownBattle,
    targets: tuple[str, ...],
    placeholders: Mapping[str, Any],
    retry: bool = False,
) -> list[Feedback]:
    """Stream replies for ``targets`` concurrently, writing each to the database as it completes."""
    jobs: dict[str, StreamJob] = {}
    lengths = gateway.line_lengths(ctx)
    for side in targets:
        ahead = lengths.get(battle.sides[side].contestant, 0)
        if ahead:  # the first streamed text replaces this
            placeholders[side].info(limits.line_notice(ahead))
        view = battle.sides[side]
        history = history_for_retry(view) if retry else model_history(view)
        model = gateway.model_for(ctx, view.contestant)
        jobs[side] = StreamJob(model=model, messages=history, params=gateway.params_for(ctx, view.contestant))
    feedback: list[Feedback] = []

    def on_delta(side: str, text: str) -> None:
        render.reply(placeholders[side], text, cursor=True)

    def on_result(side: str, result: GenerationResult) -> None:
        unstored = gateway.add_reply(ctx, battle=battle, side=side, result=result, retry=retry)
        if unstored is not None:
            feedback.append(Feedback("error", f"Model {side.upper()}: {unstored}"))
        if result.finish_reason == "error" and (result.error or "").startswith(BUSY_ERROR):
            placeholders[side].warning(limits.ARENA_BUSY)  # the line filled up after the check: no fault
        elif result.finish_reason == "error":
            render.show_error(placeholders[side], result.error or "unknown error")
        else:
            render.reply(placeholders[side], result.text)
        named = battle.mode == "anonymous" and _names_itself(battle.sides[side], result.text)
        if named and gateway.mark_revealed(ctx, battle_id=battle.id):
            feedback.append(Feedback("warning", REVEALED_WARNING))

    try:
        with gateway.in_flight().hold(ctx.visitor_id):
            stream_pair(jobs, on_delta=on_delta, on_result=on_result)
    except Busy:
        feedback.append(Feedback("error", limits.BUSY))
    return feedback


def _names_itself(view: ShownSide, text: str) -> bool:
    terms = identity_terms(slug=view.contestant, display_name=view.display_name, family=view.family)
    return reveals_identity(text, terms)


def vote(ctx: gateway.Context, *, battle_id: str, choice: str) -> Feedback:
    """Record the vote if the battle allows one; the database refuses a second vote in any case."""
    battle = gateway.load_battle(ctx, battle_id=battle_id)
    problem = vote_problem(battle)
    if problem:
        return Feedback("error", problem)
    refusal = gateway.record_vote(ctx, battle_id=battle_id, choice=choice)
    if refusal:
        return Feedback("error", refusal)
    battle = gateway.load_battle(ctx, battle_id=battle_id)
    if battle.identity_revealed:
        return Feedback("warning", "Vote recorded, but not counted: a model revealed its identity.")
    return Feedback("success", "Thanks! Your vote is recorded.")


def skip(ctx: gateway.Context, *, mode: str, battle_id: str) -> Feedback:
    """Leave the open battle (or chat) without a vote: it is recorded as abandoned, never as a vote."""
    problem = gateway.abandon(ctx, mode=mode, battle_id=battle_id)
    if problem:
        return Feedback("error", problem)
    if mode == "direct":
        return Feedback("info", "New chat: the previous one is kept in the dataset.")
    return Feedback("info", "Battle skipped: it is recorded as abandoned, with no vote. Here is a new one.")


def judge(ctx: gateway.Context, *, correction_id: int, fixed: bool) -> Feedback:
    gateway.set_outcome(ctx, correction_id=correction_id, outcome="fixed" if fixed else "not_fixed")
    return Feedback("success", "Recorded: fixed ✓" if fixed else "Recorded: not fixed ✗")
