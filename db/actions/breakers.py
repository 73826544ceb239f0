"""Circuit breakers: a contestant whose engine keeps failing leaves the pairing for a while, then gets one
trial.

A breaker is closed (no row, or ``open_until`` NULL), open (``open_until`` in the future: the Arena does
not draw the model and the pickers do not offer it) or half-open (``open_until`` passed). The web app
reports every reply that ended, except a visitor's cancel and a full line (neither is the engine's
fault), with :func:`record_reply`:

- a failed reply while closed extends the streak (or starts one, when the streak is older than
  ``BreakerRules.window``); the ``BreakerRules.failures``-th failure in a row opens the breaker for
  ``BreakerRules.cooldown``;
- a failed reply while open or half-open opens it again for a whole cool-down;
- a good reply closes it and ends the streak (also one from a battle that drew the model before it
  opened: the engine answered).

Half-open is one trial: :func:`claim_trials`, called when a reply is about to start, turns a half-open
breaker open again for a cool-down in one conditional UPDATE, so only the first battle to reach it tries
the engine; the trial's reply then closes or re-opens it. A trial whose process dies leaves the breaker
open until that cool-down passes, then half-open again.

The state is in the database, so it holds across every server process. Each function takes ``now`` (the
caller's clock: tests move it, the web app passes :func:`db.models.utcnow`). Concurrent reports on one
contestant are decided one after the other (SQLite's exclusive writer; on PostgreSQL the contestant's
row is locked first).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from db.checks import contestant_by_slug, require_aware, require_int, require_text, retry_read
from db.engine import read_session, write_session
from db.errors import InvalidInput
from db.models import Contestant, ModelBreaker

__all__ = ["BreakerRules", "BreakerState", "claim_trials", "open_breakers", "record_reply"]

BreakerState = Literal["closed", "open", "half_open"]


@dataclass(frozen=True)
class BreakerRules:
    """When a breaker opens (``failures`` failed replies in a row, the first within ``window`` of the
    last) and how long it stays open (``cooldown``)."""

    failures: int
    window: dt.timedelta
    cooldown: dt.timedelta

    def __post_init__(self) -> None:
        require_int(self.failures, what="failures", minimum=1)
        if self.window <= dt.timedelta(0) or self.cooldown <= dt.timedelta(0):
            raise InvalidInput("window and cooldown must be positive")


def _state(row: ModelBreaker | None, now: dt.datetime) -> BreakerState:
    if row is None or row.open_until is None:
        return "closed"
    return "open" if row.open_until > now else "half_open"


def _locked_row(session: Session, slug: str) -> ModelBreaker:
    """The contestant's breaker row (created closed when missing), its contestant row locked first on
    PostgreSQL so two reports on one contestant take turns."""
    contestant = contestant_by_slug(session, slug)
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(Contestant.id).where(Contestant.id == contestant.id).with_for_update())
    row = session.get(ModelBreaker, contestant.id, populate_existing=True)
    if row is None:
        row = ModelBreaker(contestant_id=contestant.id, failures=0)
        session.add(row)
    return row


def record_reply(
    engine: Engine, *, slug: str, failed: bool, rules: BreakerRules, now: dt.datetime
) -> BreakerState:
    """Count one reply of ``slug`` that ended (``failed``: with an error); the breaker's state after it.
    A good reply to a breaker with nothing to clear (the usual case) writes nothing."""
    require_text(slug, what="slug", max_chars=100)
    require_aware(now, what="now")
    if not failed and _already_clear(engine, slug):
        return "closed"
    with write_session(engine) as session:
        row = _locked_row(session, slug)
        row.updated_at = now
        if not failed:
            row.failures, row.streak_started_at, row.open_until = 0, None, None
        elif row.open_until is not None:  # open, or half-open and its trial failed: a whole cool-down more
            row.failures, row.streak_started_at, row.open_until = 0, None, now + rules.cooldown
        else:
            fresh = row.streak_started_at is None or now - row.streak_started_at > rules.window
            row.failures = 1 if fresh else row.failures + 1
            row.streak_started_at = now if fresh else row.streak_started_at
            if row.failures >= rules.failures:
                row.failures, row.streak_started_at, row.open_until = 0, None, now + rules.cooldown
        return _state(row, now)


@retry_read
def _already_clear(engine: Engine, slug: str) -> bool:
    """Whether ``slug`` is a known contestant whose breaker is closed with no streak (no row counts)."""
    query = (select(ModelBreaker.failures, ModelBreaker.streak_started_at, ModelBreaker.open_until)
             .select_from(Contestant)
             .outerjoin(ModelBreaker, ModelBreaker.contestant_id == Contestant.id)
             .where(Contestant.slug == slug))
    with read_session(engine) as session:
        found = session.execute(query).first()
    if found is None:
        return False  # unknown: the write path says so
    failures, streak, open_until = found
    return not failures and streak is None and open_until is None


def claim_trials(
    engine: Engine, *, slugs: Sequence[str], cooldown: dt.timedelta, now: dt.datetime
) -> tuple[str, ...]:
    """Of ``slugs`` whose reply is about to start, those whose breaker was half-open: each is open again
    for ``cooldown`` while this reply is its trial (no other battle draws it meanwhile)."""
    for slug in slugs:
        require_text(slug, what="slug", max_chars=100)
    require_aware(now, what="now")
    if not slugs:
        return ()
    with write_session(engine) as session:
        ids = select(Contestant.id).where(Contestant.slug.in_(list(slugs)))
        # One conditional UPDATE: of two processes racing for a trial, the second matches no row.
        claimed = session.scalars(
            update(ModelBreaker)
            .where(ModelBreaker.contestant_id.in_(ids), ModelBreaker.open_until <= now)
            .values(open_until=now + cooldown, updated_at=now)
            .returning(ModelBreaker.contestant_id)
            .execution_options(synchronize_session=False)
        ).all()
        if not claimed:
            return ()
        return tuple(sorted(session.scalars(select(Contestant.slug).where(Contestant.id.in_(claimed)))))


@retry_read
def open_breakers(engine: Engine, *, now: dt.datetime) -> frozenset[str]:
    """The slugs whose breaker is open at ``now``: out of the pairing and the pickers."""
    require_aware(now, what="now")
    with read_session(engine) as session:
        rows = session.scalars(
            select(Contestant.slug).join(ModelBreaker).where(ModelBreaker.open_until > now)
        ).all()
    return frozenset(rows)
