"""Circuit breakers (issue 45): a failing engine out of the pairing for a while, across processes.

- ``model_breakers``: one row per contestant that has failed (``db.actions.breakers``): the failed replies
  in a row of its current streak and when the streak began, and ``open_until`` (out of the pairing until
  then; half-open after it, closed when NULL).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "model_breakers",
        sa.Column("contestant_id", sa.Integer(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("streak_started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("open_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["contestant_id"], ["contestants.id"],
                                name=op.f("fk_model_breakers_contestant_id_contestants")),
        sa.PrimaryKeyConstraint("contestant_id", name=op.f("pk_model_breakers")),
    )


def downgrade() -> None:
    op.drop_table("model_breakers")
