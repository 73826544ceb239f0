"""Index battles on (created_at, id): the export's keyset pagination order.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_battles_created_id", "battles", ["created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_battles_created_id", table_name="battles")
