"""Correct-and-judge: the visitor's verdict on whether a side's reply fixed the corrected mistake."""

from __future__ import annotations

from db import repository as db_repo
from webapp.context import Context
from webapp.flows import Feedback


def judge(ctx: Context, *, correction_id: int, fixed: bool) -> Feedback:
    outcome = "fixed" if fixed else "not_fixed"
    db_repo.set_correction_outcome(
        ctx.engine, correction_id=correction_id, outcome=outcome, judged_by="person"
    )
    return Feedback("success", "Recorded: fixed ✓" if fixed else "Recorded: not fixed ✗")
