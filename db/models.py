"""SQLAlchemy 2.0 models: the data contract of ``docs/DESIGN.md`` as tables.

Enumerations are plain strings with a named CHECK constraint (portable, readable in any SQL shell, and
easy to extend in a migration). Timestamps are timezone-aware UTC in Python; SQLite stores naive UTC.

``votes`` repeats a few immutable facts of its battle (the two contestants, mode, scenario) and carries
the flags that decide whether it counts (revealed before the vote, flagged, had corrections). This is
deliberate: the leaderboard aggregation is then one indexed ``GROUP BY`` over one table, so its cost
grows with the number of model pairs, not with joins over millions of battles and conversations.
``db.actions`` keeps those copies in step inside the same transactions that change the battle.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any, Literal, get_args

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

Mode = Literal["anonymous", "named", "direct", "auto"]
BattleStatus = Literal["open", "voted", "abandoned", "flagged"]
Side = Literal["a", "b"]
Role = Literal["system", "user", "assistant"]
MessageKind = Literal["request", "correction", "reply"]
GraderLabel = Literal["correct", "partial", "garbage", "many"]
Outcome = Literal["fixed", "not_fixed", "unknown"]
JudgedBy = Literal["person", "grader"]
Choice = Literal["a", "b", "tie", "both_bad"]
ModerationAction = Literal["flag", "unflag", "enable", "disable"]
ReplayOutcome = Literal["fixed", "not_fixed", "regression"]

MODES: tuple[str, ...] = get_args(Mode)
BATTLE_STATUSES: tuple[str, ...] = get_args(BattleStatus)
SIDES: tuple[str, ...] = get_args(Side)
ROLES: tuple[str, ...] = get_args(Role)
MESSAGE_KINDS: tuple[str, ...] = get_args(MessageKind)
GRADER_LABELS: tuple[str, ...] = get_args(GraderLabel)
OUTCOMES: tuple[str, ...] = get_args(Outcome)
JUDGED_BY: tuple[str, ...] = get_args(JudgedBy)
CHOICES: tuple[str, ...] = get_args(Choice)
MODERATION_ACTIONS: tuple[str, ...] = get_args(ModerationAction)
REPLAY_OUTCOMES: tuple[str, ...] = get_args(ReplayOutcome)

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> dt.datetime:
    """Now, timezone-aware UTC (the only clock ``db`` uses)."""
    return dt.datetime.now(dt.UTC)


class UTCDateTime(TypeDecorator[dt.datetime]):
    """A timestamp that is always timezone-aware UTC in Python, whatever the backend returns.

    Naive datetimes are refused on the way in: guessing their zone is how data sets get shifted by hours.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Dialect) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime: pass a timezone-aware (UTC) datetime")
        value = value.astimezone(dt.UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: dt.datetime | None, dialect: Dialect) -> dt.datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def one_of(column: str, values: tuple[str, ...], name: str | None = None) -> CheckConstraint:
    """A named CHECK constraint that keeps ``column`` inside ``values`` (an enum as a constrained string)."""
    listed = ", ".join(f"'{v}'" for v in values)
    return CheckConstraint(f"{column} IN ({listed})", name=name or column)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Contestant(Base):
    """A model that can take part in battles. Disabled contestants stay for history, out of the sampler."""

    __tablename__ = "contestants"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    slug: Mapped[str] = mapped_column(String(100), unique=True)
    display_name: Mapped[str] = mapped_column(String(200))
    family: Mapped[str] = mapped_column(String(100), default="")
    source: Mapped[str] = mapped_column(String(500), default="")
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class Visitor(Base):
    """An anonymous visitor: a random browser id and a salted hash of the address (never exported)."""

    __tablename__ = "visitors"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    anon_id: Mapped[str] = mapped_column(String(64), unique=True)
    address_hash: Mapped[str | None] = mapped_column(String(128), index=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_seen_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class Battle(Base):
    __tablename__ = "battles"
    __table_args__ = (
        one_of("mode", MODES),
        one_of("status", BATTLE_STATUSES),
        Index("ix_battles_visitor_status", "visitor_id", "status", "updated_at"),
        Index("ix_battles_status_updated", "status", "updated_at"),
        # The export pages battles in (created_at, id) order with keyset pagination: without this index,
        # battles sharing a timestamp (bulk imports) make each page a scan.
        Index("ix_battles_created_id", "created_at", "id"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=lambda: str(uuid.uuid4()))
    mode: Mapped[str] = mapped_column(String(16))
    scenario: Mapped[str] = mapped_column(String(100), index=True)
    visitor_id: Mapped[int | None] = mapped_column(ForeignKey("visitors.id"))
    status: Mapped[str] = mapped_column(String(16), default="open")
    revealed_before_vote: Mapped[bool] = mapped_column(Boolean, default=False)
    revealed_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    flag_reason: Mapped[str | None] = mapped_column(Text)
    # The generated dialogue the battle plays (``scenarios.generate``; migration 0007): null for free chat
    # and older battles (graded against the scenario's reference dialogue).
    dialogue: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    closed_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    dismissed_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)  # "New battle" after a vote

    conversations: Mapped[list[Conversation]] = relationship(
        back_populates="battle", order_by="Conversation.side"
    )


class Conversation(Base):
    """One side of a battle: its contestant, system prompt and sampling params."""

    __tablename__ = "conversations"
    __table_args__ = (
        one_of("side", SIDES),
        UniqueConstraint("battle_id", "side", name="uq_conversations_battle_side"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    battle_id: Mapped[str] = mapped_column(ForeignKey("battles.id"))
    side: Mapped[str] = mapped_column(String(1))
    contestant_id: Mapped[int] = mapped_column(ForeignKey("contestants.id"), index=True)
    system_prompt: Mapped[str] = mapped_column(Text, default="")
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    battle: Mapped[Battle] = relationship(back_populates="conversations")
    contestant: Mapped[Contestant] = relationship()


class Message(Base):
    """One turn of one side. Retried replies are kept and marked ``superseded`` (nothing is deleted)."""

    __tablename__ = "messages"
    __table_args__ = (
        one_of("role", ROLES),
        one_of("kind", MESSAGE_KINDS),
        one_of("grader_label", GRADER_LABELS),
        UniqueConstraint("conversation_id", "position", name="uq_messages_conversation_position"),
        Index("ix_messages_created", "created_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    conversation_id: Mapped[int] = mapped_column(ForeignKey("conversations.id"))
    position: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(16))
    kind: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    first_try: Mapped[bool] = mapped_column(Boolean, default=False)
    superseded: Mapped[bool] = mapped_column(Boolean, default=False)
    ttft_ms: Mapped[float | None] = mapped_column(Float)
    total_ms: Mapped[float | None] = mapped_column(Float)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    completion_tokens: Mapped[int | None] = mapped_column(Integer)
    finish_reason: Mapped[str | None] = mapped_column(String(32))
    error: Mapped[str | None] = mapped_column(Text)
    grader_label: Mapped[str | None] = mapped_column(String(16))
    grader_mistakes: Mapped[list[str] | None] = mapped_column(JSON)
    grader_notes: Mapped[list[str] | None] = mapped_column(JSON)  # the mistakes in words (0008)


class Correction(Base):
    """A correction event: faulty reply -> feedback -> the reply that followed, and its judged outcome."""

    __tablename__ = "corrections"
    __table_args__ = (
        one_of("outcome", OUTCOMES),
        one_of("judged_by", JUDGED_BY),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    battle_id: Mapped[str] = mapped_column(ForeignKey("battles.id"), index=True)
    conversation_id: Mapped[int] = mapped_column(ForeignKey("conversations.id"), index=True)
    faulty_message_id: Mapped[int] = mapped_column(ForeignKey("messages.id"))
    feedback_message_id: Mapped[int] = mapped_column(ForeignKey("messages.id"), unique=True)
    next_reply_message_id: Mapped[int | None] = mapped_column(ForeignKey("messages.id"))
    outcome: Mapped[str] = mapped_column(String(16), default="unknown")
    judged_by: Mapped[str | None] = mapped_column(String(16))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    judged_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)


class Vote(Base):
    """The one vote of a battle, with copies of the facts the leaderboard filters on (see module doc)."""

    __tablename__ = "votes"
    __table_args__ = (
        one_of("choice", CHOICES),
        one_of("mode", MODES),
        # Covering, partial index for the leaderboard: counted votes only, in GROUP BY order, so both
        # backends answer pairwise_counts from the index alone (see db/aggregates.py and db bench).
        Index(
            "ix_votes_counted_pairs",
            "mode", "model_a_id", "model_b_id", "choice", "scenario", "with_corrections", "created_at",
            sqlite_where=text("flagged = 0 AND revealed = 0"),
            postgresql_where=text("flagged = false AND revealed = false"),
        ),
        Index("ix_votes_created", "created_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    battle_id: Mapped[str] = mapped_column(ForeignKey("battles.id"), unique=True)
    visitor_id: Mapped[int | None] = mapped_column(ForeignKey("visitors.id"), index=True)
    choice: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    model_a_id: Mapped[int] = mapped_column(ForeignKey("contestants.id"))
    model_b_id: Mapped[int] = mapped_column(ForeignKey("contestants.id"))
    mode: Mapped[str] = mapped_column(String(16))
    scenario: Mapped[str] = mapped_column(String(100))
    revealed: Mapped[bool] = mapped_column(Boolean, default=False)
    flagged: Mapped[bool] = mapped_column(Boolean, default=False)
    with_corrections: Mapped[bool] = mapped_column(Boolean, default=False)


class ModerationEvent(Base):
    """One admin action, appended and never changed: who (the admin's login session), when, why.

    A flag or unflag names its battle and the status the battle had before (an unflag restores it); an
    enable or disable names its contestant (``prior_status`` empty). ``db`` has no update or
    delete for this table."""

    __tablename__ = "moderation_events"
    __table_args__ = (
        one_of("action", MODERATION_ACTIONS),
        one_of("prior_status", BATTLE_STATUSES),
        CheckConstraint("(battle_id IS NULL) <> (contestant_id IS NULL)", name="one_target"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    battle_id: Mapped[str | None] = mapped_column(ForeignKey("battles.id"), index=True)
    contestant_id: Mapped[int | None] = mapped_column(ForeignKey("contestants.id"))
    action: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text, default="")
    admin_session: Mapped[str] = mapped_column(String(64), default="")
    prior_status: Mapped[str | None] = mapped_column(String(16))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class Generation(Base):
    """The generation ledger: one row per reply a visitor asked for, written BEFORE it streams.

    Limits count these rows, not stored replies, so a generation cut short (a click, a reload, a closed
    tab) still counts. A row is in flight until ``finished_at`` is set or its lease runs out
    (``lease_until``): a crashed process cannot hold a visitor's slot for ever. ``address_hash`` is the
    salted hash of the address the request came from (never exported)."""

    __tablename__ = "generations"
    __table_args__ = (
        one_of("side", SIDES),
        Index("ix_generations_visitor_started", "visitor_id", "started_at"),
        Index("ix_generations_address_started", "address_hash", "started_at"),
        Index("ix_generations_started", "started_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    visitor_id: Mapped[int] = mapped_column(ForeignKey("visitors.id"))
    address_hash: Mapped[str] = mapped_column(String(128))
    battle_id: Mapped[str] = mapped_column(ForeignKey("battles.id"), index=True)
    side: Mapped[str] = mapped_column(String(1))
    started_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    lease_until: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)


class ReplayResult(Base):
    """One model's answer to a correction a person wrote (``python -m scenarios replay``): the history up
    to the faulty reply and the correction were sent to ``contestant_id``, and the grader judged its reply
    in the dialogue's context. ``own``: the contestant made the original mistake. One row per correction
    and contestant, so replaying again adds nothing; ``scenario`` is copied from the battle for the
    boards' ``GROUP BY``."""

    __tablename__ = "replay_results"
    __table_args__ = (
        one_of("outcome", REPLAY_OUTCOMES),
        UniqueConstraint("correction_id", "contestant_id", name="uq_replay_results_correction_contestant"),
        Index("ix_replay_results_board", "scenario", "contestant_id", "own", "outcome"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    correction_id: Mapped[int] = mapped_column(ForeignKey("corrections.id"))
    contestant_id: Mapped[int] = mapped_column(ForeignKey("contestants.id"))
    own: Mapped[bool] = mapped_column(Boolean)
    scenario: Mapped[str] = mapped_column(String(100))
    outcome: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text)
    grader_label: Mapped[str | None] = mapped_column(String(16))
    grader_mistakes: Mapped[list[str] | None] = mapped_column(JSON)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    completion_tokens: Mapped[int | None] = mapped_column(Integer)
    total_ms: Mapped[float | None] = mapped_column(Float)
    finish_reason: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class AdminLoginFailure(Base):
    """One failed admin login under one throttle key: a session, an address hash, or the global key that
    every failure also gets (``db.actions.admin_logins``). The back-off is read from these rows, so it holds
    across every server process on the database; a key's rows go on a successful login, and rows older
    than a day are pruned."""

    __tablename__ = "admin_login_failures"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(80), index=True)
    failed_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)


class ModelBreaker(Base):
    """A contestant's circuit breaker (``db.actions.breakers``), kept in the database so that every server
    process on it takes a failing engine out of the pairing at once. ``failures`` counts the failed
    replies in a row of the streak that began at ``streak_started_at``; ``open_until`` set means open
    until then (out of the pairing) and, once passed, half-open: the next battle's reply is its trial.
    A contestant without a row has never failed: closed."""

    __tablename__ = "model_breakers"

    contestant_id: Mapped[int] = mapped_column(ForeignKey("contestants.id"), primary_key=True)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    streak_started_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    open_until: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


SIDE_COUNTS: tuple[str, ...] = (
    "graded_replies", "regression_replies", "recurrence_replies", "chatty_replies",
    "judged", "judged_fixed", "person_fixed", "person_judged", "grader_fixed", "grader_judged",
    "both_fixed", "person_only_fixed", "grader_only_fixed", "neither_fixed",
    "person_turns_1", "person_turns_2", "person_turns_3", "person_never",
    "grader_turns_1", "grader_turns_2", "grader_turns_3", "grader_never",
)


class SideStats(Base):
    """One side's Fixing figures rolled up (``db.boards.reply_stats`` rewrites the row on every write that
    changes them; migration 0005 filled it in), with copies of the battle's facts the board filters on,
    as ``Vote`` has: the Fixing board is one scan of this narrow table, never of replies or corrections.

    Counts: current graded replies and those with a regression / recurrence / chatty text; corrections
    with a stored outcome (any judge: the Votes board's fix rate), those judged by the person and by the
    grader (the next reply's label) and how many each found fixed; the
    person-vs-grader 2x2 table; chains of corrections by the turn that fixed them (1, 2, 3+, never), per
    judge. ``first_try_label`` is the grader's label of the side's first reply."""

    __tablename__ = "side_stats"
    # No index on contestant_id: SQLite would walk it for the GROUP BY, a random row read per side
    # (0.4 s per 200k sides, against 0.14 s for the plain scan and a small sort).

    conversation_id: Mapped[int] = mapped_column(ForeignKey("conversations.id"), primary_key=True)
    battle_id: Mapped[str] = mapped_column(ForeignKey("battles.id"), index=True)
    contestant_id: Mapped[int] = mapped_column(ForeignKey("contestants.id"))
    mode: Mapped[str] = mapped_column(String(16))
    scenario: Mapped[str] = mapped_column(String(100))
    started_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    # The battle's closing time (None while open): the public boards count closed battles only, past
    # the publication delay (db.vote_filters.VoteFilters.published).
    closed_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    flagged: Mapped[bool] = mapped_column(Boolean, default=False)
    first_try_label: Mapped[str | None] = mapped_column(String(16))
    graded_replies: Mapped[int] = mapped_column(Integer, default=0)
    regression_replies: Mapped[int] = mapped_column(Integer, default=0)
    recurrence_replies: Mapped[int] = mapped_column(Integer, default=0)
    chatty_replies: Mapped[int] = mapped_column(Integer, default=0)
    judged: Mapped[int] = mapped_column(Integer, default=0)
    judged_fixed: Mapped[int] = mapped_column(Integer, default=0)
    person_fixed: Mapped[int] = mapped_column(Integer, default=0)
    person_judged: Mapped[int] = mapped_column(Integer, default=0)
    grader_fixed: Mapped[int] = mapped_column(Integer, default=0)
    grader_judged: Mapped[int] = mapped_column(Integer, default=0)
    both_fixed: Mapped[int] = mapped_column(Integer, default=0)
    person_only_fixed: Mapped[int] = mapped_column(Integer, default=0)
    grader_only_fixed: Mapped[int] = mapped_column(Integer, default=0)
    neither_fixed: Mapped[int] = mapped_column(Integer, default=0)
    person_turns_1: Mapped[int] = mapped_column(Integer, default=0)
    person_turns_2: Mapped[int] = mapped_column(Integer, default=0)
    person_turns_3: Mapped[int] = mapped_column(Integer, default=0)
    person_never: Mapped[int] = mapped_column(Integer, default=0)
    grader_turns_1: Mapped[int] = mapped_column(Integer, default=0)
    grader_turns_2: Mapped[int] = mapped_column(Integer, default=0)
    grader_turns_3: Mapped[int] = mapped_column(Integer, default=0)
    grader_never: Mapped[int] = mapped_column(Integer, default=0)


KIND_CHARS = 64  # a mistake kind's longest name in the roll-ups (longer names are cut)
KIND_COUNTS: tuple[str, ...] = (
    "judged", "judged_fixed", "person_judged", "person_fixed", "grader_judged", "grader_fixed",
)


class SideKind(Base):
    """One side's corrections of one mistake kind, rolled up beside its ``side_stats`` row (rewritten by
    the same writes): a correction's kinds are the grader's mistakes of the reply it corrects (``garbage``
    for a reply with no recognisable call). Counts per judge as in ``SIDE_COUNTS``: any stored outcome,
    the person's, the grader's (the next reply's label). The per-kind board joins ``side_stats`` on the
    key for the battle facts it filters on, so moderation and closing touch one table."""

    __tablename__ = "side_kinds"

    conversation_id: Mapped[int] = mapped_column(ForeignKey("side_stats.conversation_id"), primary_key=True)
    kind: Mapped[str] = mapped_column(String(KIND_CHARS), primary_key=True)
    judged: Mapped[int] = mapped_column(Integer, default=0)
    judged_fixed: Mapped[int] = mapped_column(Integer, default=0)
    person_judged: Mapped[int] = mapped_column(Integer, default=0)
    person_fixed: Mapped[int] = mapped_column(Integer, default=0)
    grader_judged: Mapped[int] = mapped_column(Integer, default=0)
    grader_fixed: Mapped[int] = mapped_column(Integer, default=0)


class ReplayTally(Base):
    """Replay's answers counted per scenario, contestant and the corrected reply's mistake kind: how many
    it answered and fixed. :func:`db.actions.replay.record_replay_result` adds to it in the transaction
    that stores the answer (an answer is stored once, so it is counted once)."""

    __tablename__ = "replay_tallies"

    scenario: Mapped[str] = mapped_column(String(100), primary_key=True)
    contestant_id: Mapped[int] = mapped_column(ForeignKey("contestants.id"), primary_key=True)
    kind: Mapped[str] = mapped_column(String(KIND_CHARS), primary_key=True)
    answered: Mapped[int] = mapped_column(Integer, default=0)
    fixed: Mapped[int] = mapped_column(Integer, default=0)


class ReplayPairTally(Base):
    """Replay's pairwise outcomes kept on write: two contestants' answers to one correction, counted per
    scenario, pair (``first_id`` < ``second_id``) and whether each fixed it. Storing an answer adds one to
    the cell of its pair with every earlier answer to the same correction (the correction's row is locked
    first, so two answers stored at once still meet)."""

    __tablename__ = "replay_pair_tallies"

    scenario: Mapped[str] = mapped_column(String(100), primary_key=True)
    first_id: Mapped[int] = mapped_column(ForeignKey("contestants.id"), primary_key=True)
    second_id: Mapped[int] = mapped_column(ForeignKey("contestants.id"), primary_key=True)
    first_fixed: Mapped[bool] = mapped_column(Boolean, primary_key=True)
    second_fixed: Mapped[bool] = mapped_column(Boolean, primary_key=True)
    count: Mapped[int] = mapped_column(Integer, default=0)
