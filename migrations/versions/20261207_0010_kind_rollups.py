"""Roll-ups kept on write (issue 44, item 6): the Fixing board's per-kind figures and replay's pairwise
outcomes read these, never the replies' JSON mistake lists or a self-join of the answers.

- ``side_kinds``: one side's corrections per mistake kind of the corrected reply, judged and fixed per
  judge (any stored outcome, the person, the grader), rewritten with its ``side_stats`` row;
- ``replay_tallies``: replay's answers per scenario, contestant and kind, answered and fixed, added to
  as each answer is stored;
- ``replay_pair_tallies``: replay's pairwise outcomes (two contestants' answers to one correction) per
  scenario, pair and who fixed, added to as each answer is stored.

Both are filled in here from the stored rows.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.boards.replay import refill_replay_tallies
from db.boards.reply_stats import refill_side_stats
from db.models import KIND_CHARS, KIND_COUNTS

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "side_kinds",
        sa.Column("conversation_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=KIND_CHARS), nullable=False),
        *(sa.Column(name, sa.Integer(), nullable=False) for name in KIND_COUNTS),
        sa.ForeignKeyConstraint(["conversation_id"], ["side_stats.conversation_id"],
                                name=op.f("fk_side_kinds_conversation_id_side_stats")),
        sa.PrimaryKeyConstraint("conversation_id", "kind", name=op.f("pk_side_kinds")),
    )
    op.create_table(
        "replay_tallies",
        sa.Column("scenario", sa.String(length=100), nullable=False),
        sa.Column("contestant_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=KIND_CHARS), nullable=False),
        sa.Column("answered", sa.Integer(), nullable=False),
        sa.Column("fixed", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["contestant_id"], ["contestants.id"],
                                name=op.f("fk_replay_tallies_contestant_id_contestants")),
        sa.PrimaryKeyConstraint("scenario", "contestant_id", "kind", name=op.f("pk_replay_tallies")),
    )
    op.create_table(
        "replay_pair_tallies",
        sa.Column("scenario", sa.String(length=100), nullable=False),
        sa.Column("first_id", sa.Integer(), nullable=False),
        sa.Column("second_id", sa.Integer(), nullable=False),
        sa.Column("first_fixed", sa.Boolean(), nullable=False),
        sa.Column("second_fixed", sa.Boolean(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["first_id"], ["contestants.id"],
                                name=op.f("fk_replay_pair_tallies_first_id_contestants")),
        sa.ForeignKeyConstraint(["second_id"], ["contestants.id"],
                                name=op.f("fk_replay_pair_tallies_second_id_contestants")),
        sa.PrimaryKeyConstraint("scenario", "first_id", "second_id", "first_fixed", "second_fixed",
                                name=op.f("pk_replay_pair_tallies")),
    )
    bind = op.get_bind()
    refill_side_stats(bind)
    refill_replay_tallies(bind)


def downgrade() -> None:
    op.drop_table("replay_pair_tallies")
    op.drop_table("replay_tallies")
    op.drop_table("side_kinds")
