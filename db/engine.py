"""Engine and session set-up for SQLite (the embedded default) and PostgreSQL (scale-out).

SQLite: WAL (readers never block the writer), ``busy_timeout`` (writers queue instead of failing),
foreign keys on, and ``synchronous=FULL`` by default so a confirmed vote survives a power cut, not only a
crash. Write transactions start with ``BEGIN IMMEDIATE``: a deferred transaction that reads and then
writes can fail at once with SQLITE_BUSY when another writer got in between (busy_timeout cannot help
it), whereas an immediate one simply waits its turn. Read transactions stay deferred so they never wait.

PostgreSQL: psycopg 3 with a connection pool and ``pool_pre_ping``, so a server restart costs one failed
ping per stale pooled connection instead of an error on the visitor's next action.

Durability (``durability=``): ``"fsync"`` (default) flushes every commit to disk before it returns
(SQLite ``synchronous=FULL``; PostgreSQL ``synchronous_commit=on``): a confirmed write survives a power cut.
``"crash_safe"`` (SQLite ``synchronous=NORMAL`` in WAL; PostgreSQL ``synchronous_commit=off``) still
survives a killed process and a server restart, but an OS crash may drop the last fraction of a second
of commits. It exists because one fsync costs ~5.5 ms on the reference machine, which caps durable
commits per second whatever the code does (see docs/BENCHMARKS-HISTORY.md, ``## db``).

SQLite writers queue on a lock file (``<db>.writers``, ``flock``) before ``BEGIN IMMEDIATE``. SQLite
allows one writer at a time and its busy handler *polls* with sleeps of up to 100 ms, so eight busy
writers spent most of their time asleep (145 votes/s); a kernel lock hands over the moment the previous
commit ends. Correctness still rests on SQLite's own locking; the gate only orders the queue.
"""

from __future__ import annotations

import fcntl
import os
import threading
import weakref
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DataError
from sqlalchemy.orm import Session, sessionmaker

from db.errors import InvalidInput

Durability = Literal["fsync", "crash_safe", "none"]
_SQLITE_SYNC = {"fsync": "FULL", "crash_safe": "NORMAL", "none": "OFF"}
WRITE_OPTION = "arena_write"  # execution option that makes a SQLite transaction BEGIN IMMEDIATE


def make_engine(
    url: str,
    *,
    durability: Durability = "fsync",
    busy_timeout_ms: int = 30_000,
    pool_size: int = 10,
    echo: bool = False,
) -> Engine:
    """An engine for ``url`` (``sqlite:///path`` or ``postgresql+psycopg://...``), configured as above.

    A SQLite file's parent folder is created if missing, so the default ``./var/arena.db`` just works.
    ``durability="none"`` (no syncing at all) is for bulk-loading throw-away benchmark data only.
    A failed statement's error never shows its parameters (``hide_parameters``): a logged database
    error carries no visitor's message and no reply.
    """
    if durability not in _SQLITE_SYNC:
        raise ValueError(f"durability must be one of {', '.join(_SQLITE_SYNC)}")
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        database = parsed.database or ""
        if database in ("", ":memory:") or database.startswith("file:"):
            raise ValueError("use a SQLite file URL (sqlite:///path/to/arena.db); in-memory is not shared")
        path = Path(database).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, echo=echo, pool_size=pool_size, max_overflow=pool_size,
                               hide_parameters=True)
        _configure_sqlite(engine, synchronous=_SQLITE_SYNC[durability], busy_timeout_ms=busy_timeout_ms)
        _GATES[engine] = _WriterGate(path.with_name(path.name + ".writers"))
        return engine
    if backend == "postgresql":
        if parsed.get_driver_name() != "psycopg":
            parsed = parsed.set(drivername="postgresql+psycopg")
        if durability != "fsync":  # in the URL, not connect_args: engine.url stays the whole description
            given = parsed.query.get("options", ())
            given = (given,) if isinstance(given, str) else given
            options = " ".join((*given, "-c synchronous_commit=off"))
            parsed = parsed.update_query_dict({"options": options})
        pg_engine = create_engine(
            parsed,
            echo=echo,
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_pre_ping=True,
            pool_recycle=1800,
            hide_parameters=True,
        )
        event.listen(pg_engine, "handle_error", _typed_data_error)
        return pg_engine
    raise ValueError(f"unsupported database URL scheme {parsed.drivername!r}: use sqlite or postgresql")


def _typed_data_error(context: Any) -> None:
    """Last line behind the repository's input checks: a value PostgreSQL cannot store (a NUL byte, a
    number out of range, bad Unicode) is raised as :class:`db.errors.InvalidInput`, never as the driver's
    untyped ``DataError`` carrying the SQL text."""
    if isinstance(context.sqlalchemy_exception, DataError):
        reason = str(context.original_exception).splitlines()[0] if context.original_exception else ""
        raise InvalidInput(f"the database refused a value: {reason}") from context.original_exception


class _WriterGate:
    """Queue this engine's SQLite write transactions: a thread lock, then an ``flock`` shared by processes.

    The lock file is reopened after a fork (a forked child must not share the parent's open file
    description, or the two would hold "the same" lock).
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._thread_lock = threading.Lock()
        self._fd: int | None = None
        self._pid = -1

    def _fd_here(self) -> int:
        if self._fd is None or self._pid != os.getpid():
            self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
            self._pid = os.getpid()
        return self._fd

    @contextmanager
    def hold(self) -> Iterator[None]:
        with self._thread_lock:
            fd = self._fd_here()
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)


_GATES: weakref.WeakKeyDictionary[Engine, _WriterGate] = weakref.WeakKeyDictionary()


def _reset_gates_in_child() -> None:
    """A forked child starts with free gates: a lock held by another parent thread would never be released."""
    for gate in list(_GATES.values()):
        if gate._fd is not None:
            os.close(gate._fd)  # the child's copy only; the parent's lock is untouched
        gate._fd, gate._pid, gate._thread_lock = None, -1, threading.Lock()


os.register_at_fork(after_in_child=_reset_gates_in_child)


def writer_gate(engine: Engine) -> AbstractContextManager[None]:
    """Hold this while running one write transaction (a no-op except for SQLite engines)."""
    gate = _GATES.get(engine)
    return gate.hold() if gate is not None else nullcontext()


def _configure_sqlite(engine: Engine, *, synchronous: str, busy_timeout_ms: int) -> None:
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
    """Sessions that keep loaded values after commit (``db``'s functions hand out plain views anyway)."""
    return sessionmaker(bind=engine, expire_on_commit=False)


@contextmanager
def write_session(engine: Engine) -> Iterator[Session]:
    """One write transaction: committed when the block ends, rolled back on any exception."""
    with writer_gate(engine), Session(engine, expire_on_commit=False) as session, session.begin():
        session.connection(execution_options={WRITE_OPTION: True})
        yield session


@contextmanager
def read_session(engine: Engine) -> Iterator[Session]:
    """One read-only transaction (deferred on SQLite: it never waits for writers)."""
    with Session(engine, expire_on_commit=False) as session, session.begin():
        yield session
