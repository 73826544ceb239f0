"""Where the export's pages come from: one read transaction on one connection, each query's rows
turned into Arrow columns.

PostgreSQL (:class:`AdbcSource`): an ADBC connection (``adbc-driver-postgresql``, libpq) to the engine's
server, its URI taken from the engine's URL (:func:`libpq_uri`), inside ONE ``REPEATABLE READ``
transaction. The driver reads the binary results in C and hands them over as Arrow arrays, with no
Python object per value (it replaced ``COPY … (FORMAT csv)`` drained row by row from psycopg and
parsed by Arrow's CSV reader; see docs/BENCHMARKS-HISTORY.md, "db: export, issue 13 (ADBC)"). SQLAlchemy still
builds and compiles every statement; bound values go through the dialect's bind processors and then to
the driver as ``$n`` parameters, never into the SQL text.

SQLite (:class:`TupleSource`): the engine's own connection in a deferred read transaction (a WAL
snapshot from its first read on); the sqlite3 module's row tuples go to Arrow as one struct array per
result. ADBC's SQLite driver is NOT used, although it read the same rows in about half the CPU: it
links its own copy of SQLite, and two copies in one process do not see each other's POSIX locks, so
its reads in the web app's process missed rows committed through the sqlite3 module (measured: a
fresh ADBC connection counted 0 battles where the engine counted 1) and could break WAL's
reader/checkpoint locking outright. See docs/DESIGN.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol
from urllib.parse import quote

import adbc_driver_manager
import pyarrow as pa
from sqlalchemy import Connection, Engine, Select
from sqlalchemy.engine import URL, Dialect
from sqlalchemy.exc import DBAPIError

from db.export.filters import visitor_hash
from db.export.schema import TS


class Source(Protocol):
    """What the page readers need: the dialect to build SQL for, and results as tables or rows."""

    @property
    def dialect(self) -> Dialect: ...

    def table(self, query: Select[Any], schema: pa.Schema, *, salt: str | None = None) -> pa.Table:
        """``query``'s rows (its columns positionally ``schema``'s fields) as a table of ``schema``,
        visitor ids hashed with ``salt`` when given."""
        ...

    def rows(self, query: Select[Any]) -> list[tuple[Any, ...]]:
        """``query``'s rows as plain tuples (for small results)."""
        ...


def _json_values(values: Sequence[Any]) -> Sequence[Any]:
    """JSON texts parsed in one ``json.loads`` for the whole column; parsed values pass through. A
    column holds one or the other, never both."""
    texts = [v for v in values if v is not None]
    if not texts or not isinstance(texts[0], str):
        return values
    parsed = iter(json.loads("[" + ",".join(texts) + "]"))
    return [None if v is None else next(parsed) for v in values]


def finish(columns: Sequence[pa.Array], schema: pa.Schema, salt: str | None) -> pa.Table:
    """Columns as a driver handed them, cast to ``schema``: timestamps from naive UTC text (SQLite) or
    aware values, booleans from 0/1, lists from JSON text (or PostgreSQL's ``arrow.json``), integer
    widths; visitor ids hashed when ``salt`` is given."""
    out: list[pa.Array] = []
    for column, field in zip(columns, schema, strict=True):
        if isinstance(column.type, pa.ExtensionType):
            column = column.storage  # noqa: PLW2901 - arrow.json: its text
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


def _driver_type(typ: pa.DataType) -> pa.DataType:
    """How the sqlite3 module hands a column of ``typ`` over: timestamps and JSON as text, booleans as
    0/1."""
    if typ == TS or pa.types.is_list(typ):
        return pa.string()
    return pa.int64() if typ == pa.bool_() else typ


class TupleSource:
    """The engine's own SQLite connection: the driver's row tuples go to Arrow as one struct array per
    result (converted in C++), 3-5x cheaper than a Python list per column."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    @property
    def dialect(self) -> Dialect:
        return self._conn.dialect

    def rows(self, query: Select[Any]) -> list[tuple[Any, ...]]:
        result = self._conn.execute(query)
        try:
            return list(result.cursor.fetchall())  # plain tuples: the columns are raw, no Row per tuple
        finally:
            result.close()

    def table(self, query: Select[Any], schema: pa.Schema, *, salt: str | None = None) -> pa.Table:
        rows = self.rows(query)
        driver = pa.struct([(f.name, _driver_type(f.type)) for f in schema])
        columns = pa.array(rows, type=driver).flatten() if rows else [pa.array([], f.type) for f in driver]
        return finish(columns, schema, salt)


def _positional_dialect(dialect: Dialect) -> Dialect:
    """The engine's dialect class with ``$n`` parameters (libpq's)."""
    same: Any = type(dialect)
    positional: Dialect = same(paramstyle="numeric_dollar")
    return positional


def compile_query(query: Select[Any], dialect: Dialect) -> tuple[str, tuple[Any, ...]]:
    """``query`` as SQL text for ``dialect`` and its bound values, in order, through the dialect's bind
    processors (what SQLAlchemy itself would hand its driver)."""
    compiled = query.compile(dialect=dialect)
    state = compiled.construct_expanded_state(escape_names=False)
    processors: dict[str, Any] = {
        name: processor for param, name in compiled.bind_names.items()
        if (processor := param.type._cached_bind_processor(dialect)) is not None
    }
    processors.update(state.processors)
    values = tuple(processors[name](value) if name in processors else value
                   for name, value in zip(state.positiontup or (), state.positional_parameters, strict=True))
    return state.statement, values


class AdbcSource:
    """An ADBC PostgreSQL connection inside one read transaction; every result comes over as Arrow."""

    def __init__(self, conn: Any, dialect: Dialect) -> None:
        self._conn = conn
        self._dialect = dialect
        self._compile_for = _positional_dialect(dialect)

    @property
    def dialect(self) -> Dialect:
        return self._dialect

    def _arrow(self, query: Select[Any]) -> pa.Table:
        sql, values = compile_query(query, self._compile_for)
        try:
            with self._conn.cursor() as cursor:
                cursor.execute(sql, values or None)
                return cursor.fetch_arrow_table()
        except (adbc_driver_manager.Error, OSError) as exc:
            raise DBAPIError.instance(sql, values, exc, adbc_driver_manager.Error) from exc

    def rows(self, query: Select[Any]) -> list[tuple[Any, ...]]:
        table = self._arrow(query)
        return list(zip(*(table.column(i).to_pylist() for i in range(table.num_columns)), strict=True))

    def table(self, query: Select[Any], schema: pa.Schema, *, salt: str | None = None) -> pa.Table:
        arrow = self._arrow(query)
        return finish([arrow.column(i).combine_chunks() for i in range(arrow.num_columns)], schema, salt)


def libpq_uri(url: URL) -> str:
    """A PostgreSQL ``url`` as a libpq connection URI (``postgresql://user:password@host:port/db?query``):
    the ``+psycopg`` driver part dropped, password and query kept, every part percent-encoded (libpq
    reads ``+`` as a plus, not a space). It holds the password: never log it."""
    def q(part: str) -> str:
        return quote(part, safe="")

    user = "" if url.username is None else q(url.username)
    if url.password is not None:
        user += ":" + q(str(url.password))
    host = url.host or ""
    host = f"[{host}]" if ":" in host else q(host)
    netloc = f"{user}@{host}" if user else host
    if url.port is not None:
        netloc += f":{url.port}"
    query = "&".join(f"{q(key)}={q(value)}" for key, values in url.query.items()
                     for value in ((values,) if isinstance(values, str) else values))
    return f"postgresql://{netloc}/{q(url.database or '')}" + (f"?{query}" if query else "")


def _connect(uri: str) -> Any:
    """An ADBC connection in a fresh ``REPEATABLE READ`` transaction (autocommit off: the driver has sent
    ``BEGIN``, and the isolation level is the transaction's first statement)."""
    import adbc_driver_postgresql.dbapi

    conn = adbc_driver_postgresql.dbapi.connect(uri, autocommit=False)
    try:
        with conn.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    except BaseException:
        conn.close()
        raise
    return conn


@contextmanager
def open_source(engine: Engine) -> Iterator[Source]:
    """A :class:`Source` on one read transaction of ``engine``'s database, rolled back and closed after."""
    if engine.dialect.name != "postgresql":
        with engine.connect() as conn:
            conn.begin()
            yield TupleSource(conn)
        return
    try:
        conn = _connect(libpq_uri(engine.url))
    except (adbc_driver_manager.Error, OSError) as exc:
        raise DBAPIError.instance(None, None, exc, adbc_driver_manager.Error) from exc
    try:
        yield AdbcSource(conn, engine.dialect)
    finally:
        try:
            conn.rollback()
        finally:
            conn.close()
