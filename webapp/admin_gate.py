"""Secrets that fail closed, and the admin's password gate with a back-off.

Weak secrets (placeholders compared case- and space-insensitively, shorter than 16 characters, or the
password equal to the salt) are refused by ``settings`` outside ``development``/``test``. In those two
modes the app still serves with them only while nothing but this machine can reach it, judged per
request (:func:`request_is_local`): Streamlit bound to a loopback address (``--server.address
127.0.0.1``), no proxy header (``X-Forwarded-For``, ``Forwarded``, ``X-Real-IP``, any ``X-Forwarded-*``,
``Via`` …), a loopback ``Host`` (and ``Origin``, where the browser sent one), or no request at all
(AppTest, bare scripts). A reverse proxy on the same host is exactly what ``make run`` looks like
otherwise. Whenever ``ARENA_TRUSTED_PROXIES`` is set the app is meant for a network, so weak secrets are
refused there even in development.

Failed logins back off per session and per address (the address key's salted hash; every visitor of
unknown address shares one key): two free tries, then 2, 4, 8 … seconds (at most five minutes) before
the next attempt is even checked. On top of that a global budget: after ``ARENA_ADMIN_FAILURES_PER_HOUR``
failures in the last hour, from everyone together, every attempt waits until the oldest of them is an
hour old, so many sessions or addresses cannot share out a brute force. Every failure and every refusal
is logged for the operator. The failures live in the database (:class:`DatabaseLoginThrottle`, on
``db.admin_logins``), so the back-off and the budget hold across every server process on it, not once
per replica; a key's failures older than a day no longer count.
"""

from __future__ import annotations

import datetime as dt
import hmac
import ipaddress
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from sqlalchemy import Engine

from db import actions as db_actions
from db import utcnow
from db.actions import AdminFailureState, KeyFailures
from settings import DEV_ADMIN_PASSWORD, LOCAL_ENVIRONMENTS, Settings, SettingsProblem, load_settings

_LOG = logging.getLogger(__name__)
LOOPBACK_NAMES = frozenset({"localhost", "localhost."})
FREE_FAILURES = 2
MAX_WAIT_S = 300.0
GLOBAL_WINDOW_S = 3600.0
# Headers a browser talking to us directly never sends: something relayed the request.
_PROXY_HEADERS = frozenset({
    "forwarded", "x-real-ip", "via", "x-client-ip", "true-client-ip", "cf-connecting-ip",
    "x-cluster-client-ip",
})
_PROXY_HEADER_PREFIXES = ("x-forwarded-", "x-original-forwarded-")


@dataclass(frozen=True)
class GateDecision:
    allowed: bool
    reason: str


def is_loopback_host(host: str | None) -> bool:
    """Whether a ``Host`` value (or a bare server address) names this machine only: ``localhost``,
    127.0.0.0/8 or ``::1``, with or without a port, IPv6 in brackets or bare."""
    text = (host or "").strip().lower()
    if not text:
        return False
    if text.startswith("["):
        end = text.find("]")
        if end < 0 or (text[end + 1 :] and not _is_port(text[end + 1 :])):
            return False
        text = text[1:end]
    elif text.count(":") == 1:
        text, port = text.split(":", 1)
        if not _is_port(":" + port):
            return False
    if text in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


def _is_port(suffix: str) -> bool:
    return suffix.startswith(":") and suffix[1:].isdigit() and len(suffix) <= 6


def _is_loopback_origin(origin: str) -> bool:
    try:
        host = urlsplit(origin.strip()).netloc
    except ValueError:
        return False
    return is_loopback_host(host)


def request_is_local(headers: Mapping[str, str], *, server_address: str, peer: str | None = None) -> bool:
    """Whether one request can only have come from this machine: Streamlit listens on loopback, the
    peer (when Streamlit names one; it hides loopback peers) is loopback, nothing relayed the request
    (no proxy header), and its ``Host`` and any ``Origin`` name a loopback host."""
    if not is_loopback_host(server_address):
        return False
    if peer is not None and not is_loopback_host(peer):
        return False
    lowered = {name.lower(): value for name, value in headers.items()}
    if any(name in _PROXY_HEADERS or name.startswith(_PROXY_HEADER_PREFIXES) for name in lowered):
        return False
    if not is_loopback_host(lowered.get("host")):
        return False
    origin = lowered.get("origin")
    return origin is None or _is_loopback_origin(origin)


def served_locally() -> bool:
    """True when this script run has no HTTP request behind it (AppTest, bare mode: nothing can reach
    it), or its request is :func:`request_is_local` (Streamlit's ``server.address`` unset means every
    interface)."""
    import streamlit as st
    from streamlit import config

    try:
        headers = dict(st.context.headers)
        peer = st.context.ip_address
    except Exception:  # outside a script run there is no request either
        return True
    if not headers:
        return True
    server_address = str(config.get_option("server.address") or "")
    named_peer = peer if isinstance(peer, str) and peer else None
    return request_is_local(headers, server_address=server_address, peer=named_peer)


def serving_problem(settings: Settings, *, local: bool | None = None) -> str | None:
    """Why the app must not serve at all with these settings (weak secrets where others can reach it:
    any request not :func:`served_locally`, or ``ARENA_TRUSTED_PROXIES`` set, or outside development)."""
    problems = settings.secret_problems()
    if not problems:
        return None
    if settings.trusted_proxies:
        problems.append("ARENA_TRUSTED_PROXIES is set, so the arena is meant for a network")
    elif settings.environment in LOCAL_ENVIRONMENTS and (served_locally() if local is None else local):
        return None
    return (
        "This arena is not configured for a network: "
        + "; ".join(problems)
        + ". Set real secrets, or run in development mode bound to 127.0.0.1 and open it from this machine"
        " only (no proxy, no ARENA_TRUSTED_PROXIES)."
    )


def startup_problem() -> str | None:
    """Why this process must not serve pages now: any settings error (a value out of bounds, a variable
    that is not JSON, weak secrets in production) or weak secrets reachable from a network. Logged for
    the operator; the visitor's sentence names the variables, never their values."""
    try:
        settings = load_settings()
    except SettingsProblem as exc:
        _LOG.error("settings refused: %s", exc)
        return f"This arena is not configured: {exc}."
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


def wait_words(wait_s: float) -> str:
    """A wait in whole seconds, rounded up and never "0": "1 second", "2 seconds"."""
    seconds = max(1, math.ceil(wait_s))
    return f"{seconds} second" if seconds == 1 else f"{seconds} seconds"


def key_wait_s(failures: KeyFailures, now: dt.datetime) -> float:
    """Seconds one key still waits: the back-off after its consecutive failures, counted from the
    latest (0: now)."""
    if failures.last is None:
        return 0.0
    return max(0.0, wait_after(failures.failures) - (now - failures.last).total_seconds())


def global_wait_s(state: AdminFailureState, now: dt.datetime, *, budget: int) -> float:
    """Seconds everyone waits once the window's failures (``state`` read since ``now`` less
    :data:`GLOBAL_WINDOW_S`) have used the budget: until the oldest of them leaves the window."""
    if state.global_failures < budget or state.global_oldest is None:
        return 0.0
    return max(0.0, (state.global_oldest - now).total_seconds() + GLOBAL_WINDOW_S)


def throttle_wait_s(state: AdminFailureState, now: dt.datetime, *, failures_per_hour: int | None) -> float:
    """Seconds before an attempt may be checked: the longest of its keys' back-offs and, with
    ``failures_per_hour``, the global budget's (0: now)."""
    waits = [key_wait_s(failures, now) for failures in state.keys.values()]
    if failures_per_hour is not None:
        waits.append(global_wait_s(state, now, budget=failures_per_hour))
    return max([0.0, *waits])


class DatabaseLoginThrottle:
    """The login back-off read from and written to the arena's database (``db.admin_logins``), so
    every server process on that database shares one back-off per key and one global budget. Times
    are db's clock (``db.utcnow``), the one that stamps the failures."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def _state(self, keys: Iterable[str]) -> tuple[AdminFailureState, dt.datetime]:
        now = utcnow()
        since = now - dt.timedelta(seconds=GLOBAL_WINDOW_S)
        return db_actions.admin_failure_state(self._engine, keys=tuple(keys), since_global=since), now

    def wait_s(self, keys: Iterable[str], *, failures_per_hour: int | None = None) -> float:
        """Seconds before an attempt under ``keys`` may be checked (0: now)."""
        state, now = self._state(keys)
        return throttle_wait_s(state, now, failures_per_hour=failures_per_hour)

    def failed(self, keys: Iterable[str]) -> int:
        """Record a failure under every key (and the global key); the most consecutive failures of any."""
        keys = tuple(keys)
        db_actions.record_admin_failure(self._engine, keys=keys)
        state, _ = self._state(keys)
        return max([0, *(failures.failures for failures in state.keys.values())])

    def failures_last_hour(self) -> int:
        state, _ = self._state(())
        return state.global_failures

    def succeeded(self, keys: Iterable[str]) -> None:
        db_actions.clear_admin_failures(self._engine, keys=tuple(keys))


def check_password(
    settings: Settings, attempt: str, *, throttle: DatabaseLoginThrottle, keys: tuple[str, ...]
) -> GateDecision:
    """The password check, refused without looking while a key or the global budget is backing off;
    logs every failure."""
    available = admin_available(settings)
    if not available.allowed:
        return available
    wait = throttle.wait_s(keys, failures_per_hour=settings.admin_failures_per_hour)
    if wait > 0:
        _LOG.warning("admin login refused while backing off (%s left; %d failures in the last hour): %s",
                     wait_words(wait), throttle.failures_last_hour(), ", ".join(keys))
        return GateDecision(False, f"Too many failed attempts. Try again in {wait_words(wait)}.")
    expected = settings.admin_password.get_secret_value().encode()
    if hmac.compare_digest(expected, attempt.encode()):
        throttle.succeeded(keys)
        _LOG.info("admin login: %s", ", ".join(keys))
        return GateDecision(True, "")
    failures = throttle.failed(keys)
    _LOG.warning("admin login failed (%d in a row; %d in the last hour from everyone): %s",
                 failures, throttle.failures_last_hour(), ", ".join(keys))
    return GateDecision(False, "Wrong password.")
