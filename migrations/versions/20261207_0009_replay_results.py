"""Replay (issue 44): every correction a person wrote, answered by other models.

- ``replay_results``: one model's answer to one stored correction (the history up to the faulty reply,
  then the correction), graded in the dialogue's context: ``fixed``, ``not_fixed`` or ``regression``.
  One row per correction and contestant (``uq_replay_results_correction_contestant``), so a second
  replay adds nothing; ``own`` marks a model answering its own mistake; ``scenario`` is the battle's,
  copied for the boards.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "replay_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("correction_id", sa.Integer(), nullable=False),
        sa.Column("contestant_id", sa.Integer(), nullable=False),
        sa.Column("own", sa.Boolean(), nullable=False),
        sa.Column("scenario", sa.String(length=100), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("grader_label", sa.String(length=16), nullable=True),
        sa.Column("grader_mistakes", sa.JSON(), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("completion_tokens", sa.Integer(), nullable=True),
        sa.Column("total_ms", sa.Float(), nullable=True),
        sa.Column("finish_reason", sa.String(length=32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("outcome IN ('fixed', 'not_fixed', 'regression')",
                           name=op.f("ck_replay_results_outcome")),
        sa.ForeignKeyConstraint(["correction_id"], ["corrections.id"],
                                name=op.f("fk_replay_results_correction_id_corrections")),
        sa.ForeignKeyConstraint(["contestant_id"], ["contestants.id"],
                                name=op.f("fk_replay_results_contestant_id_contestants")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_replay_results")),
        sa.UniqueConstraint("correction_id", "contestant_id", name="uq_replay_results_correction_contestant"),
    )
    op.create_index("ix_replay_results_board", "replay_results",
                    ["scenario", "contestant_id", "own", "outcome"])


def downgrade() -> None:
    op.drop_index("ix_replay_results_board", table_name="replay_results")
    op.drop_table("replay_results")
