"""The per-address daily vote cap, counted inside the vote's transaction (issue 39: the probe saw 12
cookies racing from one address with a cap of 4 store 12 votes, as the cap was checked only before)."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import Engine, func, select

from db import actions
from db.actions.votes import VoteRequest, apply_votes
from db.engine import make_engine
from db.errors import InvalidInput, VoteRefused
from db.models import Vote


def _votes(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.scalar(select(func.count()).select_from(Vote)) or 0)


def _cookies(arena, engine: Engine, n: int, address: str = "net-1") -> list[tuple[int, str]]:  # noqa: ANN001
    """``n`` visitors (a new cookie each) from one address, each with a battle ready for its vote."""
    visitors = [actions.get_or_create_visitor(engine, anon_id=f"{address}-cookie-{i}",
                                              address_hash=address).id
                for i in range(n)]
    return [(v, arena.battle(visitor_id=v).id) for v in visitors]


def test_twelve_cookies_racing_from_one_address_store_four_votes(arena, engine: Engine, db_url: str) -> None:
    """Each racer has its own engine (its own connection pool and group committer), as replicas would."""
    racers = _cookies(arena, engine, 12)
    go = threading.Barrier(len(racers))
    outcomes: list[str] = []

    def vote(visitor: int, battle_id: str) -> None:
        own = make_engine(db_url)
        try:
            go.wait(timeout=30)
            actions.record_vote(own, battle_id=battle_id, choice="a", visitor_id=visitor, daily_cap=1,
                                address_hash="net-1", address_cap=4)
            outcomes.append("ok")
        except VoteRefused as refused:
            outcomes.append(refused.reason)
        finally:
            own.dispose()

    threads = [threading.Thread(target=vote, args=racer) for racer in racers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(outcomes) == ["address_cap"] * 8 + ["ok"] * 4
    assert _votes(engine) == 4


def test_a_batch_counts_its_own_votes_per_address(arena, engine: Engine) -> None:
    racers = _cookies(arena, engine, 3) + _cookies(arena, engine, 1, "net-2")
    requests = [VoteRequest(b, "a", v, address_hash="net-1" if i < 3 else "net-2", address_cap=2)
                for i, (v, b) in enumerate(racers)]
    with engine.begin() as conn:
        outcomes = apply_votes(conn, requests)
    reasons = [getattr(o, "reason", "ok") for o in outcomes]
    assert reasons == ["ok", "ok", "address_cap", "ok"]


def test_other_addresses_and_uncapped_votes_are_untouched(arena, engine: Engine) -> None:
    (v1, b1), (v2, b2) = _cookies(arena, engine, 2)
    (far, b3), = _cookies(arena, engine, 1, "net-2")
    actions.record_vote(engine, battle_id=b1, choice="a", visitor_id=v1, address_hash="net-1", address_cap=1)
    with pytest.raises(VoteRefused) as refused:
        actions.record_vote(engine, battle_id=b2, choice="a", visitor_id=v2, address_hash="net-1",
                            address_cap=1)
    assert refused.value.reason == "address_cap"
    actions.record_vote(engine, battle_id=b3, choice="b", visitor_id=far, address_hash="net-2", address_cap=1)
    actions.record_vote(engine, battle_id=b2, choice="a", visitor_id=v2)  # no cap asked: no refusal
    assert _votes(engine) == 3
    with pytest.raises(InvalidInput):
        actions.record_vote(engine, battle_id=b2, choice="a", address_cap=1)
