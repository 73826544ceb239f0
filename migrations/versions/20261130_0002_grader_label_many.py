"""Grader label 'many' (three or more mistakes in one reply, the study's double fire).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NAME = "ck_messages_grader_label"


def _replace_check(values: tuple[str, ...]) -> None:
    listed = ", ".join(f"'{v}'" for v in values)
    with op.batch_alter_table("messages") as batch:
        batch.drop_constraint(op.f(_NAME), type_="check")
        batch.create_check_constraint(op.f(_NAME), f"grader_label IN ({listed})")


def upgrade() -> None:
    _replace_check(("correct", "partial", "garbage", "many"))


def downgrade() -> None:
    op.execute("UPDATE messages SET grader_label = 'garbage' WHERE grader_label = 'many'")
    _replace_check(("correct", "partial", "garbage"))
