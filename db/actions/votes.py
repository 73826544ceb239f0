"""Recording the one vote of a battle: the hottest write path, so it is written in SQLAlchemy Core.

Votes are applied in sets (:func:`apply_votes`): concurrent callers share one transaction and one disk
flush through :mod:`db.actions.group_commit`, and the whole set costs three statements — one ``SELECT`` that
locks the battle rows (in id order, so concurrent sets cannot deadlock) and gathers every fact the rules
need (status, owner, both contestants, whether each side replied, whether anyone sent a correction), one
multi-row ``INSERT`` and one ``UPDATE`` — instead of three per vote (two more for capped votes: the voters'
rows locked and their votes of the UTC day counted, see :func:`record_vote`). The rules are checked in
Python on those facts, so a refused vote writes nothing and the others go ahead. The ORM version of the
same rules took about twice as long per vote; see ``python -m db bench``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import Connection, Engine, and_, bindparam, exists, func, insert, select, text, update
from sqlalchemy.exc import IntegrityError

from db.actions.group_commit import group_committer
from db.checks import require_battle_id, require_choice, require_int
from db.engine import WRITE_OPTION, writer_gate
from db.errors import DBError, InvalidInput, NotFound, VoteRefused
from db.models import CHOICES, Base, utcnow
from db.views import VoteView

_tables = Base.metadata.tables
_battles = _tables["battles"]
_conversations = _tables["conversations"]
_messages = _tables["messages"]
_votes = _tables["votes"]
_visitors = _tables["visitors"]
_conv_a = _conversations.alias("conv_a")
_conv_b = _conversations.alias("conv_b")


def _replied(conv: Any) -> Any:
    m = _messages
    return exists().where(m.c.conversation_id == conv.c.id, m.c.kind == "reply", m.c.superseded.is_(False))


# Built once: constructing statements per call cost more than executing them (the cache key is cheap).
_FACTS = (
    select(
        _battles.c.id,
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
    .where(_battles.c.id.in_(bindparam("battle_ids", expanding=True)))
    .order_by(_battles.c.id)
    .with_for_update(of=_battles)
)
_INSERT = insert(_votes).returning(_votes.c.id, sort_by_parameter_order=True)
_CLOSE = (
    update(_battles)
    .where(_battles.c.id.in_(bindparam("closed_ids", expanding=True)))
    .values(status="voted", closed_at=bindparam("now"), updated_at=bindparam("now"))
)
# The closed battles' side roll-ups learn the closing time too (the public boards count closed sides).
_CLOSE_SIDES = (
    update(_tables["side_stats"])
    .where(_tables["side_stats"].c.battle_id.in_(bindparam("closed_ids", expanding=True)))
    .values(closed_at=bindparam("now"))
)
# Capped votes: the voters' rows are locked (PostgreSQL; SQLite's write transaction is already exclusive)
# after the battles, in id order, so two transactions for one visitor count one after the other.
_LOCK_VOTERS = (
    select(_visitors.c.id)
    .where(_visitors.c.id.in_(bindparam("voter_ids", expanding=True)))
    .order_by(_visitors.c.id)
    .with_for_update()
)
_CAST_SINCE = (
    select(_votes.c.visitor_id, func.count())
    .where(
        _votes.c.visitor_id.in_(bindparam("voter_ids", expanding=True)),
        _votes.c.created_at >= bindparam("since"),
    )
    .group_by(_votes.c.visitor_id)
)


# Per-address caps: the votes of the UTC day cast by every visitor seen from each capped address.
_CAST_SINCE_BY_ADDRESS = (
    select(_visitors.c.address_hash, func.count())
    .select_from(_votes.join(_visitors, _visitors.c.id == _votes.c.visitor_id))
    .where(
        _visitors.c.address_hash.in_(bindparam("addresses", expanding=True)),
        _votes.c.created_at >= bindparam("since"),
    )
    .group_by(_visitors.c.address_hash)
)


def utc_day_start(moment: dt.datetime) -> dt.datetime:
    """Midnight UTC of ``moment``'s UTC day: where a daily vote cap starts counting again."""
    return moment.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)


@dataclass(frozen=True)
class VoteRequest:
    """One caller's vote, as :func:`apply_votes` takes it (already validated ``choice``)."""

    battle_id: str
    choice: str
    visitor_id: int | None = None
    accept_revealed: bool = False
    daily_cap: int = 0  # votes the voter may cast per UTC day, this one included; 0: no cap
    address_hash: str | None = None  # the voter's address bucket, for ``address_cap``
    address_cap: int = 0  # votes everyone from ``address_hash`` may cast per UTC day; 0: no cap


def record_vote(
    engine: Engine,
    *,
    battle_id: str,
    choice: str,
    visitor_id: int | None = None,
    accept_revealed: bool = False,
    daily_cap: int = 0,
    address_hash: str | None = None,
    address_cap: int = 0,
) -> VoteView:
    """Record the one vote of a battle and close it; durable (committed and flushed) when it returns.

    Refused (:class:`VoteRefused`) when the battle already has a vote, is abandoned or flagged, belongs to
    another visitor, has a side without a reply, or — unless ``accept_revealed`` — had its identities
    revealed before the vote. With ``accept_revealed=True`` such a vote is stored with ``revealed=True``
    and the leaderboard leaves it out (the web app's identity guard: "recorded but not counted").
    Two racing votes on one battle: the battle row lock (PostgreSQL) or the immediate write transaction
    (SQLite) lets exactly one through — within one group transaction the earlier arrival wins; the unique
    key on ``votes.battle_id`` backs that up.

    ``daily_cap`` > 0 refuses the vote (``daily_cap``, nothing written) when the voter (``visitor_id``,
    else the battle's owner) has already cast that many votes since midnight UTC. The count is taken
    inside the write transaction, after locking the voter's row: concurrent votes of one visitor, from
    threads, processes or replicas, are counted one after another and never exceed the cap.

    ``address_cap`` > 0 does the same for everyone seen from ``address_hash`` (the voters whose visitor
    row carries that hash), counted in the same transaction after taking the address's lock (an advisory
    lock on PostgreSQL): twelve cookies racing from one address with a cap of four store four votes.

    Concurrent calls on one engine share a transaction and a flush (:mod:`db.actions.group_commit`, on unless
    turned off with :func:`db.actions.group_commit.configure_group_commit`); each vote still succeeds or is
    refused on its own.
    """
    require_choice(choice, CHOICES, what="choice")
    require_battle_id(battle_id)
    require_int(visitor_id, what="visitor id")
    require_int(daily_cap, what="daily cap")
    require_int(address_cap, what="address cap")
    if address_cap and not address_hash:
        raise InvalidInput("an address cap needs the address hash")
    request = VoteRequest(battle_id, choice, visitor_id, accept_revealed, daily_cap,
                          address_hash=address_hash, address_cap=address_cap)
    try:
        committer = group_committer(engine)
        if committer is not None:
            view: VoteView = committer.run(request, apply_many=apply_votes)
            return view
        with writer_gate(engine), engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                outcome = apply_votes(conn, [request])[0]
                if isinstance(outcome, DBError):
                    raise outcome
                return outcome
    except IntegrityError as exc:  # a racing writer got there first (the unique key held the line)
        raise VoteRefused("already_voted", "this battle already has its vote") from exc


def _refusal(facts: Any, request: VoteRequest) -> DBError | None:
    """Why this vote must be refused (checked on the locked battle's facts), or ``None``."""
    if facts is None:
        return NotFound(f"no battle {request.battle_id!r}")
    status, owner, revealed = facts.status, facts.visitor_id, facts.revealed_before_vote
    if status == "voted":
        return VoteRefused("already_voted", "this battle already has its vote")
    if status != "open":
        return VoteRefused("closed", f"this battle is {status}")
    if owner is not None and request.visitor_id is not None and owner != request.visitor_id:
        return VoteRefused("not_owner", "this battle belongs to another visitor")
    if facts.model_a is None or facts.model_b is None:
        return VoteRefused("single_side", "a one-model chat has nothing to vote between")
    if not (facts.a_replied and facts.b_replied):
        side = "a" if not facts.a_replied else "b"
        return VoteRefused("not_ready", f"side {side} has not replied yet")
    if revealed and not request.accept_revealed:
        return VoteRefused("revealed", "identities were revealed before the vote")
    return None


class _Facts(NamedTuple):
    """One row of ``_FACTS``: the locked battle and what the rules need to know about it."""

    id: str
    status: str
    visitor_id: int | None
    revealed_before_vote: bool
    mode: str
    scenario: str
    model_a: int | None
    model_b: int | None
    a_replied: bool
    b_replied: bool
    corrected: bool


def _voter(request: VoteRequest, facts: dict[str, _Facts]) -> int | None:
    fact = facts.get(request.battle_id)
    if request.visitor_id is not None:
        return request.visitor_id
    return None if fact is None else fact.visitor_id


def _cast_today(
    conn: Connection, requests: list[VoteRequest], facts: dict[str, _Facts], *, since: dt.datetime
) -> dict[int, int]:
    """Votes each capped voter has cast since ``since``, counted after locking their visitor rows."""
    voters = sorted({v for r in requests if r.daily_cap and (v := _voter(r, facts)) is not None})
    if not voters:
        return {}
    conn.execute(_LOCK_VOTERS, {"voter_ids": voters}).all()
    return {int(v): int(n) for v, n in conn.execute(_CAST_SINCE, {"voter_ids": voters, "since": since})}


def _cast_today_by_address(
    conn: Connection, requests: list[VoteRequest], *, since: dt.datetime
) -> dict[str, int]:
    """Votes cast since ``since`` from each capped address, counted after taking each address's lock."""
    addresses = sorted({r.address_hash for r in requests if r.address_cap and r.address_hash})
    if not addresses:
        return {}
    if conn.dialect.name == "postgresql":  # SQLite's write transaction is already exclusive
        for key in sorted(_lock_key(f"vote-address:{a}") for a in addresses):
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
    rows = conn.execute(_CAST_SINCE_BY_ADDRESS, {"addresses": addresses, "since": since})
    return {str(address): int(n) for address, n in rows}


def _lock_key(name: str) -> int:
    """A signed 64-bit advisory-lock key for ``name`` (stable across processes)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)


def _over_cap(
    request: VoteRequest, voter: int | None, cast_today: dict[int, int], by_address: dict[str, int]
) -> DBError | None:
    """The daily-cap refusal of this vote (the counts then include it when it passes), or None."""
    if request.daily_cap and voter is not None and cast_today.get(voter, 0) >= request.daily_cap:
        message = f"this visitor has cast {cast_today.get(voter, 0)} votes today (UTC), the daily cap"
        return VoteRefused("daily_cap", message)
    address = request.address_hash or ""
    if request.address_cap and by_address.get(address, 0) >= request.address_cap:
        return VoteRefused("address_cap", f"{by_address.get(address, 0)} votes today from this address")
    if request.daily_cap and voter is not None:
        cast_today[voter] = cast_today.get(voter, 0) + 1
    if request.address_cap:
        by_address[address] = by_address.get(address, 0) + 1
    return None


def apply_votes(conn: Connection, requests: list[VoteRequest]) -> list[VoteView | DBError]:
    """Apply a set of votes inside the caller's write transaction (no commit); one outcome per request.

    An outcome is the stored vote's view or the typed error that refuses it (returned, not raised:
    nothing of it was written). Requests for the same battle are decided in order: the first valid one
    wins, the later ones are ``already_voted``.
    """
    wanted = sorted({r.battle_id for r in requests})
    facts = {row[0]: _Facts(*row) for row in conn.execute(_FACTS, {"battle_ids": wanted})}
    now = utcnow()
    outcomes: list[VoteView | DBError | None] = []
    rows: list[dict[str, Any]] = []
    accepted: list[int] = []  # index into outcomes of each inserted row
    cast_today = _cast_today(conn, requests, facts, since=utc_day_start(now))
    by_address = _cast_today_by_address(conn, requests, since=utc_day_start(now))
    for request in requests:
        fact = facts.get(request.battle_id)
        refusal = _refusal(fact, request)
        if refusal is not None or fact is None:
            outcomes.append(refusal)
            continue
        voter = request.visitor_id if request.visitor_id is not None else fact.visitor_id
        refusal = _over_cap(request, voter, cast_today, by_address)
        if refusal is not None:
            outcomes.append(refusal)
            continue
        rows.append({
            "battle_id": request.battle_id,
            "visitor_id": voter,
            "choice": request.choice,
            "created_at": now,
            "model_a_id": fact.model_a,
            "model_b_id": fact.model_b,
            "mode": fact.mode,
            "scenario": fact.scenario,
            "revealed": bool(fact.revealed_before_vote),
            "flagged": False,
            "with_corrections": bool(fact.corrected),
        })
        accepted.append(len(outcomes))
        outcomes.append(None)
        facts[request.battle_id] = fact._replace(status="voted")  # a later request for it is refused
    if rows:
        ids = conn.execute(_INSERT, rows).scalars().all()
        closed = {"closed_ids": [row["battle_id"] for row in rows], "now": now}
        conn.execute(_CLOSE, closed)
        conn.execute(_CLOSE_SIDES, closed)
        for index, row, vote_id in zip(accepted, rows, ids, strict=True):
            outcomes[index] = VoteView(
                id=vote_id,
                battle_id=row["battle_id"],
                choice=row["choice"],
                visitor_id=row["visitor_id"],
                created_at=now,
                revealed=row["revealed"],
                flagged=False,
            )
    done = [outcome for outcome in outcomes if outcome is not None]
    if len(done) != len(requests):  # pragma: no cover - a bug, never bad input
        raise RuntimeError("a vote request got no outcome")
    return done
