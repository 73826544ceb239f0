"""The export's read transaction (db.export.source): the ADBC connection's URI, its snapshot, errors,
and values the Arrow conversion could mangle, on SQLite and PostgreSQL."""

from __future__ import annotations

import io
from dataclasses import replace
from typing import Any

import pyarrow.parquet as pq
import pytest
from sqlalchemy import Engine, func, literal_column, null, select, text, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from db import actions
from db.export import EXPORT_DEFAULTS, export_bytes
from db.export.read import count_battles, snapshot
from db.export.source import libpq_uri
from db.models import Message

SALT = "pepper-for-tests"


def test_libpq_uri_keeps_password_port_and_query_and_drops_the_driver() -> None:
    url = make_url("postgresql+psycopg://arena:p%40ss%3Aw%2Fd%20+%25@db.example:6543/arena"
                   "?options=-csearch_path%3Dt_1%20-c%20synchronous_commit%3Doff&sslmode=require")
    assert libpq_uri(url) == ("postgresql://arena:p%40ss%3Aw%2Fd%20%2B%25@db.example:6543/arena"
                              "?options=-csearch_path%3Dt_1%20-c%20synchronous_commit%3Doff&sslmode=require")
    assert libpq_uri(make_url("postgresql://postgres@127.0.0.1/test")) == "postgresql://postgres@127.0.0.1/test"
    assert libpq_uri(make_url("postgresql+psycopg://u@[::1]:5432/d")) == "postgresql://u@[::1]:5432/d"


def test_the_snapshot_ignores_writes_committed_during_the_read(arena: Any, engine: Engine) -> None:
    """Every query of one export sees the database as at its first read, whatever visitors do meanwhile."""
    first = arena.battle()
    actions.record_vote(engine, battle_id=first.id, choice="a")
    with snapshot(engine) as src:
        assert count_battles(src, EXPORT_DEFAULTS) == 1
        later = arena.battle()
        actions.record_vote(engine, battle_id=later.id, choice="b")
        assert count_battles(src, EXPORT_DEFAULTS) == 1
        assert src.rows(select(func.count()).select_from(Message))[0][0] == 4
        if engine.dialect.name == "postgresql":
            assert src.rows(select(func.current_setting("transaction_isolation"))) == [("repeatable read",)]
    with snapshot(engine) as src:
        assert count_battles(src, EXPORT_DEFAULTS) == 2


def test_a_failing_query_raises_a_database_error(engine: Engine) -> None:
    """A server error after rows were sent surfaces as SQLAlchemy's error, and the source still closes."""
    rows = ("generate_series(1, 6000) AS x" if engine.dialect.name == "postgresql" else
            "(WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM s WHERE x < 6000) SELECT x FROM s)")
    failing = select(literal_column("1 / (x - 3000)").label("v")).select_from(text(rows))
    with snapshot(engine) as src:
        if engine.dialect.name == "postgresql":
            with pytest.raises(DBAPIError, match="division by zero"):
                src.rows(failing)
        else:  # SQLite divides by zero to NULL
            assert sum(v is None for (v,) in src.rows(failing)) == 1


def test_nulls_empty_text_unicode_and_json_lists_round_trip(arena: Any, engine: Engine) -> None:
    battle = arena.battle("m1", "m2")
    mistakes = {"hi": null(), "ok": None}  # SQL NULL, and JSON null (the JSON type's None)
    contents = ["NA", "two\nlines \"q\", ü 日本 ✓", "x"]
    for content, grader in zip(contents, ([], ["wrong_year", "naïve\n✓"], ["chatty"]), strict=True):
        actions.append_message(engine, battle_id=battle.id, side="a", kind="request", content=content)
        actions.append_message(engine, battle_id=battle.id, side="a", kind="reply", content=content,
                               grader_label="garbage", grader_mistakes=grader)
    with engine.begin() as conn:
        for content, value in mistakes.items():
            conn.execute(update(Message).where(Message.content == content).values(grader_mistakes=value))
        conn.execute(update(Message).where(Message.content == "x", Message.kind == "reply").values(error=""))
    blob = export_bytes(engine, fmt="parquet", salt=SALT, filters=replace(EXPORT_DEFAULTS, include_open=True))
    (record,) = pq.read_table(io.BytesIO(blob.data)).to_pylist()
    side_a = next(s for s in record["sides"] if s["side"] == "a")
    got = [(m["content"], m["grader_mistakes"], m["error"], m["ttft_ms"]) for m in side_a["messages"]]
    awkward = contents[1]
    assert got == [
        ("hi", None, None, None), ("ok", None, None, None), ("NA", None, None, None), ("NA", [], None, None),
        (awkward, None, None, None), (awkward, ["wrong_year", "naïve\n✓"], None, None),
        ("x", None, None, None), ("x", ["chatty"], "error", None),  # an error is exported as its category
    ]
    assert side_a["system_prompt"] == "" and side_a["params"] == "{}"
