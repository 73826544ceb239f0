"""Initial schema: contestants, visitors, battles, conversations, messages, corrections, votes.

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-30 09:06:35.407064
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0001'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('contestants',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('slug', sa.String(length=100), nullable=False),
    sa.Column('display_name', sa.String(length=200), nullable=False),
    sa.Column('family', sa.String(length=100), nullable=False),
    sa.Column('source', sa.String(length=500), nullable=False),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('enabled', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_contestants')),
    sa.UniqueConstraint('slug', name=op.f('uq_contestants_slug'))
    )
    op.create_table('visitors',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('anon_id', sa.String(length=64), nullable=False),
    sa.Column('address_hash', sa.String(length=128), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_visitors')),
    sa.UniqueConstraint('anon_id', name=op.f('uq_visitors_anon_id'))
    )
    with op.batch_alter_table('visitors', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_visitors_address_hash'), ['address_hash'], unique=False)

    op.create_table('battles',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('mode', sa.String(length=16), nullable=False),
    sa.Column('scenario', sa.String(length=100), nullable=False),
    sa.Column('visitor_id', sa.Integer(), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('revealed_before_vote', sa.Boolean(), nullable=False),
    sa.Column('revealed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('flag_reason', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('closed_at', sa.DateTime(timezone=True), nullable=True),
    sa.CheckConstraint("mode IN ('anonymous', 'named', 'direct', 'auto')", name=op.f('ck_battles_mode')),
    sa.CheckConstraint("status IN ('open', 'voted', 'abandoned', 'flagged')", name=op.f('ck_battles_status')),
    sa.ForeignKeyConstraint(['visitor_id'], ['visitors.id'], name=op.f('fk_battles_visitor_id_visitors')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_battles'))
    )
    with op.batch_alter_table('battles', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_battles_created_at'), ['created_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_battles_scenario'), ['scenario'], unique=False)
        batch_op.create_index('ix_battles_status_updated', ['status', 'updated_at'], unique=False)
        batch_op.create_index('ix_battles_visitor_status', ['visitor_id', 'status', 'updated_at'], unique=False)

    op.create_table('conversations',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('battle_id', sa.String(length=36), nullable=False),
    sa.Column('side', sa.String(length=1), nullable=False),
    sa.Column('contestant_id', sa.Integer(), nullable=False),
    sa.Column('system_prompt', sa.Text(), nullable=False),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.CheckConstraint("side IN ('a', 'b')", name=op.f('ck_conversations_side')),
    sa.ForeignKeyConstraint(['battle_id'], ['battles.id'], name=op.f('fk_conversations_battle_id_battles')),
    sa.ForeignKeyConstraint(['contestant_id'], ['contestants.id'], name=op.f('fk_conversations_contestant_id_contestants')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_conversations')),
    sa.UniqueConstraint('battle_id', 'side', name='uq_conversations_battle_side')
    )
    with op.batch_alter_table('conversations', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_conversations_contestant_id'), ['contestant_id'], unique=False)

    op.create_table('votes',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('battle_id', sa.String(length=36), nullable=False),
    sa.Column('visitor_id', sa.Integer(), nullable=True),
    sa.Column('choice', sa.String(length=16), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('model_a_id', sa.Integer(), nullable=False),
    sa.Column('model_b_id', sa.Integer(), nullable=False),
    sa.Column('mode', sa.String(length=16), nullable=False),
    sa.Column('scenario', sa.String(length=100), nullable=False),
    sa.Column('revealed', sa.Boolean(), nullable=False),
    sa.Column('flagged', sa.Boolean(), nullable=False),
    sa.Column('with_corrections', sa.Boolean(), nullable=False),
    sa.CheckConstraint("choice IN ('a', 'b', 'tie', 'both_bad')", name=op.f('ck_votes_choice')),
    sa.CheckConstraint("mode IN ('anonymous', 'named', 'direct', 'auto')", name=op.f('ck_votes_mode')),
    sa.ForeignKeyConstraint(['battle_id'], ['battles.id'], name=op.f('fk_votes_battle_id_battles')),
    sa.ForeignKeyConstraint(['model_a_id'], ['contestants.id'], name=op.f('fk_votes_model_a_id_contestants')),
    sa.ForeignKeyConstraint(['model_b_id'], ['contestants.id'], name=op.f('fk_votes_model_b_id_contestants')),
    sa.ForeignKeyConstraint(['visitor_id'], ['visitors.id'], name=op.f('fk_votes_visitor_id_visitors')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_votes')),
    sa.UniqueConstraint('battle_id', name=op.f('uq_votes_battle_id'))
    )
    with op.batch_alter_table('votes', schema=None) as batch_op:
        batch_op.create_index('ix_votes_created', ['created_at'], unique=False)
        batch_op.create_index(
            'ix_votes_counted_pairs',
            ['mode', 'model_a_id', 'model_b_id', 'choice', 'scenario', 'with_corrections', 'created_at'],
            unique=False,
            sqlite_where=sa.text('flagged = 0 AND revealed = 0'),
            postgresql_where=sa.text('flagged = false AND revealed = false'),
        )
        batch_op.create_index(batch_op.f('ix_votes_visitor_id'), ['visitor_id'], unique=False)

    op.create_table('messages',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('conversation_id', sa.Integer(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('content', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('first_try', sa.Boolean(), nullable=False),
    sa.Column('superseded', sa.Boolean(), nullable=False),
    sa.Column('ttft_ms', sa.Float(), nullable=True),
    sa.Column('total_ms', sa.Float(), nullable=True),
    sa.Column('prompt_tokens', sa.Integer(), nullable=True),
    sa.Column('completion_tokens', sa.Integer(), nullable=True),
    sa.Column('finish_reason', sa.String(length=32), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('grader_label', sa.String(length=16), nullable=True),
    sa.Column('grader_mistakes', sa.JSON(), nullable=True),
    sa.CheckConstraint("grader_label IN ('correct', 'partial', 'garbage')", name=op.f('ck_messages_grader_label')),
    sa.CheckConstraint("kind IN ('request', 'correction', 'reply')", name=op.f('ck_messages_kind')),
    sa.CheckConstraint("role IN ('system', 'user', 'assistant')", name=op.f('ck_messages_role')),
    sa.ForeignKeyConstraint(['conversation_id'], ['conversations.id'], name=op.f('fk_messages_conversation_id_conversations')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_messages')),
    sa.UniqueConstraint('conversation_id', 'position', name='uq_messages_conversation_position')
    )
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.create_index('ix_messages_created', ['created_at'], unique=False)

    op.create_table('corrections',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('battle_id', sa.String(length=36), nullable=False),
    sa.Column('conversation_id', sa.Integer(), nullable=False),
    sa.Column('faulty_message_id', sa.Integer(), nullable=False),
    sa.Column('feedback_message_id', sa.Integer(), nullable=False),
    sa.Column('next_reply_message_id', sa.Integer(), nullable=True),
    sa.Column('outcome', sa.String(length=16), nullable=False),
    sa.Column('judged_by', sa.String(length=16), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('judged_at', sa.DateTime(timezone=True), nullable=True),
    sa.CheckConstraint("judged_by IN ('person', 'grader')", name=op.f('ck_corrections_judged_by')),
    sa.CheckConstraint("outcome IN ('fixed', 'not_fixed', 'unknown')", name=op.f('ck_corrections_outcome')),
    sa.ForeignKeyConstraint(['battle_id'], ['battles.id'], name=op.f('fk_corrections_battle_id_battles')),
    sa.ForeignKeyConstraint(['conversation_id'], ['conversations.id'], name=op.f('fk_corrections_conversation_id_conversations')),
    sa.ForeignKeyConstraint(['faulty_message_id'], ['messages.id'], name=op.f('fk_corrections_faulty_message_id_messages')),
    sa.ForeignKeyConstraint(['feedback_message_id'], ['messages.id'], name=op.f('fk_corrections_feedback_message_id_messages')),
    sa.ForeignKeyConstraint(['next_reply_message_id'], ['messages.id'], name=op.f('fk_corrections_next_reply_message_id_messages')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_corrections')),
    sa.UniqueConstraint('feedback_message_id', name=op.f('uq_corrections_feedback_message_id'))
    )
    with op.batch_alter_table('corrections', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_corrections_battle_id'), ['battle_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_corrections_conversation_id'), ['conversation_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('corrections', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_corrections_conversation_id'))
        batch_op.drop_index(batch_op.f('ix_corrections_battle_id'))

    op.drop_table('corrections')
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.drop_index('ix_messages_created')

    op.drop_table('messages')
    with op.batch_alter_table('votes', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_votes_visitor_id'))
        batch_op.drop_index('ix_votes_counted_pairs')
        batch_op.drop_index('ix_votes_created')

    op.drop_table('votes')
    with op.batch_alter_table('conversations', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_conversations_contestant_id'))

    op.drop_table('conversations')
    with op.batch_alter_table('battles', schema=None) as batch_op:
        batch_op.drop_index('ix_battles_visitor_status')
        batch_op.drop_index('ix_battles_status_updated')
        batch_op.drop_index(batch_op.f('ix_battles_scenario'))
        batch_op.drop_index(batch_op.f('ix_battles_created_at'))

    op.drop_table('battles')
    with op.batch_alter_table('visitors', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_visitors_address_hash'))

    op.drop_table('visitors')
    op.drop_table('contestants')
