"""Reading the database for the export: keyset pages of battles and everything hanging off them.

The export never loads the whole database. Battles are read in pages ordered by ``(created_at, id)``
and continued with a keyset condition (``> last key``), not ``OFFSET``, so each page costs the same
however deep into the data it is. For a page, conversations, messages, corrections and votes are read
with ``battle_id IN (page ids)``: each such query hits an index (``uq_conversations_battle_side``,
``uq_messages_conversation_position``, ``ix_corrections_battle_id``, ``uq_votes_battle_id``).

All pages are read inside one read transaction (``REPEATABLE READ`` on PostgreSQL; on SQLite a WAL
read transaction is a snapshot), so an export taken while visitors keep voting is consistent: no
battle appears without its vote because the vote landed between two pages.

Visitors are exported only as stable salted hashes of their anonymous id; network addresses (and their
hashes) are never selected at all.
"""

from __future__ import annotations

import datetime as dt
import json
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
from sqlalchemy import (
    ARRAY,
    Connection,
    Engine,
    Integer,
    Select,
    String,
    Text,
    and_,
    cast,
    func,
    literal,
    or_,
    select,
    type_coerce,
)
from sqlalchemy.types import NullType

from db.export.filters import ExportError, ExportFilters, conditions, visitor_hash
from db.export.pg_copy import copy_columns
from db.export.schema import ROWS, TS
from db.models import Battle, Contestant, Conversation, Correction, Message, Visitor, Vote

Page = TypeVar("Page")
DEFAULT_CHUNK_SIZE = 1_000  # battles per page: ~10k messages for typical battles, a few MB of rows


@dataclass(frozen=True, slots=True)
class Chunk:
    """One page of battles and all rows that belong to them, as Arrow tables (schemas: ``ROWS``).

    Battles are in page order (created_at, id) and conversations follow them (by battle, then side);
    messages and corrections are grouped by conversation id, ascending (messages by position within,
    corrections by id), which is index order and costs the database no sort. Visitor columns already
    hold salted hashes.
    """

    battles: pa.Table
    conversations: pa.Table
    messages: pa.Table
    corrections: pa.Table
    votes: pa.Table


def raw(column: Any) -> Any:
    """The column without SQLAlchemy's per-value result processing: Arrow converts whole columns faster.

    SQLite then hands over timestamps as text, booleans as 0/1 and JSON as text; PostgreSQL hands over
    datetimes, booleans and parsed JSON. :func:`_arrow` accepts both.
    """
    return type_coerce(column, NullType()).label(column.key)


def _json_or_null(conn: Connection, column: Any) -> Any:
    """A JSON column, raw; on SQLite a stored JSON ``null`` comes back as SQL NULL, so only real
    values are left to parse (PostgreSQL's driver already turns JSON null into None)."""
    if conn.dialect.name == "sqlite":
        return type_coerce(func.nullif(column, "null"), NullType()).label(column.key)
    return raw(column)


def _json_values(values: Sequence[Any]) -> Sequence[Any]:
    """JSON text (SQLite) parsed in one ``json.loads`` for the whole column; parsed values (PostgreSQL)
    pass through. A column holds one or the other, never both."""
    texts = [v for v in values if v is not None]
    if not texts or not isinstance(texts[0], str):
        return values
    parsed = iter(json.loads("[" + ",".join(texts) + "]"))
    return [None if v is None else next(parsed) for v in values]


def _driver_type(typ: pa.DataType, dialect: str) -> pa.DataType:
    """How the driver hands a column of ``typ`` over (see :func:`raw`)."""
    if dialect == "postgresql":
        return typ
    if typ == TS or pa.types.is_list(typ):
        return pa.string()  # naive UTC text; JSON text
    return pa.int64() if typ == pa.bool_() else typ


def _finish(columns: list[pa.Array], schema: pa.Schema, salt: str | None) -> pa.Table:
    """Columns as a driver or COPY gave them, cast to ``schema`` (timestamps from naive UTC text or
    values, lists from JSON text), visitor ids hashed when ``salt`` is given."""
    out: list[pa.Array] = []
    for column, field in zip(columns, schema, strict=True):
        if column.type == field.type:
            out.append(column)
        elif field.type == TS:
            naive = column if pa.types.is_timestamp(column.type) else column.cast(pa.timestamp("us"))
            out.append(naive.cast(TS))
        elif pa.types.is_list(field.type):
            out.append(pa.array(_json_values(column.to_pylist()), field.type))
        else:
            out.append(column.cast(field.type))
    if salt is not None:
        at = schema.names.index("visitor")
        out[at] = pa.array([visitor_hash(v, salt=salt) for v in out[at].to_pylist()], pa.string())
    return pa.Table.from_arrays(out, schema=schema)


def arrow_table(rows: Sequence[Any], schema: pa.Schema, *, dialect: str, salt: str | None = None) -> pa.Table:
    """The driver's row tuples as a table of ``schema``.

    The tuples go to Arrow as one struct array in one call (converted in C++), then each column is cast
    to its type: building a Python list per column first (``zip(*rows)``) and converting those lists
    cost 3-5x as much, about a third of the export's read side on SQLite.
    """
    driver = pa.struct([(f.name, _driver_type(f.type, dialect)) for f in schema])
    columns = pa.array(rows, type=driver).flatten() if rows else [pa.array([], f.type) for f in driver]
    return _finish(columns, schema, salt)


def fetch_table(conn: Connection, query: Select[Any], schema: pa.Schema, *, salt: str | None = None
                ) -> pa.Table:
    """``query``'s rows (its columns positionally ``schema``'s fields) as a table: PostgreSQL through
    ``COPY … (FORMAT csv)`` (:mod:`db.export.pg_copy`), SQLite through the driver's tuples."""
    if conn.dialect.name == "postgresql":
        return _finish(copy_columns(conn, query, schema), schema, salt)
    return arrow_table(fetch_rows(conn, query), schema, dialect=conn.dialect.name, salt=salt)


def _battle_query(filters: ExportFilters) -> Select[Any]:
    query = select(
        *(raw(c) for c in (Battle.id, Battle.created_at, Battle.updated_at, Battle.closed_at, Battle.mode,
                            Battle.scenario, Battle.status, Battle.revealed_before_vote, Battle.revealed_at)),
        raw(Visitor.anon_id).label("visitor"),
    ).outerjoin(Visitor, Visitor.id == Battle.visitor_id)
    return query.where(*conditions(filters))


def count_battles(conn: Connection, filters: ExportFilters) -> int:
    """How many battles the filters select (for the progress bar and the dataset card)."""
    query = select(func.count()).select_from(Battle).where(*conditions(filters))
    return int(conn.scalar(query) or 0)


def fetch_rows(conn: Connection, query: Select[Any]) -> list[tuple[Any, ...]]:
    """All rows as the driver's plain tuples. The columns are :func:`raw`, so SQLAlchemy would only
    wrap each tuple in a Row; fetching from its DBAPI cursor skips that per-row cost."""
    result = conn.execute(query)
    try:
        return list(result.cursor.fetchall())
    finally:
        result.close()


def listed(conn: Connection, values: list[str] | list[int]) -> Select[Any]:
    """``SELECT`` of a list of ids passed as ONE parameter (a JSON array on SQLite, an array on
    PostgreSQL). Expanding a thousand ids into bound parameters cost SQLAlchemy more than the query,
    and re-running the page query as a subquery cost the database as much again per table."""
    if conn.dialect.name == "postgresql":
        element = Integer() if values and isinstance(values[0], int) else String()
        return select(func.unnest(literal(values, ARRAY(element))))
    return select(func.json_each(json.dumps(values)).table_valued("value").c.value)


def _related(conn: Connection, battle_ids: list[str], salt: str) -> dict[str, pa.Table]:
    """Everything hanging off one page of battles.

    Messages and corrections come in index order (grouped by conversation id): no sort in the
    database, the nested builder reorders.
    """
    rank = {battle_id: i for i, battle_id in enumerate(battle_ids)}
    in_page = listed(conn, battle_ids)
    conversations = fetch_table(conn,
        select(raw(Conversation.id), raw(Conversation.battle_id), raw(Conversation.side),
               raw(Contestant.slug).label("contestant"),
               raw(Contestant.display_name).label("contestant_name"),
               raw(Contestant.family), raw(Conversation.system_prompt),
               type_coerce(cast(Conversation.params, Text), NullType()).label("params"))
        .join(Contestant, Contestant.id == Conversation.contestant_id)
        .where(Conversation.battle_id.in_(in_page)), ROWS["conversations"])
    keys = [(rank[b], s) for b, s in zip(conversations.column("battle_id").to_pylist(),
                                         conversations.column("side").to_pylist(), strict=True)]
    conversations = conversations.take(pa.array(sorted(range(len(keys)), key=keys.__getitem__), pa.int64()))
    conversation_ids = listed(conn, conversations.column("id").to_pylist())
    messages = fetch_table(conn,
        select(*(raw(c) for c in (
            Message.conversation_id, Message.id, Message.position, Message.role, Message.kind,
            Message.content, Message.created_at, Message.first_try, Message.superseded, Message.ttft_ms,
            Message.total_ms, Message.prompt_tokens, Message.completion_tokens, Message.finish_reason,
            Message.error, Message.grader_label)), _json_or_null(conn, Message.grader_mistakes))
        .where(Message.conversation_id.in_(conversation_ids))
        .order_by(Message.conversation_id, Message.position), ROWS["messages"])
    corrections = fetch_table(conn,
        select(*(raw(c) for c in (
            Correction.id, Correction.battle_id, Correction.conversation_id, Correction.faulty_message_id,
            Correction.feedback_message_id, Correction.next_reply_message_id, Correction.outcome,
            Correction.judged_by, Correction.created_at, Correction.judged_at)))
        .where(Correction.battle_id.in_(in_page))
        .order_by(Correction.conversation_id, Correction.id), ROWS["corrections"])
    votes = fetch_table(conn,
        select(*(raw(c) for c in (Vote.battle_id, Vote.choice, Vote.created_at)),
               raw(Visitor.anon_id).label("visitor"),
               *(raw(c) for c in (Vote.revealed, Vote.flagged, Vote.with_corrections)))
        .outerjoin(Visitor, Visitor.id == Vote.visitor_id)
        .where(Vote.battle_id.in_(in_page)), ROWS["votes"], salt=salt)
    return {"conversations": conversations, "messages": messages, "corrections": corrections, "votes": votes}


def battle_pages(conn: Connection, query: Select[Any], schema: pa.Schema, *, chunk_size: int,
                 salt: str) -> Iterator[pa.Table]:
    """``query``'s rows (battle id, then created_at, first) as tables of ``schema``, in keyset pages of
    ``chunk_size``, oldest first."""
    if chunk_size < 1:
        raise ExportError("chunk size must be >= 1")
    base = query.order_by(Battle.created_at, Battle.id).limit(chunk_size)
    last: tuple[dt.datetime, str] | None = None
    while True:
        page = base
        if last is not None:
            page = page.where(
                or_(Battle.created_at > last[0], and_(Battle.created_at == last[0], Battle.id > last[1]))
            )
        table = fetch_table(conn, page, schema, salt=salt)
        if not table.num_rows:
            return
        yield table
        if table.num_rows < chunk_size:
            return
        last = (table.column(1)[-1].as_py(), table.column(0)[-1].as_py())


def iter_chunks(
    conn: Connection, *, filters: ExportFilters, salt: str, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> Iterator[Chunk]:
    """Pages of at most ``chunk_size`` battles, oldest first, each with all its rows.

    ``conn`` should be inside one read transaction (see :func:`snapshot`) so pages are consistent.
    """
    if not salt:
        raise ExportError("hash salt is empty: visitor ids are exported only as salted hashes")
    for battles in battle_pages(conn, _battle_query(filters), ROWS["battles"], chunk_size=chunk_size,
                                salt=salt):
        yield Chunk(battles=battles, **_related(conn, battles.column("id").to_pylist(), salt))


def snapshot(engine: Engine) -> Connection:
    """A connection for one consistent read of many pages (close it, or use it as a context manager)."""
    conn = engine.connect()
    if engine.dialect.name == "postgresql":
        conn = conn.execution_options(isolation_level="REPEATABLE READ")
    conn.begin()
    return conn


def chunk_reader(
    *, filters: ExportFilters, salt: str, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> tuple[Callable[[Connection], int], Callable[[Connection], Iterator[Chunk]]]:
    """What :func:`read_ahead` runs for the dialogue views: the battle count and the pages of rows."""
    return (lambda conn: count_battles(conn, filters),
            lambda conn: iter_chunks(conn, filters=filters, salt=salt, chunk_size=chunk_size))


@contextmanager
def read_ahead(
    engine: Engine,
    *,
    count: Callable[[Connection], int],
    pages: Callable[[Connection], Iterator[Page]],
    depth: int = 2,
) -> Iterator[tuple[int, Iterator[Page]]]:
    """``(count(conn), pages(conn))`` on one snapshot, the pages read by a background thread ``depth`` ahead.

    Reading (SQLite stepping, the driver, Arrow conversion) and writing (Arrow nesting, Parquet
    encoding and compression, which release the GIL) then overlap on two cores instead of taking
    turns. The thread owns the snapshot connection from start to end; an error there is raised in
    the caller at the next page, and leaving the block early stops the thread after its current page.
    """
    box: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: tuple[str, Any]) -> bool:
        while not stop.is_set():
            try:
                box.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            with snapshot(engine) as conn:
                if not put(("count", count(conn))):
                    return
                for page in pages(conn):
                    if not put(("page", page)):
                        return
            put(("end", None))
        except BaseException as exc:  # noqa: BLE001 - handed over and raised in the caller
            put(("error", exc))

    def take() -> Any:
        kind, value = box.get()
        if kind == "error":
            raise value
        return None if kind == "end" else value

    def taken() -> Iterator[Page]:
        while (page := take()) is not None:
            yield page

    thread = threading.Thread(target=produce, name="export-reader", daemon=True)
    thread.start()
    try:
        yield take(), taken()
    finally:
        stop.set()
        thread.join()
