"""Counts behind the visitor limits: every generation counts, per visitor and per address hash."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import Engine

from db import repository as repo
from db.errors import InvalidInput
from db.models import utcnow


def test_generations_count_every_side_retry_and_failure(arena, engine: Engine) -> None:
    start = utcnow() - dt.timedelta(seconds=1)
    one = repo.get_or_create_visitor(engine, anon_id="one", address_hash="net-1")
    two = repo.get_or_create_visitor(engine, anon_id="two", address_hash="net-1")  # same address, new id
    other = repo.get_or_create_visitor(engine, anon_id="three", address_hash="net-2")
    battle = arena.battle(visitor_id=one.id)  # a request and a reply on each side: 2 generations
    first_a = battle.sides["a"].messages[-1]
    repo.append_message(engine, battle_id=battle.id, side="a", kind="reply", content="again",
                        replaces_message_id=first_a.id)  # a retry
    repo.append_message(engine, battle_id=battle.id, side="b", kind="reply", content="", error="boom")
    arena.battle(visitor_id=two.id)
    arena.battle(visitor_id=other.id)
    assert repo.count_generations_since(engine, visitor_id=one.id, since=start) == 4
    assert repo.count_generations_since(engine, visitor_id=two.id, since=start) == 2
    assert repo.count_generations_since(engine, address_hash="net-1", since=start) == 6
    assert repo.count_battles_since(engine, address_hash="net-1", since=start) == 2
    later = utcnow() + dt.timedelta(seconds=1)
    assert repo.count_generations_since(engine, visitor_id=one.id, since=later) == 0
    with pytest.raises(InvalidInput):
        repo.count_generations_since(engine, since=start)
    with pytest.raises(InvalidInput):
        repo.count_generations_since(engine, since=start, visitor_id=one.id, address_hash="net-1")
