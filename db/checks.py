"""Small shared helpers of the repository modules: input checks, view conversion, read retry."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from sqlalchemy import select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from db.errors import InvalidInput, NotFound
from db.models import Contestant
from db.views import ContestantView

P = ParamSpec("P")
T = TypeVar("T")


def retry_read(fn: Callable[P, T]) -> Callable[P, T]:
    """Retry an idempotent read once when its connection died under it (e.g. a PostgreSQL restart).

    Pre-ping catches most dead pooled connections at checkout; this catches the rest (a connection that
    died between the ping and the query). Writes are never retried here: a lost commit acknowledgement
    is ambiguous, so the caller sees the error instead of a possible double write.
    """

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except DBAPIError as exc:
            if not exc.connection_invalidated:
                raise
            return fn(*args, **kwargs)

    return wrapper


def require_text(value: str, *, what: str, max_chars: int, allow_empty: bool = False) -> str:
    """Refuse empty (unless allowed) or oversize text with :class:`InvalidInput`."""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string")
    if not allow_empty and not value.strip():
        raise InvalidInput(f"{what} is empty")
    if len(value) > max_chars:
        raise InvalidInput(f"{what} is {len(value)} characters; the limit is {max_chars}")
    return value


def require_choice(value: str, allowed: tuple[str, ...], *, what: str) -> str:
    if value not in allowed:
        raise InvalidInput(f"{what} must be one of {', '.join(allowed)}; got {value!r}")
    return value


def require_aware(value: dt.datetime | None, *, what: str) -> dt.datetime | None:
    if value is not None and value.tzinfo is None:
        raise InvalidInput(f"{what} must be timezone-aware (UTC)")
    return value


def contestant_view(row: Contestant) -> ContestantView:
    return ContestantView(
        id=row.id,
        slug=row.slug,
        display_name=row.display_name,
        family=row.family,
        source=row.source,
        params=dict(row.params or {}),
        enabled=row.enabled,
    )


def contestant_by_slug(session: Session, slug: str) -> Contestant:
    row = session.scalar(select(Contestant).where(Contestant.slug == slug))
    if row is None:
        raise NotFound(f"no contestant {slug!r}")
    return row
