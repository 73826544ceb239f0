"""Replay results: one model's answer to a correction a person wrote (``python -m scenarios replay``).

The items come from the export's ``replay`` view (:mod:`db.export.replay`); what this module keeps is
the outcome per correction and contestant. One row per pair: :func:`record_replay_result` stores the
first answer and refuses (returns False) a second, whichever process sends it, so a replay run twice,
or two runs at once, store each answer once. :func:`replayed_corrections` tells a run what a model has
already answered.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError

from db.checks import contestant_by_slug, require_choice, retry_read
from db.engine import read_session, write_session
from db.errors import NotFound
from db.models import (
    GRADER_LABELS,
    REPLAY_OUTCOMES,
    Battle,
    Contestant,
    Conversation,
    Correction,
    ReplayResult,
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
            found = session.execute(
                select(Conversation.contestant_id, Battle.scenario)
                .join(Correction, Correction.conversation_id == Conversation.id)
                .join(Battle, Battle.id == Correction.battle_id)
                .where(Correction.id == correction_id)).first()
            if found is None:
                raise NotFound(f"no correction {correction_id}")
            session.add(ReplayResult(
                correction_id=correction_id, contestant_id=model.id, own=found[0] == model.id,
                scenario=found[1], outcome=outcome, content=content, grader_label=grader_label,
                grader_mistakes=list(grader_mistakes) if grader_mistakes is not None else None,
                prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, total_ms=total_ms,
                finish_reason=finish_reason))
    except IntegrityError:
        if correction_id in replayed_corrections(engine, contestant=contestant):
            return False  # answered already (here, or by a run in another process)
        raise
    return True
