"""Vote: record the visitor's choice if the battle allows one (the database refuses a second vote)."""

from __future__ import annotations

import datetime as dt

from db import VoteRefused, VoteView
from db import actions as db_actions
from webapp import metrics
from webapp.context import Context
from webapp.flows import Feedback
from webapp.flows.open_battle import load_battle
from webapp.flows.send_turn import address_key
from webapp.limits import votes_problem
from webapp.views import vote_problem

CHOICE_LABELS = {"a": "Model A", "b": "Model B", "tie": "Tie", "both_bad": "Both bad"}
_REFUSALS = {
    "already_voted": "This battle already has a vote.",
    "not_ready": "Both models must reply before you vote.",
    "closed": "This battle is closed.",
    "not_owner": "This battle belongs to another visitor.",
}


def choice_label(choice: str) -> str:
    return CHOICE_LABELS.get(choice, choice)


def cap_problem(ctx: Context) -> str | None:
    """Why this visitor may not vote again today (the optional daily cap), or None. Counted in the
    database: votes since midnight UTC by this visitor and by everyone from this address bucket."""
    if not ctx.settings.votes_per_visitor_per_day:
        return None
    since = db_actions.utc_day_start(dt.datetime.now(dt.UTC))
    mine = db_actions.count_votes_since(ctx.engine, visitor_id=ctx.visitor_id, since=since)
    address = db_actions.count_votes_since(ctx.engine, address_hash=address_key(ctx), since=since)
    return votes_problem(mine, address, settings=ctx.settings)


def record_vote(ctx: Context, *, battle_id: str, choice: str) -> str | None:
    """Store the vote; returns None on success or the refusal reason in words (see :func:`cast_vote`)."""
    outcome = cast_vote(ctx, battle_id=battle_id, choice=choice)
    return outcome if isinstance(outcome, str) else None


def cast_vote(ctx: Context, *, battle_id: str, choice: str) -> VoteView | str:
    """Store the vote; returns the stored vote, or the refusal reason in words. The database applies the
    daily caps (the visitor's and the address's) again inside the vote's transaction, so tabs or cookies
    racing past :func:`cap_problem` cannot get through together."""
    cap = ctx.settings.votes_per_visitor_per_day
    try:
        return db_actions.record_vote(
            ctx.engine, battle_id=battle_id, choice=choice, visitor_id=ctx.visitor_id,
            accept_revealed=True, daily_cap=cap, address_hash=address_key(ctx),
            address_cap=cap * ctx.settings.address_limit_factor,
        )
    except VoteRefused as refused:
        words = None
        if refused.reason == "daily_cap":
            words = votes_problem(cap, 0, settings=ctx.settings)
        elif refused.reason == "address_cap":
            words = votes_problem(0, cap * ctx.settings.address_limit_factor, settings=ctx.settings)
        return metrics.counted(words) or _REFUSALS.get(refused.reason, str(refused))


def vote(ctx: Context, *, battle_id: str, choice: str) -> Feedback:
    """Record the vote if the battle allows one; the database refuses a second vote in any case. The
    stored vote says whether a model revealed its identity first (read in the vote's own transaction)."""
    battle = load_battle(ctx, battle_id=battle_id)
    problem = vote_problem(battle) or metrics.counted(cap_problem(ctx))
    if problem:
        return Feedback("error", problem)
    outcome = cast_vote(ctx, battle_id=battle_id, choice=choice)
    if isinstance(outcome, str):
        return Feedback("error", outcome)
    metrics.VOTES.labels(battle.mode).inc()
    if outcome.revealed:
        return Feedback("warning", "Vote recorded, but not counted: a model revealed its identity.")
    return Feedback("success", "Thanks! Your vote is recorded.")
