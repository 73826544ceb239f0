"""Reading the database for the export: keyset pages of battles and everything hanging off them.

The export never loads the whole database. Battles are read in pages ordered by ``(created_at, id)``
and continued with a row-value keyset condition (``(created_at, id) > last key``), not ``OFFSET``, so
each page starts at its key in ``ix_battles_created_id`` and costs the same however deep into the data
it is (PostgreSQL used only ``created_at`` of the ``OR`` form as a filter, scanning the index from the
start on every page). For a page, conversations and votes are read with ``battle_id IN (page ids)``,
messages and corrections with ``conversation_id`` among the page's conversations (:func:`among`): each
such query hits an index (``uq_conversations_battle_side``, ``uq_votes_battle_id``,
``uq_messages_conversation_position``, ``ix_corrections_conversation_id``).

All pages are read inside one read transaction (``REPEATABLE READ`` on PostgreSQL; on SQLite a WAL
read transaction is a snapshot), so an export taken while visitors keep voting is consistent: no
battle appears without its vote because the vote landed between two pages. The transaction is a
:mod:`db.export.source`'s: an ADBC connection on PostgreSQL, the engine's own connection on SQLite.

Visitors are exported only as stable salted hashes of their anonymous id; network addresses (and their
hashes) are never selected at all. A message's ``error`` is exported as its category only
(:func:`db.export.categories.error_category`): the stored text can name a model, an endpoint or an account.
"""

from __future__ import annotations

import datetime as dt
import json
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
from sqlalchemy import (
    ARRAY,
    Engine,
    Integer,
    Select,
    String,
    Text,
    any_,
    cast,
    func,
    literal,
    select,
    tuple_,
    type_coerce,
)
from sqlalchemy.orm import aliased
from sqlalchemy.types import NullType

from db.export.categories import error_category
from db.export.filters import ExportError, conditions
from db.export.schema import ROWS
from db.export.source import Source, open_source
from db.models import Battle, Contestant, Conversation, Correction, Message, Visitor, Vote
from db.vote_filters import VoteFilters

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
    timestamps, booleans and JSON text. :func:`db.export.source.finish` casts both.
    """
    return type_coerce(column, NullType()).label(column.key)


def _json_or_null(dialect: str, column: Any) -> Any:
    """A JSON column, raw; on SQLite a stored JSON ``null`` comes back as SQL NULL, so only real
    values are left to parse (PostgreSQL's JSON ``null`` text parses to None)."""
    if dialect == "sqlite":
        return type_coerce(func.nullif(column, "null"), NullType()).label(column.key)
    return raw(column)


def _battle_query(filters: VoteFilters) -> Select[Any]:
    query = select(
        *(raw(c) for c in (Battle.id, Battle.created_at, Battle.updated_at, Battle.closed_at, Battle.mode,
                            Battle.scenario, Battle.status, Battle.revealed_before_vote, Battle.revealed_at)),
        raw(Visitor.anon_id).label("visitor"),
        type_coerce(Battle.dialogue["id"].as_string(), NullType()).label("dialogue_id"),
    ).outerjoin(Visitor, Visitor.id == Battle.visitor_id)
    return query.where(*conditions(filters))


def count_battles(src: Source, filters: VoteFilters) -> int:
    """How many battles the filters select (for the progress bar and the dataset card)."""
    query = select(func.count()).select_from(Battle).where(*conditions(filters))
    return int(src.rows(query)[0][0] or 0)


SELECTION_COUNTS = ("battles", "messages", "corrections", "votes")


def count_selection(src: Source, filters: VoteFilters) -> dict[str, int]:
    """Rows of each kind an export with ``filters`` covers (:data:`SELECTION_COUNTS`): what a page shows
    next to a download is then what the download holds. Corrections are counted through an alias, so
    ``corrections_only``'s ``EXISTS`` on the table is not correlated with the counted rows."""
    corrections = aliased(Correction)
    selected = conditions(filters)
    queries = {
        "battles": select(func.count()).select_from(Battle).where(*selected),
        "messages": select(func.count()).select_from(Message)
        .join(Conversation, Conversation.id == Message.conversation_id)
        .join(Battle, Battle.id == Conversation.battle_id).where(*selected),
        "corrections": select(func.count()).select_from(corrections)
        .join(Battle, Battle.id == corrections.battle_id).where(*selected),
        "votes": select(func.count()).select_from(Vote)
        .join(Battle, Battle.id == Vote.battle_id).where(*selected),
    }
    return {name: int(src.rows(query)[0][0] or 0) for name, query in queries.items()}


def listed(src: Source, values: list[str] | list[int]) -> Select[Any]:
    """``SELECT`` of a list of ids passed as ONE parameter (a JSON array on SQLite, an array on
    PostgreSQL). Expanding a thousand ids into bound parameters cost SQLAlchemy more than the query,
    and re-running the page query as a subquery cost the database as much again per table."""
    if src.dialect.name == "postgresql":
        element = Integer() if values and isinstance(values[0], int) else String()
        return select(func.unnest(literal(values, ARRAY(element))))
    return select(func.json_each(json.dumps(values)).table_valued("value").c.value)


def among(src: Source, column: Any, values: list[int]) -> Any:
    """``column`` is one of the integer ``values``: ``= ANY(array)`` on PostgreSQL, whose index scan then
    returns rows in index order (no sort; ``IN (unnest(…))`` is a hash join plus a sort), ``IN`` the
    :func:`listed` values on SQLite. Only for integer keys: for the text (UUID) keys the planner's
    estimate of ``= ANY`` chose a parallel sequential scan (5-6x slower than the nested loop)."""
    if src.dialect.name == "postgresql":
        return column == any_(literal(values, ARRAY(Integer())))
    return column.in_(listed(src, values))


def error_categories(messages: pa.Table) -> pa.Table:
    """``messages`` with its ``error`` column replaced by each text's category (null stays null).

    Categorised once per distinct text (a dictionary encoding), not once per message."""
    index = messages.schema.get_field_index("error")
    encoded = messages.column(index).combine_chunks().dictionary_encode()
    categories = pa.array([error_category(text) for text in encoded.dictionary.to_pylist()], pa.string())
    mapped = pa.DictionaryArray.from_arrays(encoded.indices, categories).cast(pa.string())
    return messages.set_column(index, messages.schema.field(index), mapped)


def _related(src: Source, battle_ids: list[str], salt: str) -> dict[str, pa.Table]:
    """Everything hanging off one page of battles.

    Messages and corrections come in index order (grouped by conversation id): no sort in the
    database, the nested builder reorders.
    """
    rank = {battle_id: i for i, battle_id in enumerate(battle_ids)}
    in_page = listed(src, battle_ids)
    conversations = src.table(
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
    conversation_ids = conversations.column("id").to_pylist()
    messages = src.table(
        select(*(raw(c) for c in (
            Message.conversation_id, Message.id, Message.position, Message.role, Message.kind,
            Message.content, Message.created_at, Message.first_try, Message.superseded, Message.ttft_ms,
            Message.total_ms, Message.prompt_tokens, Message.completion_tokens, Message.finish_reason,
            Message.error, Message.grader_label)), _json_or_null(src.dialect.name, Message.grader_mistakes),
            _json_or_null(src.dialect.name, Message.grader_notes))
        .where(among(src, Message.conversation_id, conversation_ids))
        .order_by(Message.conversation_id, Message.position), ROWS["messages"])
    messages = error_categories(messages)
    corrections = src.table(
        select(*(raw(c) for c in (
            Correction.id, Correction.battle_id, Correction.conversation_id, Correction.faulty_message_id,
            Correction.feedback_message_id, Correction.next_reply_message_id, Correction.outcome,
            Correction.judged_by, Correction.created_at, Correction.judged_at)))
        .where(among(src, Correction.conversation_id, conversation_ids))
        .order_by(Correction.conversation_id, Correction.id), ROWS["corrections"])
    votes = src.table(
        select(*(raw(c) for c in (Vote.battle_id, Vote.choice, Vote.created_at)),
               raw(Visitor.anon_id).label("visitor"),
               *(raw(c) for c in (Vote.revealed, Vote.flagged, Vote.with_corrections)))
        .outerjoin(Visitor, Visitor.id == Vote.visitor_id)
        .where(Vote.battle_id.in_(in_page)), ROWS["votes"], salt=salt)
    return {"conversations": conversations, "messages": messages, "corrections": corrections, "votes": votes}


def battle_pages(src: Source, query: Select[Any], schema: pa.Schema, *, chunk_size: int,
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
            page = page.where(tuple_(Battle.created_at, Battle.id) > last)  # binds typed as the columns
        table = src.table(page, schema, salt=salt)
        if not table.num_rows:
            return
        yield table
        if table.num_rows < chunk_size:
            return
        last = (table.column(1)[-1].as_py(), table.column(0)[-1].as_py())


def iter_chunks(
    src: Source, *, filters: VoteFilters, salt: str, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> Iterator[Chunk]:
    """Pages of at most ``chunk_size`` battles, oldest first, each with all its rows.

    ``src`` should be one read transaction (see :func:`snapshot`) so pages are consistent.
    """
    if not salt:
        raise ExportError("hash salt is empty: visitor ids are exported only as salted hashes")
    for battles in battle_pages(src, _battle_query(filters), ROWS["battles"], chunk_size=chunk_size,
                                salt=salt):
        yield Chunk(battles=battles, **_related(src, battles.column("id").to_pylist(), salt))


def snapshot(engine: Engine) -> AbstractContextManager[Source]:
    """One consistent read of many pages: ``with snapshot(engine) as src`` (see :func:`open_source`)."""
    return open_source(engine)


def chunk_reader(
    *, filters: VoteFilters, salt: str, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> tuple[Callable[[Source], int], Callable[[Source], Iterator[Chunk]]]:
    """What :func:`read_ahead` runs for the dialogue views: the battle count and the pages of rows."""
    return (lambda src: count_battles(src, filters),
            lambda src: iter_chunks(src, filters=filters, salt=salt, chunk_size=chunk_size))


@contextmanager
def read_ahead(
    engine: Engine,
    *,
    count: Callable[[Source], int],
    pages: Callable[[Source], Iterator[Page]],
    depth: int = 2,
) -> Iterator[tuple[int, Iterator[Page]]]:
    """``(count(src), pages(src))`` on one snapshot, the pages read by a background thread ``depth`` ahead.

    Reading (the driver stepping rows into Arrow, the casts) and writing (Arrow nesting, Parquet
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
            with snapshot(engine) as src:
                if not put(("count", count(src))):
                    return
                for page in pages(src):
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
