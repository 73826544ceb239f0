"""Replay results: one model's answer to a correction a person wrote (``python -m scenarios replay``).

The items come from the export's ``replay`` view (:mod:`db.export.replay`); what this module keeps is
the outcome per correction and contestant. One row per pair: :func:`record_replay_result` stores the
first answer and refuses (returns False) a second, whichever process sends it, so a replay run twice,
or two runs at once, store each answer once. The same transaction adds the answer to ``replay_tallies``
(per scenario, contestant and the corrected reply's mistake kind) and its pairwise outcomes with the
earlier answers to the same correction to ``replay_pair_tallies``, so the boards read those roll-ups.
:func:`replayed_corrections` tells a run what a model has already answered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.boards.side_kinds import kinds_of
from db.checks import contestant_by_slug, require_choice, retry_read
from db.engine import read_session, write_session
from db.errors import NotFound
from db.models import (
    GRADER_LABELS,
    REPLAY_OUTCOMES,
    Base,
    Battle,
    Contestant,
    Conversation,
    Correction,
    Message,
    ReplayPairTally,
    ReplayResult,
    ReplayTally,
)

__all__ = ["record_replay_result", "replayed_corrections"]


@retry_read
def replayed_corrections(engine: Engine, *, contestant: str) -> frozenset[int]:
    """The ids of the corrections ``contestant`` (a slug) has answered; empty for an unknown slug."""
    query = (select(ReplayResult.correction_id)
             .join(Contestant, Contestant.id == ReplayResult.contestant_id)
             .where(Contestant.slug == contestant))
    with read_session(engine) as session:
        return frozenset(session.scalars(query))


def record_replay_result(
    engine: Engine,
    *,
    correction_id: int,
    contestant: str,
    outcome: str,
    content: str,
    grader_label: str | None = None,
    grader_mistakes: Sequence[str] | None = None,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    total_ms: float | None = None,
    finish_reason: str | None = None,
) -> bool:
    """Store ``contestant``'s answer to the correction; False (nothing written) when it already has one.
    :class:`NotFound` for an unknown correction or contestant, :class:`InvalidInput` for an outcome or
    label outside the schema's."""
    require_choice(outcome, REPLAY_OUTCOMES, what="replay outcome")
    if grader_label is not None:
        require_choice(grader_label, GRADER_LABELS, what="grader label")
    try:
        with write_session(engine) as session:
            model = contestant_by_slug(session, contestant)
            # One answer to a correction at a time (PostgreSQL; SQLite's writer is exclusive), so two
            # answers stored at once each see the other for the pair tallies.
            session.execute(select(Correction.id).where(Correction.id == correction_id).with_for_update())
            found = session.execute(
                select(Conversation.contestant_id, Battle.scenario, Message.grader_label,
                       Message.grader_mistakes)
                .join(Correction, Correction.conversation_id == Conversation.id)
                .join(Battle, Battle.id == Correction.battle_id)
                .join(Message, Message.id == Correction.faulty_message_id)
                .where(Correction.id == correction_id)).first()
            if found is None:
                raise NotFound(f"no correction {correction_id}")
            session.add(ReplayResult(
                correction_id=correction_id, contestant_id=model.id, own=found[0] == model.id,
                scenario=found[1], outcome=outcome, content=content, grader_label=grader_label,
                grader_mistakes=list(grader_mistakes) if grader_mistakes is not None else None,
                prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, total_ms=total_ms,
                finish_reason=finish_reason))
            session.flush()  # a second answer fails here, before anything is counted
            _count(session, scenario=found[1], contestant_id=model.id, kinds=kinds_of(found[2], found[3]),
                   fixed=outcome == "fixed")
            _pair(session, correction_id=correction_id, scenario=found[1], contestant_id=model.id,
                  fixed=outcome == "fixed")
    except IntegrityError:
        if correction_id in replayed_corrections(engine, contestant=contestant):
            return False  # answered already (here, or by a run in another process)
        raise
    return True


def _upsert(session: Session, table: type[Base], keys: dict[str, Any], adds: dict[str, int]) -> None:
    """Add ``adds`` to the row of ``table`` at ``keys`` (inserted with them when missing): concurrent
    writers add, never overwrite."""
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    columns = table.__table__.c
    statement = insert(table).values(**keys, **adds)
    session.execute(statement.on_conflict_do_update(
        index_elements=list(keys), set_={name: columns[name] + n for name, n in adds.items()}))


def _count(session: Session, *, scenario: str, contestant_id: int, kinds: Sequence[str], fixed: bool) -> None:
    """Add one answer to ``replay_tallies`` under each kind."""
    for kind in kinds:
        _upsert(session, ReplayTally, {"scenario": scenario, "contestant_id": contestant_id, "kind": kind},
                {"answered": 1, "fixed": int(fixed)})


def _pair(session: Session, *, correction_id: int, scenario: str, contestant_id: int, fixed: bool) -> None:
    """Add the new answer's pairwise outcome with every other stored answer to the same correction to
    ``replay_pair_tallies`` (the caller holds the correction's row lock)."""
    others = session.execute(select(ReplayResult.contestant_id, ReplayResult.outcome).where(
        ReplayResult.correction_id == correction_id, ReplayResult.contestant_id != contestant_id)).all()
    for other_id, other_outcome in others:
        mine, theirs = (contestant_id, fixed), (other_id, other_outcome == "fixed")
        (first_id, first_fixed), (second_id, second_fixed) = sorted((mine, theirs))
        _upsert(session, ReplayPairTally,
                {"scenario": scenario, "first_id": first_id, "second_id": second_id,
                 "first_fixed": first_fixed, "second_fixed": second_fixed}, {"count": 1})
