"""Group commit: many threads' write actions share one transaction and one disk flush.

Why: a durable commit waits for the disk to flush (~2.5–5.5 ms on the reference machine, 230–430 flushes
a second), so one flush per vote caps votes/s at the flush rate however fast the code is. In the web app
every visitor's session is a thread of ONE process, so concurrent :func:`db.actions.votes.record_vote`
calls can ride on one flush, the way database servers group their own commits.

How: each engine gets one :class:`GroupCommitter` (one committer thread, or ``lanes`` of them each with
its own connection; started on demand, gone after ``idle_s`` without work). A caller hands over its
request with an ``apply_many(conn, requests)`` function and blocks. The committer takes everything
pending (up to ``max_batch``; optionally lingering ``max_delay_s`` for more), opens ONE write transaction
(behind the engine's writer gate, so processes still queue on SQLite), applies the requests as a set —
a refusal is an outcome (an exception instance) and writes nothing — and commits once, then wakes every
caller. If a statement fails, the transaction is rolled back and the batch redone with one ``SAVEPOINT``
per request, so only the offending request fails and its caller gets that very exception. A caller
returns only after the commit that holds its request succeeded; when the commit (or the transaction
around it) fails, every caller of that batch gets the error and the connection is discarded, so nothing
is confirmed that is not on disk. While one batch is being flushed the next one fills up, so no waiting
window is needed for batching under load, and a lone caller pays only a thread hand-over.

``apply_many`` runs on the committer thread and must touch nothing but the connection it is given.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine

from db.engine import WRITE_OPTION, writer_gate

DEFAULT_MAX_BATCH = 64
DEFAULT_IDLE_S = 2.0


ApplyMany = Callable[[Connection, list[Any]], list[Any]]
"""``apply_many(conn, requests) -> outcomes``: one outcome per request, in order — a result, or the
exception instance that refuses that request (returned, not raised: a refusal writes nothing)."""


@dataclass(eq=False)
class _Pending:
    """One caller's request, and where its outcome goes."""

    request: Any
    apply_many: ApplyMany
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: BaseException | None = None


@dataclass(frozen=True)
class BatchStats:
    """Counters of one committer (for the bench and tests): batches committed, actions in them."""

    batches: int
    actions: int
    largest: int


class GroupCommitter:
    """One committer thread per engine; :meth:`run` is the only entry point callers need."""

    def __init__(
        self,
        engine: Engine,
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        max_delay_s: float = 0.0,
        idle_s: float = DEFAULT_IDLE_S,
        lanes: int = 1,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        if not 0.0 <= max_delay_s <= 0.1:
            raise ValueError("max_delay_s must be between 0 and 0.1 seconds")
        if idle_s <= 0:
            raise ValueError("idle_s must be positive")
        # Weak: the committer is stored per engine and must not keep its engine alive.
        self._engine = weakref.ref(engine)
        self.max_batch = max_batch
        self.max_delay_s = max_delay_s
        self.idle_s = idle_s
        self.lanes = lanes
        self._reset()

    def _reset(self) -> None:
        self._cond = threading.Condition()
        self._pending: deque[_Pending] = deque()
        self._lanes_running = 0
        self._lanes_idle = 0
        self._batches = self._actions = self._largest = 0

    def stats(self) -> BatchStats:
        with self._cond:
            return BatchStats(batches=self._batches, actions=self._actions, largest=self._largest)

    def run(self, request: Any, *, apply_many: ApplyMany) -> Any:
        """Apply ``request`` in the next group transaction; return its outcome once that is committed.

        Raises the exception that refused this request (the rest of the batch unaffected), or the
        commit's error when the batch as a whole failed.
        """
        pending = _Pending(request, apply_many)
        with self._cond:
            self._pending.append(pending)
            if self._lanes_idle == 0 and self._lanes_running < self.lanes:
                self._start_lane()
            self._cond.notify()
        pending.done.wait()
        if pending.error is not None:
            raise pending.error
        return pending.result

    def _start_lane(self) -> None:
        with self._cond:  # re-entrant: called with or without the condition held
            self._lanes_running += 1
        threading.Thread(target=self._loop, name="db-group-commit", daemon=True).start()

    def _next_batch(self) -> list[_Pending] | None:
        """Block for work; ``None`` (and the thread ends) after ``idle_s`` with nothing to do."""
        with self._cond:
            if not self._pending:
                self._lanes_idle += 1
                self._cond.wait(timeout=self.idle_s)
                self._lanes_idle -= 1
                if not self._pending:
                    self._lanes_running -= 1
                    return None
            if self.max_delay_s > 0 and len(self._pending) < self.max_batch:
                self._cond.wait_for(lambda: len(self._pending) >= self.max_batch, timeout=self.max_delay_s)
            count = min(self.max_batch, len(self._pending))
            return [self._pending.popleft() for _ in range(count)]

    def _loop(self) -> None:
        conn: Connection | None = None  # kept only between back-to-back batches (saves the pre-ping)
        try:
            while (batch := self._next_batch()) is not None:
                try:
                    conn = self._commit(batch, conn)
                except BaseException as exc:  # pragma: no cover - a bug: nobody may wait forever
                    for pending in batch:
                        pending.result, pending.error = None, exc
                    raise
                finally:
                    for pending in batch:
                        pending.done.set()
                if conn is not None and not self._pending:
                    conn.close()  # idle: back to the pool, pinged again at the next checkout
                    conn = None
        except BaseException:  # a bug or interpreter shutdown: hand the queue to a fresh lane
            with self._cond:
                self._lanes_running -= 1
                restart = bool(self._pending)
            if restart:
                self._start_lane()
            raise
        finally:
            if conn is not None:
                conn.close()

    def _commit(self, batch: list[_Pending], conn: Connection | None) -> Connection | None:
        """Apply and commit one batch; returns the connection to reuse (``None`` after a failure)."""
        engine = self._engine()
        groups: dict[ApplyMany, list[_Pending]] = {}
        for pending in batch:
            groups.setdefault(pending.apply_many, []).append(pending)
        try:
            if engine is None:  # pragma: no cover - a waiting caller holds its engine
                raise RuntimeError("the engine of this group committer is gone")
            with writer_gate(engine):
                if conn is None:
                    conn = engine.connect()
                    conn.execution_options(**{WRITE_OPTION: True})
                outcomes = _apply_and_commit(conn, groups)
        except BaseException as exc:  # the batch failed as a whole: nothing in it is confirmed
            for pending in batch:
                pending.result, pending.error = None, exc
            if conn is not None:  # its state is unknown (a transaction may still be open): discard it
                _discard(conn)
            if not isinstance(exc, Exception):
                raise
            return None
        for pending in batch:
            outcome = outcomes[pending]
            if isinstance(outcome, BaseException):
                pending.error = outcome
            else:
                pending.result = outcome
        with self._cond:
            self._batches += 1
            self._actions += len(batch)
            self._largest = max(self._largest, len(batch))
        return conn


def _apply_and_commit(conn: Connection, groups: dict[ApplyMany, list[_Pending]]) -> dict[_Pending, Any]:
    """One transaction for the whole batch; the outcome of every request once it is committed.

    Fast path: each ``apply_many`` once over its requests, no savepoints (refusals are outcomes and write
    nothing; savepoints cost two round trips a batch on PostgreSQL). If a statement fails (a unique key,
    a check: what the row locks should already prevent), the transaction is rolled back and the batch
    applied again, each request in its own ``SAVEPOINT``: only the request that fails gets the error,
    the others commit. Errors of the commit itself propagate (the caller fails the whole batch).
    """
    trans = conn.begin()
    try:
        try:
            outcomes: dict[_Pending, Any] = {}
            for apply_many, group in groups.items():
                results = apply_many(conn, [pending.request for pending in group])
                if len(results) != len(group):
                    raise RuntimeError("apply_many must return one outcome per request")
                outcomes.update(zip(group, results, strict=True))
        except Exception:
            trans.rollback()
            trans = conn.begin()
            outcomes = {p: _apply_alone(conn, p) for group in groups.values() for p in group}
    except BaseException:
        if trans.is_active:
            trans.rollback()
        raise
    trans.commit()
    return outcomes


def _discard(conn: Connection) -> None:
    try:
        conn.invalidate()
    finally:
        conn.close()


def _apply_alone(conn: Connection, pending: _Pending) -> Any:
    """One request in its own savepoint: its failure (raised or returned) undoes only its own work."""
    try:
        with conn.begin_nested():
            outcome = pending.apply_many(conn, [pending.request])[0]
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome
    except Exception as exc:
        return exc


_COMMITTERS: weakref.WeakKeyDictionary[Engine, GroupCommitter | None] = weakref.WeakKeyDictionary()
_REGISTRY_LOCK = threading.Lock()


def configure_group_commit(
    engine: Engine,
    *,
    enabled: bool = True,
    max_batch: int = DEFAULT_MAX_BATCH,
    max_delay_s: float = 0.0,
    idle_s: float = DEFAULT_IDLE_S,
    lanes: int = 1,
) -> GroupCommitter | None:
    """Turn group commit on (with these settings) or off for ``engine``; returns the committer or ``None``.

    Engines that were never configured use group commit with the defaults: it is what the web app needs,
    and a lone caller loses only a thread hand-over. ``enabled=False`` gives the plain path: one
    transaction and one flush per call, in the caller's thread.
    """
    committer = GroupCommitter(
        engine, max_batch=max_batch, max_delay_s=max_delay_s, idle_s=idle_s, lanes=lanes
    ) if enabled else None
    with _REGISTRY_LOCK:
        _COMMITTERS[engine] = committer
    return committer


def group_committer(engine: Engine) -> GroupCommitter | None:
    """The committer of ``engine`` (created with the defaults on first use), or ``None`` when turned off."""
    with _REGISTRY_LOCK:
        if engine not in _COMMITTERS:
            _COMMITTERS[engine] = GroupCommitter(engine)
        return _COMMITTERS[engine]


def _reset_in_child() -> None:
    """A forked child has no committer threads: start every committer afresh (the parent's are untouched)."""
    global _REGISTRY_LOCK
    _REGISTRY_LOCK = threading.Lock()
    for committer in list(_COMMITTERS.values()):
        if committer is not None:
            committer._reset()


os.register_at_fork(after_in_child=_reset_in_child)
