"""One generation in flight per visitor: a second tab (or a double click) waits for the first.

Process-wide (one registry per server process, from ``st.cache_resource``); behind several replicas a
visitor could run one generation per replica, which the per-minute limits, counted in the database,
still bound.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Busy(RuntimeError):
    """This visitor already has a generation running."""


class InFlight:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[int] = set()

    def busy(self, visitor_id: int) -> bool:
        with self._lock:
            return visitor_id in self._running

    @contextmanager
    def hold(self, visitor_id: int) -> Iterator[None]:
        """Mark the visitor's generation as running for the block; :class:`Busy` if one already is."""
        with self._lock:
            if visitor_id in self._running:
                raise Busy(str(visitor_id))
            self._running.add(visitor_id)
        try:
            yield
        finally:
            with self._lock:
                self._running.discard(visitor_id)
