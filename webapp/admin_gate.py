"""Secrets that fail closed, and the admin's password gate with a back-off.

Weak secrets (placeholders compared case- and space-insensitively, shorter than 16 characters, or the
password equal to the salt) are refused by ``settings`` outside ``development``/``test``; in those two
modes the app still serves with them only while nothing but this machine can reach it: Streamlit bound
to a loopback address (``--server.address 127.0.0.1``), or no server at all (AppTest, bare scripts).

Failed logins back off per session and per address (the address's salted hash): two free tries, then
2, 4, 8 … seconds (at most five minutes) before the next attempt is even checked. Every failure and
every refusal is logged for the operator.
"""

from __future__ import annotations

import hmac
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from settings import DEV_ADMIN_PASSWORD, LOCAL_ENVIRONMENTS, Settings

_LOG = logging.getLogger(__name__)
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
FREE_FAILURES = 2
MAX_WAIT_S = 300.0


@dataclass(frozen=True)
class GateDecision:
    allowed: bool
    reason: str


def served_locally() -> bool:
    """True when this script run has no HTTP request behind it (AppTest, bare mode: nothing can reach
    it) or Streamlit listens on a loopback address only (``server.address``; unset means every
    interface)."""
    import streamlit as st
    from streamlit import config

    try:
        has_request = bool(dict(st.context.headers))
    except Exception:  # outside a script run there is no request either
        has_request = False
    return not has_request or str(config.get_option("server.address") or "") in LOOPBACK


def serving_problem(settings: Settings, *, local: bool | None = None) -> str | None:
    """Why the app must not serve at all with these settings (weak secrets where others can reach it)."""
    problems = settings.secret_problems()
    if not problems:
        return None
    if settings.environment in LOCAL_ENVIRONMENTS and (served_locally() if local is None else local):
        return None
    return (
        "This arena is not configured for a network: "
        + "; ".join(problems)
        + ". Set real secrets, or run in development mode bound to 127.0.0.1."
    )


def startup_problem() -> str | None:
    """Why this process must not serve pages now: settings refused (weak secrets in production, which
    ``Settings`` raises on) or weak secrets reachable from a network. Logged for the operator; the
    visitor's sentence names the variables, never their values."""
    from pydantic import ValidationError

    try:
        settings = Settings()
    except ValidationError as exc:
        _LOG.error("settings refused: %s", "; ".join(str(e["msg"]) for e in exc.errors()))
        reasons = "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
        return f"This arena is not configured: {reasons}."
    problem = serving_problem(settings)
    if problem:
        _LOG.error("%s", problem)
    return problem


def admin_available(settings: Settings) -> GateDecision:
    """Whether the admin page may be offered at all with these settings."""
    password = settings.admin_password.get_secret_value()
    if settings.environment not in LOCAL_ENVIRONMENTS and password == DEV_ADMIN_PASSWORD:
        return GateDecision(False, "The admin page is closed: the development default password is set.")
    if not password:
        return GateDecision(False, "The admin page is closed: no admin password is configured.")
    problem = serving_problem(settings)
    if problem:
        return GateDecision(False, f"The admin page is closed. {problem}")
    return GateDecision(True, "")


def wait_after(failures: int) -> float:
    """Seconds to wait after ``failures`` consecutive failures."""
    if failures <= FREE_FAILURES:
        return 0.0
    return float(min(2.0 ** (failures - FREE_FAILURES), MAX_WAIT_S))


class LoginThrottle:
    """Consecutive failed logins per key (a session, an address hash) and when the last one happened.

    Process-wide and thread-safe (the app keeps one in ``st.cache_resource``). With several replicas
    each keeps its own counts: an attacker gets at most one back-off schedule per replica.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._failures: dict[str, tuple[int, float]] = {}
        self._now = clock

    def wait_s(self, keys: Iterable[str]) -> float:
        now = self._now()
        with self._lock:
            waits = [
                wait_after(count) - (now - last)
                for count, last in (self._failures.get(k, (0, now)) for k in keys)
            ]
        return max([0.0, *waits])

    def failed(self, keys: Iterable[str]) -> int:
        now = self._now()
        worst = 0
        with self._lock:
            for key in keys:
                count = self._failures.get(key, (0, now))[0] + 1
                self._failures[key] = (count, now)
                worst = max(worst, count)
        return worst

    def succeeded(self, keys: Iterable[str]) -> None:
        with self._lock:
            for key in keys:
                self._failures.pop(key, None)


def check_password(
    settings: Settings, attempt: str, *, throttle: LoginThrottle, keys: tuple[str, ...]
) -> GateDecision:
    """The password check, refused without looking while a key is backing off; logs every failure."""
    available = admin_available(settings)
    if not available.allowed:
        return available
    wait = throttle.wait_s(keys)
    if wait > 0:
        _LOG.warning("admin login refused while backing off (%.0f s left): %s", wait, ", ".join(keys))
        return GateDecision(False, f"Too many failed attempts. Try again in {wait:.0f} seconds.")
    expected = settings.admin_password.get_secret_value().encode()
    if hmac.compare_digest(expected, attempt.encode()):
        throttle.succeeded(keys)
        _LOG.info("admin login: %s", ", ".join(keys))
        return GateDecision(True, "")
    failures = throttle.failed(keys)
    _LOG.warning("admin login failed (%d in a row): %s", failures, ", ".join(keys))
    return GateDecision(False, "Wrong password.")
