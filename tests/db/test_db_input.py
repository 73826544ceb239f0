"""Bad input is one typed error (:class:`InvalidInput`) on SQLite and PostgreSQL, and writes nothing.

Each case was a probe on the old code: SQLite stored NUL bytes, lone surrogates, 64-bit numbers, NaN
timings and 10M-character texts as they were; PostgreSQL failed with an untyped driver ``DataError``
(its SQL in the message), after ``open_battle`` had already committed an empty battle.
"""

from __future__ import annotations

import math

import pytest
from sqlalchemy import Engine, func, insert, select

from db import actions
from db.errors import InvalidInput, NotFound
from db.models import Battle, Message, Visitor


def _count(engine: Engine, model: type) -> int:
    with engine.connect() as conn:
        return int(conn.scalar(select(func.count()).select_from(model)) or 0)


BAD_TEXT = {
    "nul": "hello\x00world",
    "lone surrogate": "caf\udce9",
    "ten million characters": "x" * 10_000_000,
}


@pytest.mark.parametrize("text", BAD_TEXT.values(), ids=BAD_TEXT.keys())
def test_bad_text_is_refused_everywhere_and_writes_nothing(arena, engine: Engine, text: str) -> None:
    battle = arena.battle(replies=False)
    before = _count(engine, Message)
    for kind in ("request", "correction", "reply"):
        with pytest.raises(InvalidInput):
            actions.append_message(
                engine, battle_id=battle.id, side="a", kind=kind, content=text, max_chars=100_000_000
            )
    with pytest.raises(InvalidInput):
        actions.append_message(
            engine, battle_id=battle.id, side="a", kind="reply", content="", error=text, max_chars=100
        )
    with pytest.raises(InvalidInput):
        actions.get_or_create_visitor(engine, anon_id=text)
    with pytest.raises(InvalidInput):
        actions.flag_battle(engine, battle_id=battle.id, reason=text)
    with pytest.raises(InvalidInput):
        actions.upsert_contestant(engine, slug="m9", display_name="M9", family=text)
    assert _count(engine, Message) == before


def test_bad_first_message_leaves_no_empty_battle(arena, engine: Engine) -> None:
    battles = _count(engine, Battle)
    with pytest.raises(InvalidInput):
        actions.open_battle(
            engine, mode="anonymous", scenario="calendar", contestant_a="m1", contestant_b="m2",
            first_request="hello\x00world",
        )
    assert _count(engine, Battle) == battles


def test_battle_and_first_message_commit_together(arena, engine: Engine) -> None:
    battle = actions.open_battle(
        engine, mode="anonymous", scenario="calendar", contestant_a="m1", contestant_b="m2",
        first_request="Add a meeting", first_request_sides=("b",),
    )
    stored = actions.get_battle(engine, battle_id=battle.id)
    assert [m.content for m in stored.sides["b"].messages] == ["Add a meeting"]
    assert stored.sides["a"].messages == ()


@pytest.mark.parametrize(
    "fields",
    [
        {"prompt_tokens": 2**31},
        {"completion_tokens": 2**63},
        {"completion_tokens": -1},
        {"ttft_ms": math.nan},
        {"total_ms": math.inf},
        {"ttft_ms": -math.inf},
        {"replaces_message_id": 2**40},
        {"finish_reason": "s" * 33},
    ],
    ids=lambda f: next(iter(f)),
)
def test_out_of_range_numbers_are_refused(arena, engine: Engine, fields: dict) -> None:
    battle = arena.battle(replies=False)
    actions.append_message(engine, battle_id=battle.id, side="a", kind="request", content="hi")
    with pytest.raises(InvalidInput):
        actions.append_message(engine, battle_id=battle.id, side="a", kind="reply", content="ok", **fields)
    assert len(actions.get_battle(engine, battle_id=battle.id).sides["a"].messages) == 1


def test_bad_ids_are_typed_errors(arena, engine: Engine) -> None:
    with pytest.raises(InvalidInput):
        actions.get_battle(engine, battle_id="abc\x00")
    with pytest.raises(NotFound):
        actions.get_battle(engine, battle_id="no-such-battle")
    with pytest.raises(InvalidInput):
        actions.resume_open_battle(engine, visitor_id=2**31)
    battle = arena.battle()
    with pytest.raises(InvalidInput):
        actions.record_vote(engine, battle_id=battle.id, choice="a", visitor_id=2**40)
    with pytest.raises(InvalidInput):
        actions.set_correction_outcome(engine, correction_id=2**33, outcome="fixed", judged_by="person")
    with pytest.raises(InvalidInput):
        actions.set_grader_label(engine, message_id=-5, label="correct")
    with pytest.raises(InvalidInput):
        actions.open_battle(
            engine, mode="anonymous", scenario="calendar", contestant_a="m1", contestant_b="m2",
            visitor_id=2**31,
        )


@pytest.mark.postgres
def test_postgres_driver_data_errors_are_typed(pg_schema_url: str) -> None:
    """Behind the checks: a write that bypasses them still fails with InvalidInput, not DataError."""
    from db.engine import make_engine
    from db.models import Base

    engine = make_engine(pg_schema_url)
    Base.metadata.create_all(engine)
    try:
        with pytest.raises(InvalidInput), engine.begin() as conn:
            conn.execute(insert(Visitor).values(anon_id="a\x00b"))
        with pytest.raises(InvalidInput), engine.begin() as conn:
            conn.execute(select(Visitor).where(Visitor.id == 2**40))
    finally:
        engine.dispose()
