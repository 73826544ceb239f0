"""What visitors and admins do, written to the database, and the reads a flow needs before it acts.

Modules: ``people`` (contestants, visitors), ``battles`` (open, append, corrections, verdicts, reveal,
abandon), ``votes`` (one vote per battle, the daily caps), ``group_commit`` (concurrent votes share a
transaction), ``generations`` (the ledger of replies from their start, and its limits), ``limits`` (battles,
votes and messages since a moment: the rate limits), ``admin_logins`` (the admin back-off),
``moderation`` (flag, unflag, its log, when the next closed battle is published), ``reading`` (a
battle back as a frozen view, resuming one) and ``shown`` (which battle a page shows after a reload:
the open one, or the one just voted on until *New battle*) and ``replay`` (a model's answer to a stored
correction, once per model) and ``breakers`` (a failing engine out of the pairing for a while).

Conventions: the first argument is the :class:`~sqlalchemy.Engine`, everything else is keyword-only; each
action is ONE transaction, committed (durable) before the function returns; refusals raise a typed error
(:mod:`db`'s error classes, :class:`GenerationRefused`) and leave nothing half-written; results are frozen
views, never ORM objects. Import from here: ``from db import actions`` or ``from db.actions import ...``.
"""

from __future__ import annotations

from db.actions.admin_logins import (
    AdminFailureState,
    KeyFailures,
    admin_failure_state,
    clear_admin_failures,
    record_admin_failure,
)
from db.actions.battles import (
    abandon_battle,
    abandon_stale_battles,
    append_message,
    append_turn,
    mark_revealed,
    open_battle,
    record_correction,
    set_correction_outcome,
    set_grader_label,
)
from db.actions.breakers import BreakerRules, BreakerState, claim_trials, open_breakers, record_reply
from db.actions.generations import (
    GenerationLimits,
    GenerationRefused,
    count_generations_since,
    count_side_generations,
    finish_generations,
    generations_in_flight,
    start_generations,
)
from db.actions.group_commit import configure_group_commit
from db.actions.limits import count_battles_since, count_messages_since, count_votes_since
from db.actions.moderation import (
    flag_battle,
    moderation_log,
    next_publication_close,
    recent_battles,
    unflag_battle,
)
from db.actions.people import (
    get_contestant,
    get_or_create_visitor,
    hash_address,
    list_contestants,
    set_contestant_enabled,
    upsert_contestant,
)
from db.actions.reading import get_battle, resume_open_battle
from db.actions.replay import record_replay_result, replayed_corrections
from db.actions.shown import dismiss_battle, resume_battle
from db.actions.votes import record_vote, utc_day_start

__all__ = [
    "BreakerRules",
    "BreakerState",
    "claim_trials",
    "open_breakers",
    "record_reply",
    "record_replay_result",
    "replayed_corrections",
    "AdminFailureState",
    "GenerationLimits",
    "GenerationRefused",
    "KeyFailures",
    "abandon_battle",
    "abandon_stale_battles",
    "admin_failure_state",
    "append_message",
    "append_turn",
    "clear_admin_failures",
    "configure_group_commit",
    "count_battles_since",
    "count_generations_since",
    "count_messages_since",
    "count_side_generations",
    "count_votes_since",
    "finish_generations",
    "flag_battle",
    "generations_in_flight",
    "get_battle",
    "get_contestant",
    "get_or_create_visitor",
    "hash_address",
    "list_contestants",
    "mark_revealed",
    "moderation_log",
    "next_publication_close",
    "open_battle",
    "recent_battles",
    "record_admin_failure",
    "record_correction",
    "record_vote",
    "resume_open_battle",
    "resume_battle",
    "dismiss_battle",
    "set_contestant_enabled",
    "set_correction_outcome",
    "set_grader_label",
    "start_generations",
    "unflag_battle",
    "upsert_contestant",
    "utc_day_start",
]
