"""Writers that stream export records into JSONL, Parquet or CSV, chunk by chunk, onto binary streams.

Writers take any binary stream (a temporary file that is renamed into place when the export succeeds,
or a ``BytesIO`` for downloads), so the on-disk and in-memory exports are the same code. The Arrow
schemas are explicit: an empty export still has the right columns, and a Parquet file's types do not
depend on which values the first chunk happened to hold.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from typing import IO, Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from db.export_records import TABLE_COLUMNS, Record

TS = pa.timestamp("us", tz="UTC")
TURN = pa.struct([("role", pa.string()), ("content", pa.string())])

MESSAGE_TYPE = pa.struct([
    ("id", pa.int64()), ("position", pa.int32()), ("role", pa.string()), ("kind", pa.string()),
    ("content", pa.string()), ("created_at", TS), ("first_try", pa.bool_()), ("superseded", pa.bool_()),
    ("ttft_ms", pa.float64()), ("total_ms", pa.float64()), ("prompt_tokens", pa.int32()),
    ("completion_tokens", pa.int32()), ("finish_reason", pa.string()), ("error", pa.string()),
    ("grader_label", pa.string()), ("grader_mistakes", pa.list_(pa.string())),
])
CORRECTION_TYPE = pa.struct([
    ("id", pa.int64()), ("faulty_message_id", pa.int64()), ("feedback_message_id", pa.int64()),
    ("next_reply_message_id", pa.int64()), ("outcome", pa.string()), ("judged_by", pa.string()),
    ("created_at", TS), ("judged_at", TS),
])
SIDE_TYPE = pa.struct([
    ("side", pa.string()), ("contestant", pa.string()), ("contestant_name", pa.string()),
    ("family", pa.string()), ("system_prompt", pa.string()), ("params", pa.string()),
    ("messages", pa.list_(MESSAGE_TYPE)), ("corrections", pa.list_(CORRECTION_TYPE)),
])
VOTE_TYPE = pa.struct([
    ("choice", pa.string()), ("created_at", TS), ("visitor", pa.string()), ("revealed", pa.bool_()),
    ("flagged", pa.bool_()), ("with_corrections", pa.bool_()), ("counted", pa.bool_()),
])

SCHEMAS: dict[str, pa.Schema] = {
    "battles": pa.schema([
        ("battle_id", pa.string()), ("created_at", TS), ("updated_at", TS), ("closed_at", TS),
        ("mode", pa.string()), ("scenario", pa.string()), ("status", pa.string()),
        ("revealed_before_vote", pa.bool_()), ("revealed_at", TS), ("visitor", pa.string()),
        ("vote", VOTE_TYPE), ("sides", pa.list_(SIDE_TYPE)),
    ]),
    "preferences": pa.schema([
        ("battle_id", pa.string()), ("scenario", pa.string()), ("mode", pa.string()), ("created_at", TS),
        ("visitor", pa.string()), ("prompt", pa.list_(TURN)), ("chosen", pa.list_(TURN)),
        ("rejected", pa.list_(TURN)), ("chosen_model", pa.string()), ("rejected_model", pa.string()),
        ("with_corrections", pa.bool_()),
    ]),
    "corrections": pa.schema([
        ("battle_id", pa.string()), ("correction_id", pa.int64()), ("scenario", pa.string()),
        ("mode", pa.string()), ("side", pa.string()), ("model", pa.string()), ("created_at", TS),
        ("context", pa.list_(TURN)), ("faulty_reply", pa.string()), ("feedback", pa.string()),
        ("next_reply", pa.string()), ("outcome", pa.string()), ("judged_by", pa.string()),
        ("faulty_grader_label", pa.string()), ("next_grader_label", pa.string()),
    ]),
}


def json_default(value: Any) -> Any:
    """Datetimes as ISO 8601 text; nothing else non-JSON is expected (fail loudly if it is)."""
    if isinstance(value, dt.datetime):
        return value.isoformat()
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


def csv_cell(value: Any) -> Any:
    """CSV cells: booleans as true/false, null as empty, datetimes ISO 8601, nested values as JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False, default=json_default)
    return value


class RecordWriter(Protocol):
    def write(self, records: list[Record]) -> None: ...
    def close(self) -> None: ...


class JsonlWriter:
    """One JSON object per line (UTF-8, not ASCII-escaped: dialogues are text people read)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream

    def write(self, records: list[Record]) -> None:
        if records:
            lines = [json.dumps(r, ensure_ascii=False, default=json_default) for r in records]
            self._stream.write(("\n".join(lines) + "\n").encode())

    def close(self) -> None:
        self._stream.flush()


class ParquetWriter:
    """One row group per chunk, with the explicit schema of the record kind (zstd-compressed)."""

    def __init__(self, stream: IO[bytes], schema: pa.Schema) -> None:
        self._schema = schema
        self._writer = pq.ParquetWriter(stream, schema, compression="zstd")

    def write(self, records: list[Record]) -> None:
        if records:
            self._writer.write_table(pa.Table.from_pylist(records, schema=self._schema))

    def close(self) -> None:
        self._writer.close()


class CsvWriter:
    """A CSV with a header row; nested values (turn lists) are JSON text in their cell."""

    def __init__(self, stream: IO[bytes], columns: tuple[str, ...]) -> None:
        self._text = io.TextIOWrapper(stream, encoding="utf-8", newline="", write_through=True)
        self._csv = csv.writer(self._text)
        self._columns = columns
        self._csv.writerow(columns)

    def write(self, records: list[Record]) -> None:
        self._csv.writerows([csv_cell(r[c]) for c in self._columns] for r in records)

    def write_rows(self, rows: list[tuple[Any, ...]]) -> None:
        self._csv.writerows([csv_cell(v) for v in row] for row in rows)

    def close(self) -> None:
        self._text.flush()
        self._text.detach()  # leave the underlying stream open: its owner closes or reads it


def record_writer(fmt: str, kind: str, stream: IO[bytes]) -> RecordWriter:
    """The writer of format ``fmt`` for records of ``kind`` (battles, preferences, corrections)."""
    if fmt == "jsonl":
        return JsonlWriter(stream)
    if fmt == "parquet":
        return ParquetWriter(stream, SCHEMAS[kind])
    if fmt == "csv":
        return CsvWriter(stream, tuple(SCHEMAS[kind].names))
    raise ValueError(f"unknown format {fmt!r}")


def table_writers(streams: dict[str, IO[bytes]]) -> dict[str, CsvWriter]:
    """One CSV writer per flat table (see :data:`db.export_records.TABLE_COLUMNS`)."""
    return {name: CsvWriter(streams[name], TABLE_COLUMNS[name]) for name in TABLE_COLUMNS}
