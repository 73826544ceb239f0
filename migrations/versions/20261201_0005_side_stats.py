"""side_stats: each side's Fixing figures rolled up (replies graded / with a regression, recurrence or
chatty text, the first try's label, corrections judged and fixed per judge, the person-vs-grader table,
turns to fix per judge) with copies of the battle's filter facts; filled in here from the stored rows
and kept current by db.boards.reply_stats.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.models import SIDE_COUNTS
from db.boards.reply_stats import refill_side_stats

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "side_stats",
        sa.Column("conversation_id", sa.Integer(), nullable=False),
        sa.Column("battle_id", sa.String(length=36), nullable=False),
        sa.Column("contestant_id", sa.Integer(), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("scenario", sa.String(length=100), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("flagged", sa.Boolean(), nullable=False),
        sa.Column("first_try_label", sa.String(length=16), nullable=True),
        *(sa.Column(name, sa.Integer(), nullable=False) for name in SIDE_COUNTS),
        sa.ForeignKeyConstraint(["conversation_id"], ["conversations.id"],
                                name=op.f("fk_side_stats_conversation_id_conversations")),
        sa.ForeignKeyConstraint(["battle_id"], ["battles.id"], name=op.f("fk_side_stats_battle_id_battles")),
        sa.ForeignKeyConstraint(["contestant_id"], ["contestants.id"],
                                name=op.f("fk_side_stats_contestant_id_contestants")),
        sa.PrimaryKeyConstraint("conversation_id", name=op.f("pk_side_stats")),
    )
    op.create_index(op.f("ix_side_stats_battle_id"), "side_stats", ["battle_id"])
    refill_side_stats(op.get_bind())


def downgrade() -> None:
    op.drop_index(op.f("ix_side_stats_battle_id"), table_name="side_stats")
    op.drop_table("side_stats")
