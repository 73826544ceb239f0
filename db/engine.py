"""Engine and session set-up for SQLite (the embedded default) and PostgreSQL (scale-out).

SQLite: WAL (readers never block the writer), ``busy_timeout`` (writers queue instead of failing),
foreign keys on, and ``synchronous=FULL`` by default so a confirmed vote survives a power cut, not only a
crash. Write transactions start with ``BEGIN IMMEDIATE``: a deferred transaction that reads and then
writes can fail at once with SQLITE_BUSY when another writer got in between (busy_timeout cannot help
it), whereas an immediate one simply waits its turn. Read transactions stay deferred so they never wait.

PostgreSQL: psycopg 3 with a connection pool and ``pool_pre_ping``, so a server restart costs one failed
ping per stale pooled connection instead of an error on the visitor's next action.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

SqliteSync = Literal["OFF", "NORMAL", "FULL"]
WRITE_OPTION = "arena_write"  # execution option that makes a SQLite transaction BEGIN IMMEDIATE


def make_engine(
    url: str,
    *,
    sqlite_synchronous: SqliteSync = "FULL",
    busy_timeout_ms: int = 30_000,
    pool_size: int = 10,
    echo: bool = False,
) -> Engine:
    """An engine for ``url`` (``sqlite:///path`` or ``postgresql+psycopg://...``), configured as above.

    A SQLite file's parent folder is created if missing, so the default ``./var/arena.db`` just works.
    """
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        database = parsed.database or ""
        if database in ("", ":memory:") or database.startswith("file:"):
            raise ValueError("use a SQLite file URL (sqlite:///path/to/arena.db); in-memory is not shared")
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, echo=echo, pool_size=pool_size, max_overflow=pool_size)
        _configure_sqlite(engine, synchronous=sqlite_synchronous, busy_timeout_ms=busy_timeout_ms)
        return engine
    if backend == "postgresql":
        if parsed.get_driver_name() != "psycopg":
            parsed = parsed.set(drivername="postgresql+psycopg")
        return create_engine(
            parsed,
            echo=echo,
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_pre_ping=True,
            pool_recycle=1800,
        )
    raise ValueError(f"unsupported database URL scheme {parsed.drivername!r}: use sqlite or postgresql")


def _configure_sqlite(engine: Engine, *, synchronous: SqliteSync, busy_timeout_ms: int) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from the sqlite3 module so that our BEGIN is the one used.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute(f"PRAGMA synchronous = {synchronous}")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        immediate = connection.get_execution_options().get(WRITE_OPTION, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions that keep loaded values after commit (the repository hands out plain views anyway)."""
    return sessionmaker(bind=engine, expire_on_commit=False)


@contextmanager
def write_session(engine: Engine) -> Iterator[Session]:
    """One write transaction: committed when the block ends, rolled back on any exception."""
    with Session(engine, expire_on_commit=False) as session, session.begin():
        session.connection(execution_options={WRITE_OPTION: True})
        yield session


@contextmanager
def read_session(engine: Engine) -> Iterator[Session]:
    """One read-only transaction (deferred on SQLite: it never waits for writers)."""
    with Session(engine, expire_on_commit=False) as session, session.begin():
        yield session
