"""Correct-and-judge: the visitor's verdict on whether a side's reply fixed the corrected mistake."""

from __future__ import annotations

from db import BattleClosed, InvalidInput, NotFound
from db import actions as db_actions
from webapp.context import Context
from webapp.flows import Feedback


def judge(ctx: Context, *, correction_id: int, fixed: bool) -> Feedback:
    """The visitor's verdict, taken only on their own battle while it is open (a stale tab's click after
    the vote, or on a flagged battle, is refused in words and stores nothing)."""
    outcome = "fixed" if fixed else "not_fixed"
    try:
        db_actions.set_correction_outcome(
            ctx.engine, correction_id=correction_id, outcome=outcome, judged_by="person",
            visitor_id=ctx.visitor_id,
        )
    except BattleClosed:
        return Feedback("error", "This battle is closed: its verdicts can no longer change.")
    except InvalidInput as refused:
        return Feedback("error", f"Your verdict was not recorded: {refused}.")
    except NotFound:
        return Feedback("error", "Your verdict was not recorded: that correction does not exist.")
    return Feedback("success", "Recorded: fixed ✓" if fixed else "Recorded: not fixed ✗")
