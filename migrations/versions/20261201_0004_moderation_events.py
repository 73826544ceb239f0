"""Append-only moderation log: every flag and unflag with time, reason, admin session, prior status.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_STATUSES = "'open', 'voted', 'abandoned', 'flagged'"


def upgrade() -> None:
    op.create_table(
        "moderation_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("battle_id", sa.String(length=36), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("admin_session", sa.String(length=64), nullable=False),
        sa.Column("prior_status", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("action IN ('flag', 'unflag')", name=op.f("ck_moderation_events_action")),
        sa.CheckConstraint(f"prior_status IN ({_STATUSES})", name=op.f("ck_moderation_events_prior_status")),
        sa.ForeignKeyConstraint(
            ["battle_id"], ["battles.id"], name=op.f("fk_moderation_events_battle_id_battles")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_moderation_events")),
    )
    op.create_index(op.f("ix_moderation_events_battle_id"), "moderation_events", ["battle_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_moderation_events_battle_id"), table_name="moderation_events")
    op.drop_table("moderation_events")
