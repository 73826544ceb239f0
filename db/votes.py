"""Recording the one vote of a battle: the hottest write path, so it is written in SQLAlchemy Core.

The happy path is three statements in one transaction: one ``SELECT`` that locks the battle row and
gathers every fact the rules need (status, owner, both contestants, whether each side replied, whether
anyone sent a correction), one ``INSERT`` and one ``UPDATE``. The ORM version of the same rules took
about twice as long per vote; see ``python -m db bench``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, and_, bindparam, exists, insert, select, update
from sqlalchemy.exc import IntegrityError

from db.checks import require_choice
from db.engine import WRITE_OPTION, writer_gate
from db.errors import NotFound, VoteRefused
from db.models import CHOICES, Base, utcnow
from db.views import VoteView

_tables = Base.metadata.tables
_battles = _tables["battles"]
_conversations = _tables["conversations"]
_messages = _tables["messages"]
_votes = _tables["votes"]
_conv_a = _conversations.alias("conv_a")
_conv_b = _conversations.alias("conv_b")


def _replied(conv: Any) -> Any:
    m = _messages
    return exists().where(m.c.conversation_id == conv.c.id, m.c.kind == "reply", m.c.superseded.is_(False))


# Built once: constructing statements per call cost more than executing them (the cache key is cheap).
_FACTS = (
    select(
        _battles.c.status,
        _battles.c.visitor_id,
        _battles.c.revealed_before_vote,
        _battles.c.mode,
        _battles.c.scenario,
        _conv_a.c.contestant_id,
        _conv_b.c.contestant_id,
        _replied(_conv_a),
        _replied(_conv_b),
        exists().where(_tables["corrections"].c.battle_id == _battles.c.id),
    )
    .select_from(_battles)
    .outerjoin(_conv_a, and_(_conv_a.c.battle_id == _battles.c.id, _conv_a.c.side == "a"))
    .outerjoin(_conv_b, and_(_conv_b.c.battle_id == _battles.c.id, _conv_b.c.side == "b"))
    .where(_battles.c.id == bindparam("battle_id"))
    .with_for_update(of=_battles)
)
_INSERT = insert(_votes).returning(_votes.c.id)
_CLOSE = (
    update(_battles)
    .where(_battles.c.id == bindparam("b_id"))
    .values(status="voted", closed_at=bindparam("now"), updated_at=bindparam("now"))
)


def record_vote(
    engine: Engine,
    *,
    battle_id: str,
    choice: str,
    visitor_id: int | None = None,
    accept_revealed: bool = False,
) -> VoteView:
    """Record the one vote of a battle and close it.

    Refused (:class:`VoteRefused`) when the battle already has a vote, is abandoned or flagged, belongs to
    another visitor, has a side without a reply, or — unless ``accept_revealed`` — had its identities
    revealed before the vote. With ``accept_revealed=True`` such a vote is stored with ``revealed=True``
    and the leaderboard leaves it out (the web app's identity guard: "recorded but not counted").
    Two racing votes on one battle: the battle row lock (PostgreSQL) or the immediate write transaction
    (SQLite) lets exactly one through; the unique key on ``votes.battle_id`` backs that up.
    """
    require_choice(choice, CHOICES, what="choice")
    try:
        with writer_gate(engine), engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                facts = conn.execute(_FACTS, {"battle_id": battle_id}).first()
                if facts is None:
                    raise NotFound(f"no battle {battle_id!r}")
                status, owner, revealed, mode, scenario, model_a, model_b = facts[:7]
                a_replied, b_replied, corrected = facts[7:]
                if status == "voted":
                    raise VoteRefused("already_voted", "this battle already has its vote")
                if status != "open":
                    raise VoteRefused("closed", f"this battle is {status}")
                if owner is not None and visitor_id is not None and owner != visitor_id:
                    raise VoteRefused("not_owner", "this battle belongs to another visitor")
                if model_a is None or model_b is None:
                    raise VoteRefused("single_side", "a one-model chat has nothing to vote between")
                if not (a_replied and b_replied):
                    side = "a" if not a_replied else "b"
                    raise VoteRefused("not_ready", f"side {side} has not replied yet")
                if revealed and not accept_revealed:
                    raise VoteRefused("revealed", "identities were revealed before the vote")
                now = utcnow()
                voter = visitor_id if visitor_id is not None else owner
                row = {
                    "battle_id": battle_id,
                    "visitor_id": voter,
                    "choice": choice,
                    "created_at": now,
                    "model_a_id": model_a,
                    "model_b_id": model_b,
                    "mode": mode,
                    "scenario": scenario,
                    "revealed": bool(revealed),
                    "flagged": False,
                    "with_corrections": bool(corrected),
                }
                vote_id = conn.execute(_INSERT, row).scalar_one()
                conn.execute(_CLOSE, {"b_id": battle_id, "now": now})
    except IntegrityError as exc:  # a racing writer got there first (the unique key held the line)
        raise VoteRefused("already_voted", "this battle already has its vote") from exc
    return VoteView(
        id=vote_id,
        battle_id=battle_id,
        choice=choice,
        visitor_id=voter,
        created_at=now,
        revealed=bool(revealed),
        flagged=False,
    )
