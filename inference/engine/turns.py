"""Processes (and threads) of one machine taking turns at work whose result they share through a file:
converting a model's weights once (:mod:`inference.weight_store`), measuring ``auto``'s verdict once
(:mod:`inference.engine.weight_policy`). An exclusive ``flock`` on a lock file beside the result; each
holder opens the file itself, so threads of one process exclude each other as processes do."""

from __future__ import annotations

import contextlib
import fcntl
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

log = logging.getLogger(__name__)


@contextlib.contextmanager
def taking_turns(lock: Path, *, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold ``lock`` (created with its folder where missing) for the body; where another holds it, call
    ``on_wait()`` and wait for it. A lock that cannot be made (a read-only cache) is logged and skipped:
    the body runs without it, as it would alone."""
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        handle = open(lock, "a+b")  # noqa: SIM115  (closed below, after the lock is released)
    except OSError as exc:
        log.warning("no lock %s: %s", lock, exc)
        yield
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
