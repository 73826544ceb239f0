"""Small shared helpers of the repository modules: input checks, view conversion, read retry."""

from __future__ import annotations

import datetime as dt
import functools
import math
import re
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


# Whatever limit a caller passes, no text column takes more than this (a reply, a system prompt, an error).
HARD_MAX_CHARS = 200_000
# Integer columns are 32-bit on PostgreSQL; SQLite would take anything up to 2**63 and store it as is.
INT_MAX = 2**31 - 1


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable_text(text: str, *, max_chars: int = HARD_MAX_CHARS) -> str:
    """Model output made storable instead of refused: NUL and lone surrogates (a tokenizer can emit
    either) become U+FFFD, so the reply is kept and the substitution visible; cut to ``max_chars``."""
    return _UNSTORABLE.sub("\ufffd", text)[:max_chars]


def require_text(value: str, *, what: str, max_chars: int, allow_empty: bool = False) -> str:
    """Refuse non-strings, NUL characters, invalid Unicode (lone surrogates), empty (unless allowed) and
    oversize text with :class:`InvalidInput`, the same on SQLite (which would store them) and PostgreSQL
    (which would fail with an untyped driver error)."""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string")
    if "\x00" in value:
        raise InvalidInput(f"{what} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{what} is not valid Unicode (a lone surrogate)") from exc
    if not allow_empty and not value.strip():
        raise InvalidInput(f"{what} is empty")
    limit = min(max_chars, HARD_MAX_CHARS)
    if len(value) > limit:
        raise InvalidInput(f"{what} is {len(value)} characters; the limit is {limit}")
    return value


def optional_text(value: str | None, *, what: str, max_chars: int) -> str | None:
    """:func:`require_text` for a nullable column (None passes; empty text is allowed)."""
    return None if value is None else require_text(value, what=what, max_chars=max_chars, allow_empty=True)


def require_int(value: int | None, *, what: str, minimum: int = 0) -> int | None:
    """An integer in ``[minimum, 2**31 - 1]`` (a 32-bit column), or None; booleans are not integers."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{what} must be an integer")
    if not minimum <= value <= INT_MAX:
        raise InvalidInput(f"{what} must be between {minimum} and {INT_MAX}; got {value}")
    return value


def require_duration(value: float | None, *, what: str) -> float | None:
    """A finite, non-negative number of milliseconds (NaN and infinity are refused), or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"{what} must be a number")
    if not math.isfinite(value) or value < 0:
        raise InvalidInput(f"{what} must be a finite number >= 0; got {value!r}")
    return float(value)


def require_battle_id(value: str) -> str:
    """A battle id as the caller gave it (uuid text): bad text is refused before it reaches a query."""
    return require_text(value, what="battle id", max_chars=36)


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
