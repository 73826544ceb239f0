"""Failed admin logins, kept in the database so the login back-off holds across every server process.

Each failure is one row per throttle key (a session, an address hash) plus one under
:data:`GLOBAL_KEY`, written in ONE transaction by :func:`record_admin_failure`. A key's consecutive
failures are its rows of the last :data:`FAILURE_MEMORY` (a successful login deletes them:
:func:`clear_admin_failures`); the global budget counts the :data:`GLOBAL_KEY` rows of a window the
caller names. :func:`admin_failure_state` reads both; the back-off rules themselves (how long to wait
after how many) are the web app's (``webapp.admin_gate``). Rows older than :data:`FAILURE_MEMORY` are
pruned whenever a failure is recorded.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from sqlalchemy import Engine, delete, func, select

from db.checks import require_aware, require_text, retry_read
from db.engine import read_session, write_session
from db.errors import InvalidInput
from db.models import AdminLoginFailure, utcnow

__all__ = [
    "FAILURE_MEMORY",
    "GLOBAL_KEY",
    "AdminFailureState",
    "KeyFailures",
    "admin_failure_state",
    "clear_admin_failures",
    "record_admin_failure",
]

GLOBAL_KEY = "global"
# Failures older than this count for nothing (a key's back-off starts over) and are pruned.
FAILURE_MEMORY = dt.timedelta(hours=24)
_KEY_MAX_CHARS = 80


class KeyFailures(NamedTuple):
    """One key's consecutive failures (of the last :data:`FAILURE_MEMORY`) and the latest one's time."""

    failures: int
    last: dt.datetime | None


@dataclass(frozen=True)
class AdminFailureState:
    """What the throttle decides from: per key its :class:`KeyFailures`, and the failures from everyone
    since the caller's ``since_global`` with the oldest one's time (None when there are none)."""

    keys: Mapping[str, KeyFailures]
    global_failures: int
    global_oldest: dt.datetime | None


def _checked_keys(keys: Iterable[str]) -> tuple[str, ...]:
    """The distinct keys, in order; each non-empty text of at most 80 characters, never the global key."""
    if isinstance(keys, str):
        raise InvalidInput("keys must be a collection of keys, not one string")
    checked: dict[str, None] = {}
    for key in keys:
        require_text(key, what="throttle key", max_chars=_KEY_MAX_CHARS)
        if key == GLOBAL_KEY:
            raise InvalidInput(f"{GLOBAL_KEY!r} is the global key, not a throttle key")
        checked[key] = None
    return tuple(checked)


def record_admin_failure(engine: Engine, *, keys: Iterable[str]) -> dt.datetime:
    """Record one failed login: a row per key and one under :data:`GLOBAL_KEY`, all at the same time,
    in one transaction (which also prunes rows older than :data:`FAILURE_MEMORY`); that time."""
    distinct = _checked_keys(keys)
    with write_session(engine) as session:
        now = utcnow()
        session.execute(delete(AdminLoginFailure).where(AdminLoginFailure.failed_at < now - FAILURE_MEMORY))
        session.add_all(AdminLoginFailure(key=key, failed_at=now) for key in (*distinct, GLOBAL_KEY))
        return now


def clear_admin_failures(engine: Engine, *, keys: Iterable[str]) -> int:
    """Forget the keys' failures after a successful login (the global ones stay: they are everyone's
    budget); how many rows went."""
    distinct = _checked_keys(keys)
    if not distinct:
        return 0
    with write_session(engine) as session:
        result = session.execute(
            delete(AdminLoginFailure)
            .where(AdminLoginFailure.key.in_(distinct))
            .execution_options(synchronize_session=False)
        )
        return int(getattr(result, "rowcount", 0) or 0)


@retry_read
def admin_failure_state(
    engine: Engine, *, keys: Iterable[str], since_global: dt.datetime
) -> AdminFailureState:
    """Each key's consecutive failures and latest failure time (failures older than
    :data:`FAILURE_MEMORY` do not count; an unknown key is ``(0, None)``), and the failures from
    everyone at or after ``since_global`` with the oldest one's time."""
    distinct = _checked_keys(keys)
    require_aware(since_global, what="since_global")
    with read_session(engine) as session:
        counted = {key: KeyFailures(0, None) for key in distinct}
        if distinct:
            rows = session.execute(
                select(AdminLoginFailure.key, func.count(), func.max(AdminLoginFailure.failed_at))
                .where(AdminLoginFailure.key.in_(distinct),
                       AdminLoginFailure.failed_at >= utcnow() - FAILURE_MEMORY)
                .group_by(AdminLoginFailure.key)
            )
            for key, count, last in rows:
                counted[key] = KeyFailures(int(count), last)
        total, oldest = session.execute(
            select(func.count(), func.min(AdminLoginFailure.failed_at))
            .where(AdminLoginFailure.key == GLOBAL_KEY, AdminLoginFailure.failed_at >= since_global)
        ).one()
    return AdminFailureState(keys=counted, global_failures=int(total or 0), global_oldest=oldest)

