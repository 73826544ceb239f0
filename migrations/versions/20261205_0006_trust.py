"""Trust (issue 39): the generation ledger, side_stats.closed_at, contestant toggles in the moderation log.

- ``generations``: one row per reply a visitor asked for, written before it streams; the limits count
  these rows (an interrupted generation counts) and a row holds its in-flight slot until finished or
  until its lease runs out.
- ``side_stats.closed_at``: the battle's closing time, copied as the other filter facts are, so the
  public boards count only closed battles past the publication delay; filled in from ``battles``.
- ``moderation_events``: enabling or disabling a contestant is logged too (``contestant_id``, actions
  ``enable``/``disable``); such an event names no battle and has no prior status.
- ``admin_login_failures``: one row per failed admin login and throttle key (session, address hash,
  the global key), so the login back-off and the global failure budget hold across server processes.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD_ACTIONS = "action IN ('flag', 'unflag')"
_NEW_ACTIONS = "action IN ('flag', 'unflag', 'enable', 'disable')"
_ONE_TARGET = "(battle_id IS NULL) <> (contestant_id IS NULL)"


def upgrade() -> None:
    op.create_table(
        "generations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("visitor_id", sa.Integer(), nullable=False),
        sa.Column("address_hash", sa.String(length=128), nullable=False),
        sa.Column("battle_id", sa.String(length=36), nullable=False),
        sa.Column("side", sa.String(length=1), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("side IN ('a', 'b')", name=op.f("ck_generations_side")),
        sa.ForeignKeyConstraint(
            ["visitor_id"], ["visitors.id"], name=op.f("fk_generations_visitor_id_visitors")
        ),
        sa.ForeignKeyConstraint(["battle_id"], ["battles.id"], name=op.f("fk_generations_battle_id_battles")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_generations")),
    )
    op.create_index(op.f("ix_generations_battle_id"), "generations", ["battle_id"])
    op.create_index("ix_generations_visitor_started", "generations", ["visitor_id", "started_at"])
    op.create_index("ix_generations_address_started", "generations", ["address_hash", "started_at"])
    op.create_index("ix_generations_started", "generations", ["started_at"])

    op.create_table(
        "admin_login_failures",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=80), nullable=False),
        sa.Column("failed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_admin_login_failures")),
    )
    op.create_index(op.f("ix_admin_login_failures_key"), "admin_login_failures", ["key"])
    op.create_index(op.f("ix_admin_login_failures_failed_at"), "admin_login_failures", ["failed_at"])

    with op.batch_alter_table("side_stats") as batch:
        batch.add_column(sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True))
    op.execute(
        "UPDATE side_stats SET closed_at = "
        "(SELECT battles.closed_at FROM battles WHERE battles.id = side_stats.battle_id)"
    )

    with op.batch_alter_table("moderation_events") as batch:
        batch.add_column(sa.Column("contestant_id", sa.Integer(), nullable=True))
        batch.create_foreign_key(
            op.f("fk_moderation_events_contestant_id_contestants"), "contestants", ["contestant_id"], ["id"]
        )
        batch.alter_column("battle_id", existing_type=sa.String(length=36), nullable=True)
        batch.alter_column("prior_status", existing_type=sa.String(length=16), nullable=True)
        batch.drop_constraint(op.f("ck_moderation_events_action"), type_="check")
        batch.create_check_constraint("action", _NEW_ACTIONS)
        batch.create_check_constraint("one_target", _ONE_TARGET)


def downgrade() -> None:
    op.drop_index(op.f("ix_admin_login_failures_failed_at"), table_name="admin_login_failures")
    op.drop_index(op.f("ix_admin_login_failures_key"), table_name="admin_login_failures")
    op.drop_table("admin_login_failures")
    op.execute("DELETE FROM moderation_events WHERE contestant_id IS NOT NULL")
    with op.batch_alter_table("moderation_events") as batch:
        batch.drop_constraint(op.f("ck_moderation_events_one_target"), type_="check")
        batch.drop_constraint(op.f("ck_moderation_events_action"), type_="check")
        batch.create_check_constraint("action", _OLD_ACTIONS)
        batch.alter_column("prior_status", existing_type=sa.String(length=16), nullable=False)
        batch.alter_column("battle_id", existing_type=sa.String(length=36), nullable=False)
        batch.drop_constraint(op.f("fk_moderation_events_contestant_id_contestants"), type_="foreignkey")
        batch.drop_column("contestant_id")
    with op.batch_alter_table("side_stats") as batch:
        batch.drop_column("closed_at")
    op.drop_index("ix_generations_started", table_name="generations")
    op.drop_index("ix_generations_address_started", table_name="generations")
    op.drop_index("ix_generations_visitor_started", table_name="generations")
    op.drop_index(op.f("ix_generations_battle_id"), table_name="generations")
    op.drop_table("generations")
