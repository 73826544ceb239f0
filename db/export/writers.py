"""Writers that stream Arrow tables into JSONL, Parquet or CSV, page by page, onto binary streams.

Writers take any binary stream (a temporary file that is renamed into place when the export succeeds,
or a ``BytesIO`` for downloads), so the on-disk and in-memory exports are the same code.

CSV is the one format a spreadsheet opens and runs: its text cells that start like a formula get a
leading ``'`` (:func:`csv_cell`; the dataset card says so). JSONL and Parquet keep every text exact.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from typing import IO, Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from db.export.schema import SCHEMAS, TABLE_COLUMNS


def json_default(value: Any) -> Any:
    """Datetimes as ISO 8601 text; nothing else non-JSON is expected (fail loudly if it is)."""
    if isinstance(value, dt.datetime):
        return value.isoformat()
    raise TypeError(f"not JSON-serialisable: {type(value).__name__}")


# OWASP, "CSV Injection": a spreadsheet runs a cell that starts with one of these as a formula
# (=HYPERLINK(...), +cmd|..., -2+3, @SUM(...), or one of them after a tab or a carriage return).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
TEXT_MARK = "'"  # what OWASP prefixes: spreadsheets then read the cell as text


def neutralised(text: str) -> str:
    """``text`` with a leading ``'`` when it starts like a formula (:data:`FORMULA_STARTS`), else as is."""
    return TEXT_MARK + text if text.startswith(FORMULA_STARTS) else text


def csv_cell(value: Any) -> Any:
    """CSV cells: booleans as true/false, null as empty, datetimes ISO 8601, nested values as JSON,
    and text that starts like a formula with a leading ``'`` (:func:`neutralised`). Numbers stay
    numbers (a float -1.5 is written ``-1.5``): only text is ever marked."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, list | dict):
        return neutralised(json.dumps(value, ensure_ascii=False, default=json_default))
    if isinstance(value, str):
        return neutralised(value)
    return value


class RecordWriter(Protocol):
    def write(self, table: pa.Table) -> None: ...
    def close(self) -> None: ...


class JsonlWriter:
    """One JSON object per line (UTF-8, not ASCII-escaped: dialogues are text people read)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream

    def write(self, table: pa.Table) -> None:
        if table.num_rows:
            lines = [json.dumps(r, ensure_ascii=False, default=json_default) for r in table.to_pylist()]
            self._stream.write(("\n".join(lines) + "\n").encode())

    def close(self) -> None:
        self._stream.flush()


class ParquetWriter:
    """One row group per chunk, with the explicit schema of the record kind (zstd-compressed)."""

    def __init__(self, stream: IO[bytes], schema: pa.Schema) -> None:
        self._schema = schema
        self._writer = pq.ParquetWriter(stream, schema, compression="zstd")

    def write(self, table: pa.Table) -> None:
        if table.num_rows:
            self._writer.write_table(table.cast(self._schema))

    def close(self) -> None:
        self._writer.close()


class CsvWriter:
    """A CSV with a header row; nested values (turn lists) are JSON text in their cell, and every cell
    goes through :func:`csv_cell` (formula-like text is neutralised: the one CSV writer of the project)."""

    def __init__(self, stream: IO[bytes], columns: tuple[str, ...]) -> None:
        self._text = io.TextIOWrapper(stream, encoding="utf-8", newline="", write_through=True)
        self._csv = csv.writer(self._text)
        self._columns = columns
        self._csv.writerow(columns)

    def write(self, table: pa.Table) -> None:
        columns = [table.column(c).to_pylist() for c in self._columns]
        self._csv.writerows([csv_cell(v) for v in row] for row in zip(*columns, strict=True))

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
    """One CSV writer per flat table (see :data:`db.export.records.TABLE_COLUMNS`)."""
    return {name: CsvWriter(streams[name], TABLE_COLUMNS[name]) for name in TABLE_COLUMNS}
