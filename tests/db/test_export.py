"""The export on SQLite and PostgreSQL: data written through ``db.actions``, every format and view
read back (json, pyarrow, csv) and checked, hashing, filters, chunking and refusals."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import threading
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from sqlalchemy import Engine, func, select, update
from sqlalchemy.exc import DBAPIError

from db import InvalidInput, VoteFilters, actions
from db.engine import make_engine
from db.export import (
    EXPORT_DEFAULTS,
    ExportError,
    export_battles,
    export_bytes,
    visitor_hash,
)
from db.export.card import MARKER, is_ours
from db.export.read import chunk_reader, read_ahead
from db.models import Battle, Conversation, Correction, Message, Vote, utcnow

SALT = "pepper-for-tests"
T0 = dt.datetime(2026, 11, 1, 12, 0, tzinfo=dt.UTC)


@dataclass
class World:
    """Ids of what :func:`world` wrote, for the assertions."""

    b1: str  # calendar, visitor-1, correction fixed on side a, retried reply on side b, vote a
    b2: str  # calendar, visitor-2, vote b
    b3: str  # free chat, direct (one side), no vote
    b4: str  # calendar, tie
    b5: str  # calendar, revealed before the vote, vote a (recorded, not counted)
    address_hash: str
    correction_id: int


def _set_created(engine: Engine, battle_id: str, when: dt.datetime) -> None:
    with engine.begin() as conn:
        conn.execute(update(Battle).where(Battle.id == battle_id).values(created_at=when))


@pytest.fixture
def world(arena: Any, engine: Engine) -> World:
    address_hash = actions.hash_address("10.1.2.3", salt=SALT)
    v1 = actions.get_or_create_visitor(engine, anon_id="visitor-1", address_hash=address_hash)
    v2 = actions.get_or_create_visitor(engine, anon_id="visitor-2")

    b1 = actions.open_battle(engine, mode="anonymous", scenario="calendar", contestant_a="m1",
                             contestant_b="m2",
                             visitor_id=v1.id, system_prompt="You write calendar API calls.",
                             params_a={"temperature": 0.7})
    for side in ("a", "b"):
        actions.append_message(engine, battle_id=b1.id, side=side, kind="request",
                               content="Lunch with Ana friday")
    faulty = actions.append_message(engine, battle_id=b1.id, side="a", kind="reply",
                                    content="create(day=fri)",
                                    grader_label="garbage", grader_mistakes=["bad date"],
                                    grader_notes=["date written as fri, expected a form like 2026-11-06"],
                                    ttft_ms=12.5,
                                    total_ms=80.0, prompt_tokens=30, completion_tokens=7,
                                    finish_reason="stop")
    first_b = actions.append_message(engine, battle_id=b1.id, side="b", kind="reply", content="oops",
                                     error=None)
    actions.append_message(engine, battle_id=b1.id, side="b", kind="reply",
                           content="create(date='2026-11-06')",
                           replaces_message_id=first_b.id, grader_label="correct")
    corr = actions.record_correction(engine, battle_id=b1.id, side="a", content="Use an ISO date.")
    actions.append_message(engine, battle_id=b1.id, side="a", kind="reply",
                           content="create(date='2026-11-06')")
    actions.set_correction_outcome(engine, correction_id=corr.id, outcome="fixed", judged_by="person")
    actions.record_vote(engine, battle_id=b1.id, choice="a", visitor_id=v1.id)
    assert corr.faulty_message_id == faulty.id

    b2 = arena.battle("m2", "m3", visitor_id=v2.id)
    actions.record_vote(engine, battle_id=b2.id, choice="b")
    b3 = arena.battle("m3", None, mode="direct", scenario="free")
    actions.abandon_battle(engine, battle_id=b3.id)  # closed: open battles are not exported by default
    b4 = arena.battle("m1", "m3")
    actions.record_vote(engine, battle_id=b4.id, choice="tie")
    b5 = arena.battle("m1", "m2")
    actions.mark_revealed(engine, battle_id=b5.id)
    actions.record_vote(engine, battle_id=b5.id, choice="a", accept_revealed=True)

    for i, battle_id in enumerate((b1.id, b2.id, b3.id, b4.id, b5.id)):
        _set_created(engine, battle_id, T0 + dt.timedelta(days=i))
    return World(b1=b1.id, b2=b2.id, b3=b3.id, b4=b4.id, b5=b5.id, address_hash=address_hash,
                 correction_id=corr.id)


def _count(engine: Engine, model: type) -> int:
    with engine.connect() as conn:
        return int(conn.scalar(select(func.count()).select_from(model)) or 0)


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _iso(value: Any) -> Any:
    """Parquet gives datetimes, JSONL ISO strings: normalise nested records to JSON values."""
    return json.loads(json.dumps(value, default=lambda v: v.isoformat()))


# --- nested battles ---------------------------------------------------------------------------------------


def test_jsonl_battles_nested_with_sides_messages_corrections_vote(world: World, engine: Engine,
                                                                    tmp_path: Path) -> None:
    result = export_battles(engine, fmt="jsonl", out=tmp_path / "battles.jsonl", salt=SALT)
    records = _jsonl(tmp_path / "battles.jsonl")
    assert [r["battle_id"] for r in records] == [world.b1, world.b2, world.b3, world.b4, world.b5]
    assert result.counts.battles == 5 and result.counts.records == 5
    assert result.counts.messages == _count(engine, Message) == 21
    assert result.counts.corrections == 1 and result.counts.votes == 4

    b1 = records[0]
    assert b1["created_at"] == T0.isoformat() and b1["status"] == "voted" and b1["mode"] == "anonymous"
    assert b1["visitor"] == visitor_hash("visitor-1", salt=SALT)
    assert b1["vote"]["choice"] == "a" and b1["vote"]["counted"] is True
    assert b1["vote"]["with_corrections"] is True and b1["vote"]["visitor"] == b1["visitor"]
    side_a, side_b = b1["sides"]
    assert (side_a["side"], side_a["contestant"], side_b["contestant"]) == ("a", "m1", "m2")
    assert side_a["system_prompt"] == "You write calendar API calls."
    assert json.loads(side_a["params"]) == {"temperature": 0.7} and json.loads(side_b["params"]) == {}
    assert [(m["kind"], m["content"]) for m in side_a["messages"]] == [
        ("request", "Lunch with Ana friday"), ("reply", "create(day=fri)"),
        ("correction", "Use an ISO date."), ("reply", "create(date='2026-11-06')"),
    ]
    faulty = side_a["messages"][1]
    assert faulty["grader_label"] == "garbage" and faulty["grader_mistakes"] == ["bad date"]
    assert faulty["grader_notes"] == ["date written as fri, expected a form like 2026-11-06"]
    assert side_a["messages"][3]["grader_notes"] is None  # not graded: no words
    assert (faulty["ttft_ms"], faulty["completion_tokens"], faulty["first_try"]) == (12.5, 7, True)
    (corr,) = side_a["corrections"]
    assert corr["id"] == world.correction_id and corr["outcome"] == "fixed" and corr["judged_by"] == "person"
    assert corr["faulty_message_id"] == faulty["id"]
    assert corr["feedback_message_id"] == side_a["messages"][2]["id"]
    assert corr["next_reply_message_id"] == side_a["messages"][3]["id"]
    assert [m["superseded"] for m in side_b["messages"]] == [False, True, False]
    assert side_b["corrections"] == []

    direct = records[2]
    assert [s["side"] for s in direct["sides"]] == ["a"] and direct["vote"] is None
    assert direct["visitor"] is None and direct["scenario"] == "free"
    revealed = records[4]
    assert revealed["revealed_before_vote"] is True and revealed["vote"]["counted"] is False


def test_parquet_holds_the_same_records_as_jsonl(world: World, engine: Engine, tmp_path: Path) -> None:
    export_battles(engine, fmt="jsonl", out=tmp_path / "j" / "battles.jsonl", salt=SALT)
    result = export_battles(engine, fmt="parquet", out=tmp_path / "p" / "battles.parquet", salt=SALT,
                            chunk_size=2)
    table = pq.read_table(tmp_path / "p" / "battles.parquet")
    assert table.num_rows == 5 and result.files == {str(tmp_path / "p" / "battles.parquet"): 5}
    assert str(table.schema.field("created_at").type) == "timestamp[us, tz=UTC]"
    assert _iso(table.to_pylist()) == _jsonl(tmp_path / "j" / "battles.jsonl")
    assert not list(tmp_path.glob("**/*.partial"))


def test_csv_tables_one_file_per_table(world: World, engine: Engine, tmp_path: Path) -> None:
    out = tmp_path / "tables"
    result = export_battles(engine, fmt="csv", out=out, salt=SALT, chunk_size=2)
    read = {name: list(csv.DictReader((out / f"{name}.csv").open(encoding="utf-8", newline="")))
            for name in ("battles", "conversations", "messages", "corrections", "votes")}
    for name, model in (("battles", Battle), ("conversations", Conversation), ("messages", Message),
                        ("corrections", Correction), ("votes", Vote)):
        assert len(read[name]) == _count(engine, model), name
        assert result.files[str(out / f"{name}.csv")] == len(read[name])
    battles = {row["id"]: row for row in read["battles"]}
    assert battles[world.b1]["visitor"] == visitor_hash("visitor-1", salt=SALT)
    assert battles[world.b3]["visitor"] == "" and battles[world.b5]["revealed_before_vote"] == "true"
    reply = next(m for m in read["messages"] if m["content"] == "create(day=fri)")
    assert json.loads(reply["grader_mistakes"]) == ["bad date"] and reply["ttft_ms"] == "12.5"
    assert json.loads(reply["grader_notes"]) == ["date written as fri, expected a form like 2026-11-06"]
    (corr,) = read["corrections"]
    assert int(corr["id"]) == world.correction_id and corr["outcome"] == "fixed"
    votes = {v["battle_id"]: v for v in read["votes"]}
    assert votes[world.b4]["choice"] == "tie" and votes[world.b5]["counted"] == "false"
    card = (out / "README.md").read_text(encoding="utf-8")
    assert is_ours(card) and MARKER in card and "| `messages.csv` | 21 |" in card and "- votes: 4" in card
    assert "Licence" in card and "- `messages.csv:conversation_id`: " in card


# --- training views ---------------------------------------------------------------------------------------


def test_preferences_view_from_counted_decisive_votes(world: World, engine: Engine, tmp_path: Path) -> None:
    result = export_battles(engine, fmt="jsonl", out=tmp_path / "prefs.jsonl", salt=SALT, view="preferences")
    rows = _jsonl(tmp_path / "prefs.jsonl")
    assert [r["battle_id"] for r in rows] == [world.b1, world.b2]  # tie, revealed, single side: out
    assert result.counts.records == 2 and result.counts.battles == 5
    first = rows[0]
    assert first["prompt"] == [
        {"role": "system", "content": "You write calendar API calls."},
        {"role": "user", "content": "Lunch with Ana friday"},
    ]
    assert first["chosen"] == [
        {"role": "assistant", "content": "create(day=fri)"},
        {"role": "user", "content": "Use an ISO date."},
        {"role": "assistant", "content": "create(date='2026-11-06')"},
    ]
    assert first["rejected"] == [{"role": "assistant", "content": "create(date='2026-11-06')"}]  # not "oops"
    assert (first["chosen_model"], first["rejected_model"]) == ("m1", "m2")
    second = rows[1]
    assert (second["chosen_model"], second["rejected_model"]) == ("m3", "m2")
    # identical conversations on both sides: everything is shared prompt, nothing left to prefer
    assert second["chosen"] == second["rejected"] == [] and len(second["prompt"]) == 2

    export_battles(engine, fmt="parquet", out=tmp_path / "p" / "prefs.parquet", salt=SALT, view="preferences")
    assert _iso(pq.read_table(tmp_path / "p" / "prefs.parquet").to_pylist()) == rows


def test_corrections_view_context_faulty_feedback_next_outcome(world: World, engine: Engine,
                                                                tmp_path: Path) -> None:
    export_battles(engine, fmt="csv", out=tmp_path / "corr.csv", salt=SALT, view="corrections")
    (row,) = list(csv.DictReader((tmp_path / "corr.csv").open(encoding="utf-8", newline="")))
    assert row["battle_id"] == world.b1 and row["side"] == "a" and row["model"] == "m1"
    assert json.loads(row["context"]) == [
        {"role": "system", "content": "You write calendar API calls."},
        {"role": "user", "content": "Lunch with Ana friday"},
    ]
    assert (row["faulty_reply"], row["feedback"], row["next_reply"]) == (
        "create(day=fri)", "Use an ISO date.", "create(date='2026-11-06')")
    assert (row["outcome"], row["judged_by"], row["faulty_grader_label"]) == ("fixed", "person", "garbage")
    table = export_bytes(engine, fmt="parquet", salt=SALT, view="corrections")
    (rec,) = pq.read_table(io.BytesIO(table.data)).to_pylist()
    assert rec["next_reply"] == row["next_reply"] and rec["correction_id"] == world.correction_id


def test_corrections_view_grader_verdict_regression_recurrence_style(arena: Any, engine: Engine) -> None:
    """An automatic run (style ``hint``): wrong year -> fixed but the Fred meeting broken (regression) ->
    the year wrong again (recurrence: cleared by the reply before); the grader's verdict per correction."""
    battle = actions.open_battle(engine, mode="auto", scenario="calendar", contestant_a="m1",
                                 params_a={"temperature": 0.0,
                                        "auto": {"style": "hint", "protocol": "dialogue"}})
    actions.append_message(engine, battle_id=battle.id, side="a", kind="request", content="Lunch on the 3rd")
    actions.append_message(engine, battle_id=battle.id, side="a", kind="reply", content="add(year=2023)",
                           grader_label="partial", grader_mistakes=["wrong_year"])
    for feedback, label, mistakes in (("Fix the year.", "partial", ["regression"]),
                                      ("Keep Fred's meeting.", "partial", ["wrong_year"]),
                                      ("Fix the year.", "correct", [])):
        actions.record_correction(engine, battle_id=battle.id, side="a", content=feedback)
        actions.append_message(engine, battle_id=battle.id, side="a", kind="reply",
                               content=f"add() # {label}",
                               grader_label=label, grader_mistakes=mistakes)
    actions.record_correction(engine, battle_id=battle.id, side="a", content="Now add the reminder.")
    blob = export_bytes(engine, fmt="jsonl", salt=SALT, view="corrections",
                        filters=replace(EXPORT_DEFAULTS, include_open=True))
    rows = [json.loads(line) for line in blob.data.decode().splitlines()]
    assert [(r["grader_fixed"], r["regression"], r["recurrence"]) for r in rows] == [
        (False, True, False), (False, False, True), (True, False, False), (None, None, None)]
    assert {r["correction_style"] for r in rows} == {"hint"} and {r["mode"] for r in rows} == {"auto"}
    people = export_bytes(engine, fmt="jsonl", salt=SALT, view="corrections",
                          filters=replace(EXPORT_DEFAULTS, include_open=True, modes=("anonymous",)))
    assert people.data == b""


def test_correction_without_following_reply_has_null_next(arena: Any, engine: Engine, tmp_path: Path) -> None:
    battle = arena.battle("m1", "m2")
    actions.record_correction(engine, battle_id=battle.id, side="b", content="Wrong year.")
    blob = export_bytes(engine, fmt="jsonl", salt=SALT, view="corrections",
                        filters=replace(EXPORT_DEFAULTS, include_open=True))
    (row,) = [json.loads(line) for line in blob.data.decode().splitlines()]
    assert row["side"] == "b" and row["next_reply"] is None and row["outcome"] == "unknown"


# --- filters, chunking, hashing ---------------------------------------------------------------------------


def _ids(engine: Engine, filters: VoteFilters) -> list[str]:
    blob = export_bytes(engine, fmt="jsonl", salt=SALT, filters=filters)
    return [json.loads(line)["battle_id"] for line in blob.data.decode().splitlines()]


def test_filters_scenario_dates_corrections_only(world: World, engine: Engine) -> None:
    assert _ids(engine, replace(EXPORT_DEFAULTS, scenario="free")) == [world.b3]
    assert _ids(engine, replace(EXPORT_DEFAULTS, scenario="calendar")) == [world.b1, world.b2, world.b4,
                                                                           world.b5]
    assert _ids(engine, replace(EXPORT_DEFAULTS, since=T0 + dt.timedelta(days=1),
                                until=T0 + dt.timedelta(days=3))) == [
        world.b2, world.b3]
    assert _ids(engine, replace(EXPORT_DEFAULTS, corrections_only=True)) == [world.b1]
    assert _ids(engine, replace(EXPORT_DEFAULTS, scenario="calendar", since=T0 + dt.timedelta(days=2))) == [
        world.b4, world.b5]
    assert _ids(engine, replace(EXPORT_DEFAULTS, scenario="nope")) == []


def test_chunks_smaller_than_data_with_equal_timestamps(world: World, engine: Engine) -> None:
    """Keyset paging must neither skip nor repeat battles that share a created_at (tie-break on id)."""
    for battle_id in (world.b1, world.b2, world.b3, world.b4, world.b5):
        _set_created(engine, battle_id, T0)
    whole = export_bytes(engine, fmt="jsonl", salt=SALT, chunk_size=1000)
    calls: list[tuple[int, int]] = []
    paged = export_bytes(engine, fmt="jsonl", salt=SALT, chunk_size=2,
                         progress=lambda done, total: calls.append((done, total)))
    assert paged.data == whole.data
    ids = [json.loads(line)["battle_id"] for line in paged.data.decode().splitlines()]
    assert ids == sorted(ids) and len(set(ids)) == 5
    assert calls == [(0, 5), (2, 5), (4, 5), (5, 5)]
    one = export_bytes(engine, fmt="jsonl", salt=SALT, chunk_size=1)
    assert one.data == whole.data


def test_visitors_only_as_stable_salted_hashes(world: World, engine: Engine, tmp_path: Path) -> None:
    first = export_bytes(engine, fmt="csv", salt=SALT)
    again = export_bytes(engine, fmt="csv", salt=SALT)
    other = export_bytes(engine, fmt="csv", salt="another-salt")
    def tables(blob: bytes) -> dict[str, str]:
        with zipfile.ZipFile(io.BytesIO(blob)) as archive:
            return {n: archive.read(n).decode() for n in archive.namelist()}

    contents = tables(first.data)
    text = "".join(contents.values())
    assert set(contents) == {"battles.csv", "conversations.csv", "messages.csv", "corrections.csv",
                             "votes.csv", "README.md"}
    contents.pop("README.md")  # carries the time it was generated
    assert {n: t for n, t in tables(again.data).items() if n != "README.md"} == contents
    hashed = visitor_hash("visitor-1", salt=SALT)
    assert hashed in text and visitor_hash("visitor-1", salt="another-salt") not in text
    assert hashed != visitor_hash("visitor-1", salt="another-salt") and len(hashed) == 32
    for secret in ("visitor-1", "visitor-2", "10.1.2.3", world.address_hash):
        assert secret not in text
    for fmt in ("jsonl", "parquet"):
        blob = export_bytes(engine, fmt=fmt, salt=SALT)
        assert b"visitor-1" not in blob.data and world.address_hash.encode() not in blob.data
    assert b"visitor-1" not in other.data


def test_card_counts_filters_and_licence(world: World, engine: Engine, tmp_path: Path) -> None:
    export_battles(engine, fmt="parquet", out=tmp_path / "x.parquet", salt=SALT,
                   filters=replace(EXPORT_DEFAULTS, scenario="calendar"), licence="CC0-1.0")
    card = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert "| `x.parquet` | 4 |" in card and "- battles: 4" in card and "scenario=calendar" in card
    assert "CC0-1.0" in card and "license: cc0-1.0" in card
    assert "- `sides` (`list<item: struct<side: string" in card


# --- refusals ---------------------------------------------------------------------------------------------


def test_refusals_write_nothing(world: World, engine: Engine, tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    with pytest.raises(ExportError, match="unknown format"):
        export_battles(engine, fmt="xml", out=out, salt=SALT)
    with pytest.raises(ExportError, match="unknown view"):
        export_battles(engine, fmt="jsonl", out=out, salt=SALT, view="votes")
    with pytest.raises(ExportError, match="salt"):
        export_battles(engine, fmt="jsonl", out=out, salt="")
    with pytest.raises(InvalidInput, match="timezone-aware"):
        VoteFilters(since=dt.datetime(2026, 1, 1))
    with pytest.raises(ExportError, match="before"):
        export_battles(engine, fmt="jsonl", out=out, salt=SALT, filters=replace(EXPORT_DEFAULTS, since=T0,
                                                                                until=T0))
    with pytest.raises(ExportError, match="is a folder"):
        export_battles(engine, fmt="parquet", out=tmp_path, salt=SALT)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ExportError, match="cannot create folder"):
        export_battles(engine, fmt="jsonl", out=blocker / "sub" / "o.jsonl", salt=SALT)
    with pytest.raises(ExportError, match="is a file"):
        export_battles(engine, fmt="csv", out=blocker, salt=SALT)
    (tmp_path / "README.md").write_text("# my project\n")
    with pytest.raises(ExportError, match="not a dataset card"):
        export_battles(engine, fmt="jsonl", out=out, salt=SALT)
    assert (tmp_path / "README.md").read_text() == "# my project\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "file"]


def test_reader_thread_stops_early_and_hands_errors_over(world: World, engine: Engine,
                                                        tmp_path: Path) -> None:
    count, chunks = chunk_reader(filters=EXPORT_DEFAULTS, salt=SALT, chunk_size=1)
    with read_ahead(engine, count=count, pages=chunks) as (selected, pages):
        first = next(pages)
        assert selected == 5 and first.battles.column("id").to_pylist() == [world.b1]
    assert not [t for t in threading.enumerate() if t.name == "export-reader"]  # left early: stopped
    empty = make_engine(f"sqlite:///{tmp_path / 'no-tables.db'}")
    try:
        with pytest.raises(DBAPIError, match="no such table"):
            export_battles(empty, fmt="parquet", out=tmp_path / "out" / "x.parquet", salt=SALT)
    finally:
        empty.dispose()
    assert list((tmp_path / "out").iterdir()) == []  # no half-written file, no card


def test_battles_without_messages_and_empty_database(arena: Any, engine: Engine, tmp_path: Path) -> None:
    empty = export_battles(engine, fmt="parquet", out=tmp_path / "empty.parquet", salt=SALT)
    table = pq.read_table(tmp_path / "empty.parquet")
    assert empty.counts.battles == 0 and table.num_rows == 0 and "sides" in table.column_names
    fresh = arena.battle("m1", "m2", replies=False)
    assert export_bytes(engine, fmt="jsonl", salt=SALT).data == b"", "an open battle is not public"
    blob = export_bytes(engine, fmt="jsonl", salt=SALT, filters=replace(EXPORT_DEFAULTS, include_open=True))
    (record,) = [json.loads(line) for line in blob.data.decode().splitlines()]
    assert record["battle_id"] == fresh.id and record["vote"] is None
    assert [(s["side"], s["messages"], s["corrections"]) for s in record["sides"]] == [("a", [], []),
                                                                                     ("b", [], [])]


def test_closed_before_leaves_out_recently_closed_battles(arena: Any, engine: Engine) -> None:
    """The Dataset page's delay: only battles closed before the cut-off are public (open ones never)."""
    old = arena.battle()
    actions.record_vote(engine, battle_id=old.id, choice="a")
    cutoff = utcnow() + dt.timedelta(milliseconds=1)
    recent = arena.battle()
    with engine.begin() as conn:  # closed after the cut-off
        conn.execute(update(Battle).where(Battle.id == recent.id).values(
            status="abandoned", closed_at=cutoff + dt.timedelta(seconds=5)))
    arena.battle()  # still open
    assert _ids(engine, replace(EXPORT_DEFAULTS, closed_before=cutoff)) == [old.id]
    assert _ids(engine, EXPORT_DEFAULTS) == [old.id, recent.id]


def test_awkward_text_and_times_round_trip(arena: Any, engine: Engine) -> None:
    """Values PostgreSQL's CSV (COPY) and the readers could mangle come back as written."""
    texts = ["NA", "NULL", " . ", '"quoted", with commas', "two\nlines\r\nand a tab\t", "naïve 日本 ✓", "\\N"]
    battle = arena.battle("m1", "m2")
    for text in texts:
        actions.append_message(engine, battle_id=battle.id, side="a", kind="request", content=text)
    blob = export_bytes(engine, fmt="jsonl", salt=SALT, filters=replace(EXPORT_DEFAULTS, include_open=True))
    (record,) = [json.loads(line) for line in blob.data.decode().splitlines()]
    side_a = next(s for s in record["sides"] if s["side"] == "a")
    assert [m["content"] for m in side_a["messages"]][-len(texts):] == texts
    assert side_a["system_prompt"] == "" and side_a["messages"][-1]["error"] is None  # empty text, not null
    with engine.connect() as conn:
        stored = conn.scalar(select(Battle.created_at).where(Battle.id == battle.id))
    assert dt.datetime.fromisoformat(record["created_at"]) == stored.replace(tzinfo=dt.UTC)
