"""Scenarios as data (issue 42): the generated dialogue a battle plays.

- ``battles.dialogue``: for a battle of a gradable scenario, the generated dialogue both sides are played
  (``{"id", "scenario", "seed", "turns": [{"user", "kind", "expected"}]}``, as ``python -m scenarios
  generate`` prints it, without the system prompt the conversations already hold); null for free chat,
  for battles opened before this revision (graded against the scenario's reference dialogue) and for
  automatic runs (their conversation params carry theirs).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ADD/DROP COLUMN (SQLite >= 3.35 has both): a batch copy of ``battles`` would have to drop a
    # table every other table references.
    op.add_column("battles", sa.Column("dialogue", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("battles", "dialogue")
