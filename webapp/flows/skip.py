"""Skip: leave the open battle (or chat) without a vote; it is recorded as abandoned, never as a vote."""

from __future__ import annotations

from db import BattleClosed, DBError
from db import actions as db_actions
from webapp.context import Context
from webapp.flows import Feedback
from webapp.flows.open_battle import forget_battle


def skip(ctx: Context, *, mode: str, battle_id: str) -> Feedback:
    """ "Skip this battle" / "New chat": close this visitor's open battle and stop showing it."""
    try:
        db_actions.abandon_battle(ctx.engine, battle_id=battle_id, visitor_id=ctx.visitor_id)
    except BattleClosed:
        pass  # closed meanwhile (another tab voted or skipped): nothing left to skip
    except DBError as exc:
        return Feedback("error", f"Could not skip the battle: {exc}")
    forget_battle(mode=mode)
    if mode == "direct":
        return Feedback("info", "New chat: the previous one is kept in the dataset.")
    return Feedback("info", "Battle skipped: it is recorded as abandoned, with no vote. Here is a new one.")
