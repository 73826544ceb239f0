"""The dataset export: dialogues, flat tables, the battles file and training views, plus a card.

Views (``VIEWS``): ``dialogues`` (the default: one nested record per battle; with CSV, flat tables in a
folder), ``battles`` (one row per counted vote, the file ``python -m ranking fit --battles`` reads;
:mod:`db.export.pairwise`), ``preferences`` and ``corrections`` (training views).

Python API (what the web app's Dataset page and scripts call; everything keyword-only):

- :func:`export_battles` writes to ``out`` (a file; for flat CSV tables a folder) and a ``README.md``
  dataset card beside it, and returns an :class:`ExportResult` with the counts.
- :func:`export_bytes` produces the same export in memory for a download (CSV tables come zipped with
  the card); meant for filtered sets, it holds the whole output in memory.

Both stream: battles are read in keyset pages of ``chunk_size`` (see :mod:`db.export.read`) and each
page is written before the next is read. Files are written under a temporary name and renamed into
place on success, so a failed export never leaves a half-written file under the real name.
The command line (``python -m db export``) lives in :mod:`db.export.cli`.
"""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO

import pyarrow as pa
from sqlalchemy import Engine

from db.export.card import DEFAULT_LICENCE, is_ours, render_card
from db.export.filters import EXPORT_DEFAULTS, ExportError, check, describe_filters
from db.export.pairwise import count_pairs, iter_pairs
from db.export.read import DEFAULT_CHUNK_SIZE, chunk_reader, count_selection, read_ahead
from db.export.records import battle_table, correction_records, flat_tables, preference_records
from db.export.replay import pages_reader, replay_filters
from db.export.replay_pairs import count_replay_pairs, iter_replay_pairs
from db.export.schema import SCHEMAS, TABLE_COLUMNS
from db.export.source import Source
from db.export.writers import CsvWriter, RecordWriter, record_writer, table_writers
from db.vote_filters import VoteFilters

FORMATS = ("jsonl", "parquet", "csv")
VIEWS = ("dialogues", "battles", "preferences", "corrections", "replay", "replay_pairs")
DEFAULT_VIEW = "dialogues"
SUFFIX = {"jsonl": ".jsonl", "parquet": ".parquet", "csv": ".csv"}
MEDIA_TYPES = {"jsonl": "application/x-ndjson", "parquet": "application/vnd.apache.parquet",
               "csv": "text/csv", "zip": "application/zip"}
Progress = Callable[[int, int], None]  # (battles done, battles selected)


@dataclass(frozen=True, slots=True)
class ExportCounts:
    """Source rows the export covered, and the records (or table rows) it wrote."""

    battles: int = 0
    conversations: int = 0
    messages: int = 0
    corrections: int = 0
    votes: int = 0
    records: int = 0


@dataclass(frozen=True, slots=True)
class ExportResult:
    fmt: str
    view: str
    counts: ExportCounts
    files: dict[str, int] = field(default_factory=dict)  # path -> rows written
    card: str | None = None  # path of README.md


@dataclass(frozen=True, slots=True)
class ExportBlob:
    """An in-memory export for a download button: bytes, a file name, a media type and the card."""

    data: bytes
    filename: str
    media_type: str
    counts: ExportCounts
    card: str


def _check(fmt: str, view: str, salt: str) -> None:
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    if view not in VIEWS:
        raise ExportError(f"unknown view {view!r}: use one of {', '.join(VIEWS)}")
    if view == "replay" and fmt == "csv":
        raise ExportError("the replay view is written as jsonl or parquet (it is read back by "
                          "`python -m scenarios replay --from`)")
    if not salt:
        raise ExportError("hash salt is empty: visitor ids are exported only as salted hashes")


def _flat(fmt: str, view: str) -> bool:
    """Whether the export is the flat CSV tables (one file per table, in a folder)."""
    return fmt == "csv" and view == "dialogues"


def _stream(
    engine: Engine,
    *,
    fmt: str,
    view: str,
    filters: VoteFilters,
    salt: str,
    chunk_size: int,
    progress: Progress | None,
    streams: dict[str, IO[bytes]],
) -> tuple[ExportCounts, dict[str, int]]:
    """Read page by page and write each page: the one loop behind every export. Returns rows per stream."""
    if view == "battles":
        return _stream_pairs(engine, fmt=fmt, filters=filters, salt=salt, chunk_size=chunk_size,
                             progress=progress, stream=streams[view])
    if view == "replay_pairs":
        narrowed = replay_filters(filters)
        written = _stream_rows(
            engine, fmt=fmt, view=view, stream=streams[view], progress=progress,
            count=lambda src: count_replay_pairs(src, narrowed),
            pages=lambda src: iter_replay_pairs(src, filters=narrowed, chunk_size=chunk_size))
        return ExportCounts(records=written), {view: written}
    if view == "replay":
        return _stream_replay(engine, fmt=fmt, filters=filters, salt=salt, chunk_size=chunk_size,
                              progress=progress, stream=streams[view])
    flat = _flat(fmt, view)
    rows = {name: 0 for name in streams}
    totals = dict.fromkeys(("battles", "conversations", "messages", "corrections", "votes"), 0)
    count, pages = chunk_reader(filters=filters, salt=salt, chunk_size=chunk_size)
    with read_ahead(engine, count=count, pages=pages) as (selected, chunks):
        if progress is not None:
            progress(0, selected)
        tables: dict[str, CsvWriter] = table_writers(streams) if flat else {}
        writer: RecordWriter | None = None if flat else record_writer(fmt, view, streams[view])
        for chunk in chunks:
            for name in totals:
                totals[name] += getattr(chunk, name).num_rows
            if flat:
                for name, page in flat_tables(chunk).items():
                    tables[name].write(page)
                    rows[name] += page.num_rows
            else:
                assert writer is not None
                page = battle_table(chunk)
                if view != "dialogues":
                    shaped = preference_records if view == "preferences" else correction_records
                    page = pa.Table.from_pylist(list(shaped(page.to_pylist())), schema=SCHEMAS[view])
                writer.write(page)
                rows[view] += page.num_rows
            if progress is not None:
                progress(totals["battles"], selected)
        for table in tables.values():
            table.close()
        if writer is not None:
            writer.close()
    written = sum(rows.values()) if not flat else rows["battles"]
    return ExportCounts(**totals, records=written), rows


def _stream_pairs(
    engine: Engine,
    *,
    fmt: str,
    filters: VoteFilters,
    salt: str,
    chunk_size: int,
    progress: Progress | None,
    stream: IO[bytes],
) -> tuple[ExportCounts, dict[str, int]]:
    """The ``battles`` view: one row per counted vote (a battle has at most one vote)."""
    written = _stream_rows(
        engine, fmt=fmt, view="battles", stream=stream, progress=progress,
        count=lambda src: count_pairs(src, filters),
        pages=lambda src: iter_pairs(src, filters=filters, salt=salt, chunk_size=chunk_size))
    return ExportCounts(battles=written, votes=written, records=written), {"battles": written}


def _stream_replay(
    engine: Engine,
    *,
    fmt: str,
    filters: VoteFilters,
    salt: str,
    chunk_size: int,
    progress: Progress | None,
    stream: IO[bytes],
) -> tuple[ExportCounts, dict[str, int]]:
    """The ``replay`` view: one row per correction event of a battle that counts (db.export.replay)."""
    narrowed = replay_filters(filters)
    written = _stream_rows(
        engine, fmt=fmt, view="replay", stream=stream, progress=progress,
        count=lambda src: count_selection(src, narrowed)["corrections"],
        pages=pages_reader(filters=narrowed, salt=salt, chunk_size=chunk_size))
    return ExportCounts(corrections=written, records=written), {"replay": written}


def _stream_rows(
    engine: Engine,
    *,
    fmt: str,
    view: str,
    stream: IO[bytes],
    progress: Progress | None,
    count: Callable[[Source], int],
    pages: Callable[[Source], Iterator[pa.Table]],
) -> int:
    """Write a view whose pages are ready-made tables of ``SCHEMAS[view]``, one row per record; progress
    counts rows against ``count``. Returns the rows written."""
    written = 0
    writer = record_writer(fmt, view, stream)
    with read_ahead(engine, count=count, pages=pages) as (selected, read):
        if progress is not None:
            progress(0, selected)
        for page in read:
            writer.write(page)
            written += page.num_rows
            if progress is not None:
                progress(written, selected)
    writer.close()
    return written


def _stream_names(fmt: str, view: str) -> list[str]:
    return list(TABLE_COLUMNS) if _flat(fmt, view) else [view]


def _file_name(fmt: str, view: str, name: str) -> str:
    return f"{name}{SUFFIX[fmt]}" if _flat(fmt, view) else f"{view}{SUFFIX[fmt]}"


def _targets(out: Path, fmt: str, view: str) -> tuple[dict[str, Path], Path]:
    """Where each stream goes and where the card goes; refuses paths that cannot work, before any work."""
    if _flat(fmt, view):
        if out.exists() and not out.is_dir():
            raise ExportError(f"--out {out} is a file; CSV tables need a folder")
        folder = out
        targets = {name: out / f"{name}.csv" for name in TABLE_COLUMNS}
    else:
        if out.is_dir():
            raise ExportError(f"--out {out} is a folder; {fmt} needs a file path")
        folder = out.parent
        targets = {view: out}
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"cannot create folder {folder}: {exc.strerror or exc}") from exc
    if not os.access(folder, os.W_OK):
        raise ExportError(f"folder {folder} is not writable")
    card = folder / "README.md"
    if card in targets.values():
        raise ExportError("--out must not be named README.md: the dataset card goes there")
    if card.exists() and not is_ours(card.read_text(encoding="utf-8", errors="replace")):
        raise ExportError(f"{card} exists and is not a dataset card; export into another folder")
    return targets, card


@contextmanager
def _atomic_files(targets: dict[str, Path]) -> Iterator[dict[str, IO[bytes]]]:
    """Binary streams on ``<target>.partial`` files, renamed onto the targets only if the block succeeds."""
    partial = {name: path.with_name(path.name + ".partial") for name, path in targets.items()}
    try:
        with ExitStack() as stack:
            streams: dict[str, IO[bytes]] = {
                name: stack.enter_context(open(path, "wb")) for name, path in partial.items()
            }
            yield streams
        for name, path in partial.items():
            os.replace(path, targets[name])
    finally:
        for path in partial.values():
            path.unlink(missing_ok=True)


def export_battles(
    engine: Engine,
    *,
    fmt: str,
    out: str | Path,
    salt: str,
    filters: VoteFilters | None = None,
    view: str = DEFAULT_VIEW,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    progress: Progress | None = None,
    licence: str | None = None,
) -> ExportResult:
    """Export the battles ``filters`` select to ``out`` in ``fmt``, with a README.md card beside it.

    ``view``: ``dialogues`` (nested records; with ``fmt='csv'`` flat tables in the folder ``out``),
    ``battles`` (one row per counted vote, for ``ranking fit``), ``preferences`` or ``corrections``
    (training views); every view but the flat tables is one file. ``filters`` (a :class:`db.VoteFilters`)
    default to :data:`~db.export.filters.EXPORT_DEFAULTS`. ``salt`` hashes visitor ids (the CLI
    passes ``settings.hash_salt``). Raises :class:`ExportError` for bad input, before writing anything.
    """
    filters = check(filters or EXPORT_DEFAULTS)
    _check(fmt, view, salt)
    targets, card_path = _targets(Path(out), fmt, view)
    with _atomic_files(targets) as streams:
        counts, rows = _stream(engine, fmt=fmt, view=view, filters=filters, salt=salt,
                               chunk_size=chunk_size, progress=progress, streams=streams)
    card = _card(fmt, view, {targets[name].name: n for name, n in rows.items()}, counts, filters, licence)
    card_path.write_text(card, encoding="utf-8")
    return ExportResult(fmt=fmt, view=view, counts=counts,
                        files={str(targets[name]): n for name, n in rows.items()}, card=str(card_path))


def _card(fmt: str, view: str, files: dict[str, int], counts: ExportCounts, filters: VoteFilters,
          licence: str | None) -> str:
    """The dataset card of an export that wrote ``files`` (name -> rows)."""
    shown = {"votes": counts.votes} if view == "battles" else {
        k: v for k, v in asdict(counts).items() if k != "records"}
    return render_card(fmt=fmt, view=view, files=files, counts=shown, filters=describe_filters(filters),
                       licence=licence or DEFAULT_LICENCE)


def _zip_entry(name: str) -> zipfile.ZipInfo:
    """A zip entry with a fixed date, so the same data always zips to the same bytes."""
    entry = zipfile.ZipInfo(name, date_time=(2000, 1, 1, 0, 0, 0))
    entry.compress_type = zipfile.ZIP_DEFLATED
    return entry


def export_bytes(
    engine: Engine,
    *,
    fmt: str,
    salt: str,
    filters: VoteFilters | None = None,
    view: str = DEFAULT_VIEW,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    progress: Progress | None = None,
    licence: str | None = None,
) -> ExportBlob:
    """The same export as :func:`export_battles`, in memory, for a download of a filtered set.

    Flat CSV tables come as one zip (``<table>.csv`` files and ``README.md``); every other export is
    the single file's bytes, with the card as text in :attr:`ExportBlob.card`.
    """
    filters = check(filters or EXPORT_DEFAULTS)
    _check(fmt, view, salt)
    buffers = {name: io.BytesIO() for name in _stream_names(fmt, view)}
    counts, rows = _stream(engine, fmt=fmt, view=view, filters=filters, salt=salt,
                           chunk_size=chunk_size, progress=progress, streams=dict(buffers))
    card = _card(fmt, view, {_file_name(fmt, view, name): n for name, n in rows.items()}, counts, filters,
                 licence)
    if len(buffers) == 1:
        (name, buffer), = buffers.items()
        return ExportBlob(data=buffer.getvalue(), filename=_file_name(fmt, view, name),
                          media_type=MEDIA_TYPES[fmt], counts=counts, card=card)
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, buffer in buffers.items():
            archive.writestr(_zip_entry(_file_name(fmt, view, name)), buffer.getvalue())
        archive.writestr(_zip_entry("README.md"), card)
    return ExportBlob(data=zipped.getvalue(), filename="fixit-arena-tables.zip",
                      media_type=MEDIA_TYPES["zip"], counts=counts, card=card)
