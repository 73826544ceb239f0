"""The circuit breaker as the web app uses it; ``db.actions.breakers`` keeps the state, in the database,
so every server process agrees on it.

A model whose replies fail ``ARENA_BREAKER_FAILURES`` times in a row (the first within
``ARENA_BREAKER_WINDOW_S`` of the last) is resting for ``ARENA_BREAKER_COOLDOWN_S``: the Arena's pair
sampler does not draw it and the pickers do not offer it (:func:`resting`, read by
``webapp.context.ready_contestants``). Battles that already have it go on (a Retry still reaches its
engine). After the cool-down the next battle that reaches it is its one trial (:func:`claim_trials`); a
good reply closes the breaker, a failed one rests the model again. A visitor's cancel and a full line
(``ModelBusyError``) say nothing about the engine and are not counted (:func:`record`).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from typing import Any

from db import actions as db_actions
from inference.protocol import GenerationResult
from settings import Settings

_LOG = logging.getLogger(__name__)


def rules(settings: Settings) -> db_actions.BreakerRules | None:
    """The breaker's rules from the settings; None when ``ARENA_BREAKER_FAILURES`` is 0 (no breaker)."""
    if settings.breaker_failures == 0:
        return None
    return db_actions.BreakerRules(
        failures=settings.breaker_failures,
        window=dt.timedelta(seconds=settings.breaker_window_s),
        cooldown=dt.timedelta(seconds=settings.breaker_cooldown_s),
    )


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def resting(settings: Settings, engine: Any) -> frozenset[str]:
    """The models whose breaker is open now: out of the pairing and the pickers. (Settings and engine,
    not a ``Context``: ``webapp.context`` asks this module.)"""
    if rules(settings) is None:
        return frozenset()
    return db_actions.open_breakers(engine, now=_now())


def claim_trials(settings: Settings, engine: Any, slugs: Sequence[str]) -> None:
    """Replies of ``slugs`` are about to start: a half-open model's reply becomes its one trial. Never
    raises (the turn's generations are already in the ledger): a claim not written only means that
    another battle may try the model too."""
    found = rules(settings)
    if found is None:
        return
    try:
        claimed = db_actions.claim_trials(engine, slugs=slugs, cooldown=found.cooldown, now=_now())
    except Exception:  # noqa: BLE001
        _LOG.exception("circuit breakers of %s: the trial was not claimed", ", ".join(slugs))
        return
    for slug in claimed:
        _LOG.info("circuit breaker of %s: half-open, this reply is its trial", slug)


def record(settings: Settings, engine: Any, *, slug: str, result: GenerationResult, busy: bool) -> None:
    """Count a reply of ``slug`` that ended; a cancel and a full line (``busy``) are not counted. Never
    raises: a breaker that cannot be written must not lose the reply (it is stored already)."""
    found = rules(settings)
    if found is None or busy or result.finish_reason == "cancelled":
        return
    try:
        state = db_actions.record_reply(engine, slug=slug, failed=result.finish_reason == "error",
                                        rules=found, now=_now())
    except Exception:  # noqa: BLE001 -- the reply is stored; the breaker waits for the next one
        _LOG.exception("circuit breaker of %s: the reply was not counted", slug)
        return
    if state == "open":
        _LOG.warning("circuit breaker of %s is open: out of the pairing for %g s", slug,
                     settings.breaker_cooldown_s)
