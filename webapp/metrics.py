"""The web app's own Prometheus series and its readiness answer (the model series are
:mod:`inference.metrics`'; :mod:`wiring.observability` serves both on ``ARENA_METRICS_PORT``).

The flows count what visitors do, once it is written: battles opened, votes recorded and corrections
sent, by mode, and actions refused by a limit (``webapp.limits.Refusal``), by the limit's name. A page
that only shows a limit (a disabled vote bar) counts nothing: only a refused action does.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import Counter

from db import HUMAN_MODES
from db import actions as db_actions
from settings import Settings
from webapp import breaker
from webapp.limits import LIMITS, Refusal
from wiring import Readiness

__all__ = ["BATTLES", "CORRECTIONS", "REFUSALS", "VOTES", "counted", "readiness"]

BATTLES = Counter("arena_battles_opened", "Battles opened, by mode", ["mode"])
VOTES = Counter("arena_votes", "Votes recorded, by mode", ["mode"])
CORRECTIONS = Counter("arena_corrections", "Corrections sent (a message that corrects a reply), by mode",
                      ["mode"])
REFUSALS = Counter("arena_refusals", "Visitor actions refused by a limit, by the limit", ["limit"])

for _mode in HUMAN_MODES:  # every series exists from the start, at 0 (a dashboard shows a flat line)
    for _counter in (BATTLES, VOTES, CORRECTIONS):
        _counter.labels(_mode)
for _limit in LIMITS:
    REFUSALS.labels(_limit)

NEEDED_CONTESTANTS = 2  # the Arena pairs two models


def counted(problem: str | None) -> str | None:
    """``problem`` unchanged; counted in ``arena_refusals_total`` when it is a limit's refusal."""
    if isinstance(problem, Refusal):
        REFUSALS.labels(problem.limit).inc()
    return problem


def readiness(settings: Settings, engine: Any, pool: Any) -> Readiness:
    """Ready when the database answers and at least two enabled contestants' models are loaded.

    Models whose circuit breaker is open are reported (``resting``) but still count: the breaker is
    the database's, shared by every app server, so counting it would take all of them out of the load
    balancer at once, and a visitor would meet no page instead of the Arena's own words."""
    try:
        enabled = {c.slug for c in db_actions.list_contestants(engine, enabled_only=True)}
        resting = breaker.resting(settings, engine)
    except Exception as exc:  # any failure to read is "not reachable"; its words may hold the URL
        return Readiness(False, {"database": False, "database_error": type(exc).__name__,
                                 "contestants_ready": 0, "needed": NEEDED_CONTESTANTS})
    serving = enabled & set(pool.ready_slugs())
    return Readiness(len(serving) >= NEEDED_CONTESTANTS,
                     {"database": True, "contestants_ready": len(serving), "needed": NEEDED_CONTESTANTS,
                      "resting": len(serving & resting)})
