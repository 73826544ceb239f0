"""A visitor's first hour (issue 43): a graded reply's mistakes in words.

- ``messages.grader_notes``: the grader's findings as a visitor reads them under the reply ("missing
  duration: the default is 30 minutes"; ``scenarios.explain``), a JSON list of strings; null for replies
  graded before this revision, ungraded replies and free chat. The export publishes the same words.
- ``battles.dismissed_at``: when the visitor pressed *New battle* after voting; until then a reload shows
  the voted battle and its reveal again (null: not dismissed, or closed another way).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ADD/DROP COLUMN, as 0007: a batch copy of ``messages`` would drop a referenced table.
    op.add_column("messages", sa.Column("grader_notes", sa.JSON(), nullable=True))
    op.add_column("battles", sa.Column("dismissed_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("battles", "dismissed_at")
    op.drop_column("messages", "grader_notes")
