"""The generation ledger (db.generations): a generation counts from its start, interrupted or not, and
the in-flight limits hold across processes, with a lease that a crashed process cannot keep for ever."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine

from db import actions
from db.errors import InvalidInput
from db.models import utcnow

WORKER = Path(__file__).with_name("generation_worker.py")
LEASE = dt.timedelta(minutes=5)


def _limits(per_minute: int = 20, address: int = 80, in_flight: int = 8,
            lease: dt.timedelta = LEASE) -> actions.GenerationLimits:
    return actions.GenerationLimits(per_minute_visitor=per_minute, per_minute_address=address,
                                    in_flight_address=in_flight, lease=lease)


def _visitor(engine: Engine, name: str, address: str = "net-1") -> int:
    return actions.get_or_create_visitor(engine, anon_id=name, address_hash=address).id


def _start(engine: Engine, visitor: int, battle: str, sides: str = "ab", network: str = "net-1",
           **limits: object) -> tuple[int, ...]:
    return actions.start_generations(engine, visitor_id=visitor, address_hash=network, battle_id=battle,
                                     sides=tuple(sides), limits=_limits(**limits))  # type: ignore[arg-type]


def test_a_generation_counts_from_its_start(arena, engine: Engine) -> None:
    start = utcnow() - dt.timedelta(seconds=1)
    me = _visitor(engine, "me")
    battle = arena.battle(visitor_id=me, replies=False)
    held = _start(engine, me, battle.id)
    assert len(held) == 2
    assert actions.count_generations_since(engine, visitor_id=me, since=start) == 2  # nothing stored yet
    assert actions.generations_in_flight(engine, visitor_id=me) == 2
    actions.finish_generations(engine, ids=held)
    actions.finish_generations(engine, ids=held)  # idempotent
    assert actions.generations_in_flight(engine, visitor_id=me) == 0
    assert actions.count_generations_since(engine, visitor_id=me, since=start) == 2, "finished, still counted"
    assert actions.count_generations_since(engine, address_hash="net-1", since=start) == 2
    assert actions.count_generations_since(engine, address_hash="net-2", since=start) == 0
    with pytest.raises(InvalidInput):
        actions.count_generations_since(engine, since=start)


def test_one_turn_in_flight_per_visitor(arena, engine: Engine) -> None:
    me, other = _visitor(engine, "me"), _visitor(engine, "other")
    battle = arena.battle(visitor_id=me, replies=False)
    held = _start(engine, me, battle.id, "a")
    with pytest.raises(actions.GenerationRefused) as refused:
        _start(engine, me, battle.id, "b")
    assert refused.value.reason == "busy"
    _start(engine, other, arena.battle(visitor_id=other, replies=False).id)  # someone else is not held up
    actions.finish_generations(engine, ids=held)
    _start(engine, me, battle.id, "b")


def test_interrupted_generations_reach_the_per_minute_limit(arena, engine: Engine) -> None:
    """The probe: 100 generations started and cut short counted 0. Now the limit refuses the 21st."""
    me = _visitor(engine, "me")
    battle = arena.battle(visitor_id=me, replies=False)
    started = 0
    for _ in range(100):
        try:
            held = _start(engine, me, battle.id, "a", per_minute=20)
        except actions.GenerationRefused as refused:
            assert refused.reason == "rate_visitor" and refused.count == 20
            break
        started += 1
        actions.finish_generations(engine, ids=held)  # cancelled at once: nothing was ever stored
    assert started == 20


def test_a_new_cookie_per_tab_shares_its_address_limits(arena, engine: Engine) -> None:
    tabs = [_visitor(engine, f"tab-{n}") for n in range(5)]
    held = [_start(engine, tab, arena.battle(visitor_id=tab, replies=False).id, in_flight=8)
            for tab in tabs[:4]]
    with pytest.raises(actions.GenerationRefused) as refused:  # 8 in flight from net-1: a fifth tab waits
        _start(engine, tabs[4], arena.battle(visitor_id=tabs[4], replies=False).id, in_flight=8)
    assert refused.value.reason == "in_flight_address" and refused.value.count == 8
    far = _visitor(engine, "far", "net-2")
    _start(engine, far, arena.battle(visitor_id=far, replies=False).id, network="net-2", in_flight=8)
    actions.finish_generations(engine, ids=held[0])
    _start(engine, tabs[4], arena.battle(visitor_id=tabs[4], replies=False).id, in_flight=8)
    # per minute from net-1: 10 started, 10 + 2 > 11
    with pytest.raises(actions.GenerationRefused) as refused:
        _start(engine, tabs[0], arena.battle(visitor_id=tabs[0], replies=False).id, in_flight=100, address=11)
    assert refused.value.reason == "rate_address" and refused.value.count == 10


def test_a_lease_frees_the_slot_of_a_generation_nobody_finished(arena, engine: Engine) -> None:
    me = _visitor(engine, "me")
    battle = arena.battle(visitor_id=me, replies=False)
    _start(engine, me, battle.id, "a", lease=dt.timedelta(milliseconds=50))
    with pytest.raises(actions.GenerationRefused):
        _start(engine, me, battle.id, "b")
    time.sleep(0.1)
    assert actions.generations_in_flight(engine, visitor_id=me) == 0
    _start(engine, me, battle.id, "b")


def _workers(db_url: str, specs: list[tuple[int, str, str, str, int]]) -> list[str]:
    """Start one process per spec (visitor, address, battle, sides, cap), release them together, and
    return each one's answer line."""
    procs = [
        subprocess.Popen([sys.executable, str(WORKER), db_url, str(v), a, b, s, str(c)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for v, a, b, s, c in specs
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        answers = [proc.communicate(timeout=60)[0].strip() for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    return answers


def test_the_address_cap_holds_across_racing_processes(arena, engine: Engine, db_url: str) -> None:
    visitors = [_visitor(engine, f"proc-{n}") for n in range(6)]
    battles = [arena.battle(visitor_id=v, replies=False).id for v in visitors]
    answers = _workers(db_url, [(v, "net-1", b, "a", 3) for v, b in zip(visitors, battles, strict=True)])
    assert sorted(a.split()[0] for a in answers) == ["ok"] * 3 + ["refused"] * 3, answers
    assert all(a == "refused in_flight_address" for a in answers if a.startswith("refused"))
    assert actions.generations_in_flight(engine, address_hash="net-1") == 3


def test_a_turn_started_by_another_process_holds_this_one(arena, engine: Engine, db_url: str) -> None:
    me = _visitor(engine, "me")
    battle = arena.battle(visitor_id=me, replies=False)
    assert _workers(db_url, [(me, "net-1", battle.id, "ab", 8)])[0].startswith("ok")  # and it died
    with pytest.raises(actions.GenerationRefused) as refused:
        _start(engine, me, battle.id)
    assert refused.value.reason == "busy"


def test_a_sides_generations_count_for_its_retry_cap(arena, engine: Engine) -> None:
    me = _visitor(engine, "me")
    battle = arena.battle(visitor_id=me, replies=False)
    for _ in range(3):  # three retries of side a, each cut short before a reply was stored
        actions.finish_generations(engine, ids=_start(engine, me, battle.id, "a"))
    actions.finish_generations(engine, ids=_start(engine, me, battle.id, "b"))
    assert actions.count_side_generations(engine, battle_id=battle.id, side="a") == 3
    assert actions.count_side_generations(engine, battle_id=battle.id, side="b") == 1
    with pytest.raises(InvalidInput):
        actions.count_side_generations(engine, battle_id=battle.id, side="c")
