"""Reading the boards: every figure the Leaderboard and the admin page show, counted by the database.

Modules: ``aggregates`` (the Votes board's pair counts, fix and first-try counts; the admin's figures,
table sizes and stored messages), ``vote_features`` (the counted votes one by one and their style
features: outliers, style control), ``side_totals`` (the Fixing board's per-model sums), ``fixing``
(correction outcomes by judge, turns to fix, reply flags, automatic-arena battles) and ``reply_stats``
(the per-side roll-up those read, kept current by :mod:`db.actions` when a battle is written, and the
folds that follow a conversation: ``fix_chains``, ``turns_to_fix``, ``recurrence_flags``) and
``replay`` (replay outcomes per model, own mistakes apart), ``kinds`` (fix rates per mistake kind).

Every board query takes the keyword filters of :class:`db.VoteFilters` (``**filters.vote_args()`` or
``**filters.battle_args()``) and counts only published battles (:meth:`db.VoteFilters.published`).
Import from here: ``from db import boards`` or ``from db.boards import ...``.
"""

from __future__ import annotations

from db.boards.aggregates import (
    admin_battles_per_hour,
    admin_latency,
    first_try_counts,
    fix_counts,
    message_counts,
    pairwise_counts,
    table_counts,
)
from db.boards.fixing import (
    FIXED_LABEL,
    CorrectionLink,
    GradedReply,
    Judge,
    JudgeTable,
    ReplyFlags,
    TurnsToFix,
    auto_battle_ids,
    correction_links,
    fix_outcomes,
    flags_from_totals,
    graded_replies,
    judge_table,
    reply_flags,
    turns_from_totals,
    turns_to_fix_counts,
)
from db.boards.kinds import KIND_SOURCES, KindCounts, fix_counts_by_kind
from db.boards.replay import ReplayCounts, replay_counts, replay_pair_counts
from db.boards.reply_stats import TURN_BUCKETS, fix_chains, recurrence_flags, turns_to_fix
from db.boards.side_totals import FixingTotals, fixing_totals
from db.boards.vote_features import (
    STYLE_COLUMNS,
    STYLE_NOTES,
    CountedVotes,
    StyleBattles,
    counted_votes,
    vote_style_features,
)

__all__ = [
    "KIND_SOURCES",
    "KindCounts",
    "fix_counts_by_kind",
    "ReplayCounts",
    "replay_counts",
    "replay_pair_counts",
    "FIXED_LABEL",
    "STYLE_COLUMNS",
    "STYLE_NOTES",
    "TURN_BUCKETS",
    "CorrectionLink",
    "CountedVotes",
    "FixingTotals",
    "GradedReply",
    "Judge",
    "JudgeTable",
    "ReplyFlags",
    "StyleBattles",
    "TurnsToFix",
    "admin_battles_per_hour",
    "admin_latency",
    "auto_battle_ids",
    "correction_links",
    "counted_votes",
    "first_try_counts",
    "fix_chains",
    "fix_counts",
    "fix_outcomes",
    "fixing_totals",
    "flags_from_totals",
    "graded_replies",
    "judge_table",
    "message_counts",
    "pairwise_counts",
    "recurrence_flags",
    "reply_flags",
    "table_counts",
    "turns_from_totals",
    "turns_to_fix",
    "turns_to_fix_counts",
    "vote_style_features",
]
