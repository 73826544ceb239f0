"""The optional daily vote cap, in the database: counted per UTC day inside the vote's transaction, so
neither a second tab, a group-committed batch nor another process or replica gets a visitor past it."""

from __future__ import annotations

import datetime as dt
import threading
from collections import Counter

import pytest
from sqlalchemy import Engine, func, select, update

from db import actions
from db.actions.votes import VoteRequest, apply_votes, utc_day_start
from db.engine import make_engine, writer_gate
from db.errors import VoteRefused
from db.models import Battle, Vote, utcnow
from db.seed import prepare_vote_battles, seed_contestants
from db.views import VoteView


def _votes(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.scalar(select(func.count()).select_from(Vote)) or 0)


def _status(engine: Engine, battle_id: str) -> str:
    with engine.connect() as conn:
        return str(conn.scalar(select(Battle.status).where(Battle.id == battle_id)))


def test_utc_day_start() -> None:
    late = dt.datetime(2026, 12, 1, 23, 59, 59, tzinfo=dt.timezone(dt.timedelta(hours=-5)))  # 04:59 UTC
    assert utc_day_start(late) == dt.datetime(2026, 12, 2, tzinfo=dt.UTC)


def test_the_vote_past_the_cap_is_refused_and_writes_nothing(arena, engine: Engine) -> None:
    me = actions.get_or_create_visitor(engine, anon_id="me").id
    other = actions.get_or_create_visitor(engine, anon_id="other").id
    battles = [arena.battle(visitor_id=me) for _ in range(3)]
    for battle in battles[:2]:
        actions.record_vote(engine, battle_id=battle.id, choice="a", visitor_id=me, daily_cap=2)
    with pytest.raises(VoteRefused) as refused:
        actions.record_vote(engine, battle_id=battles[2].id, choice="b", visitor_id=me, daily_cap=2)
    assert refused.value.reason == "daily_cap"
    assert _votes(engine) == 2 and _status(engine, battles[2].id) == "open", "nothing was written"
    # Another visitor has their own allowance; without a cap the same visitor may vote.
    theirs = arena.battle(visitor_id=other)
    actions.record_vote(engine, battle_id=theirs.id, choice="a", visitor_id=other, daily_cap=2)
    actions.record_vote(engine, battle_id=battles[2].id, choice="b", visitor_id=me)
    assert _votes(engine) == 4


def test_yesterdays_votes_do_not_count(arena, engine: Engine) -> None:
    me = actions.get_or_create_visitor(engine, anon_id="me").id
    first, second = arena.battle(visitor_id=me), arena.battle(visitor_id=me)
    actions.record_vote(engine, battle_id=first.id, choice="a", visitor_id=me, daily_cap=1)
    yesterday = utc_day_start(utcnow()) - dt.timedelta(seconds=1)
    with engine.begin() as conn:
        conn.execute(update(Vote).values(created_at=yesterday))
    actions.record_vote(engine, battle_id=second.id, choice="a", visitor_id=me, daily_cap=1)
    assert _votes(engine) == 2


def test_the_owner_is_the_voter_when_no_visitor_is_given(arena, engine: Engine) -> None:
    me = actions.get_or_create_visitor(engine, anon_id="me").id
    first, second = arena.battle(visitor_id=me), arena.battle(visitor_id=me)
    actions.record_vote(engine, battle_id=first.id, choice="a", daily_cap=1)
    with pytest.raises(VoteRefused, match="1 votes today"):
        actions.record_vote(engine, battle_id=second.id, choice="a", daily_cap=1)


def test_a_batch_counts_its_own_votes(arena, engine: Engine) -> None:
    """Group commit puts concurrent votes in one transaction: the cap counts the ones before it there."""
    me = actions.get_or_create_visitor(engine, anon_id="me").id
    other = actions.get_or_create_visitor(engine, anon_id="other").id
    mine = [arena.battle(visitor_id=me).id for _ in range(4)]
    theirs = arena.battle(visitor_id=other).id
    actions.record_vote(engine, battle_id=mine[0], choice="a", visitor_id=me, daily_cap=3)
    requests = [VoteRequest(b, "a", me, daily_cap=3) for b in mine[1:]]
    requests.append(VoteRequest(theirs, "b", other, daily_cap=1))
    with writer_gate(engine), engine.begin() as conn:
        outcomes = apply_votes(conn, requests)
    refused = [o.reason for o in outcomes if isinstance(o, VoteRefused)]
    assert refused == ["daily_cap"] and isinstance(outcomes[2], VoteRefused)
    assert isinstance(outcomes[3], VoteView), "another visitor's vote in the batch goes ahead"
    assert _votes(engine) == 4 and _status(engine, mine[3]) == "open"


def test_counts_per_visitor_and_per_address(arena, engine: Engine) -> None:
    start = utcnow() - dt.timedelta(seconds=1)
    one = actions.get_or_create_visitor(engine, anon_id="one", address_hash="net-1").id
    two = actions.get_or_create_visitor(engine, anon_id="two", address_hash="net-1").id
    far = actions.get_or_create_visitor(engine, anon_id="far", address_hash="net-2").id
    for visitor in (one, one, two, far):
        battle = arena.battle(visitor_id=visitor)
        actions.record_vote(engine, battle_id=battle.id, choice="a", visitor_id=visitor)
    assert actions.count_votes_since(engine, visitor_id=one, since=start) == 2
    assert actions.count_votes_since(engine, address_hash="net-1", since=start) == 3
    assert actions.count_votes_since(engine, address_hash="net-2", since=start) == 1
    assert actions.count_votes_since(engine, visitor_id=one, since=utcnow() + dt.timedelta(seconds=1)) == 0


@pytest.mark.parametrize("shared_engine", [True, False], ids=["one-engine", "engine-per-thread"])
def test_racing_votes_of_one_visitor_never_pass_the_cap(db_url: str, engine: Engine,
                                                         shared_engine: bool) -> None:
    """Eight threads vote at once for one visitor on sixteen battles, cap 5: exactly five are stored.
    One shared engine batches them (group commit); an engine per thread stands for separate processes
    or replicas, each with its own connections, racing in the database itself."""
    ids = prepare_vote_battles(engine, seed_contestants(engine, 4, prefix="c"), 16)
    me = actions.get_or_create_visitor(engine, anon_id="me").id
    engines = [engine if shared_engine else make_engine(db_url) for _ in range(8)]
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def voter(worker: int) -> None:
        barrier.wait()
        for battle_id in ids[worker::8]:
            try:
                actions.record_vote(engines[worker], battle_id=battle_id, choice="a", visitor_id=me,
                                    daily_cap=5)
                result = "stored"
            except VoteRefused as refused:
                result = refused.reason
            with lock:
                outcomes[result] += 1

    threads = [threading.Thread(target=voter, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    if not shared_engine:
        for own in engines:
            own.dispose()
    assert outcomes == Counter({"stored": 5, "daily_cap": 11})
    assert _votes(engine) == 5
    with engine.connect() as conn:
        assert conn.scalar(select(func.count()).where(Battle.status == "voted")) == 5
