"""Counts behind the visitor limits: every generation counts, per visitor and per address hash."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import Engine

from db import actions
from db.errors import InvalidInput
from db.models import utcnow


def test_battles_count_per_visitor_and_per_address(arena, engine: Engine) -> None:
    """(Generations are counted by the ledger: tests/db/test_generation_ledger.py.)"""
    start = utcnow() - dt.timedelta(seconds=1)
    one = actions.get_or_create_visitor(engine, anon_id="one", address_hash="net-1")
    two = actions.get_or_create_visitor(engine, anon_id="two", address_hash="net-1")  # same address, new id
    other = actions.get_or_create_visitor(engine, anon_id="three", address_hash="net-2")
    arena.battle(visitor_id=one.id)
    arena.battle(visitor_id=two.id)
    arena.battle(visitor_id=other.id)
    assert actions.count_battles_since(engine, address_hash="net-1", since=start) == 2
    assert actions.count_battles_since(engine, visitor_id=one.id, since=start) == 1
    later = utcnow() + dt.timedelta(seconds=1)
    assert actions.count_battles_since(engine, address_hash="net-1", since=later) == 0
    with pytest.raises(InvalidInput):
        actions.count_battles_since(engine, since=start)
