"""Anonymous visitors: an id in a signed cookie, never in a URL.

The id lives in the ``fixit_visitor`` cookie as ``<id>.<signature>``, the signature an HMAC-SHA256 of
the id with ``ARENA_HASH_SALT``. Streamlit hands the script the cookies of the request that opened the
session (``st.context.cookies``), so a reload of the same browser comes back as the same visitor and
resumes its open battle from the database; a forged or copied-by-hand value without the right
signature is a new visitor. Links carry nothing: an old ``?v=<id>`` parameter is dropped unread.

Streamlit 1.67 has no server-side way to set a cookie on its response (the page is served before any
script runs and the script talks to the browser over a websocket), so the cookie is written by the
browser: a tiny ``st.html`` script with ``unsafe_allow_javascript=True`` whose only content is the
signed value we computed (hex and a dot, nothing from a visitor or a model). It is therefore not
``HttpOnly``; it is ``SameSite=Strict``, ``Secure`` on https, and scoped to the site's path. Every
model output is rendered escaped (``webapp/render.py``), so no page script but ours runs to read it.

The address is never stored in clear: ``db`` keeps only its salted HMAC (``db.actions.hash_address``)
of its *key* (:func:`address_key`): an IPv4 address as it is, an IPv6 address's /64 (one subscriber's
network; an attacker rotating through it is still one address), and, where the address is not known
(no request, a loopback peer that is not a trusted proxy, a trusted proxy that sent no
``X-Forwarded-For``, anything unparsable), the fixed key ``unknown``: every such visitor shares one
bucket of the per-address limits (they fail closed), and the server log warns once per process.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import re
import threading
import uuid
from collections.abc import Sequence

import streamlit as st

_LOG = logging.getLogger(__name__)
COOKIE = "fixit_visitor"
COOKIE_MAX_AGE_S = 365 * 24 * 3600
_VISITOR_KEY = "visitor_id"
_LEGACY_PARAM = "v"
_VALID_ID = re.compile(r"^[0-9a-f]{32}$")


def sign(visitor: str, *, salt: str) -> str:
    """The cookie value for ``visitor``: ``<id>.<first 32 hex digits of its HMAC>``."""
    digest = hmac.new(salt.encode(), b"visitor-cookie:" + visitor.encode(), hashlib.sha256).hexdigest()
    return f"{visitor}.{digest[:32]}"


def verify(value: str | None, *, salt: str) -> str | None:
    """The visitor id of a cookie value, or None if it is malformed or its signature is wrong."""
    if not value or value.count(".") != 1:
        return None
    visitor = value.split(".", 1)[0]
    if not _VALID_ID.match(visitor):
        return None
    return visitor if hmac.compare_digest(sign(visitor, salt=salt), value) else None


def current_visitor_id(*, salt: str) -> str:
    """This browser's visitor id: this session's, else the signed cookie's, else a fresh one.

    A fresh id is written to the cookie once per session; a ``?v=`` parameter is removed from the URL.
    """
    if _LEGACY_PARAM in st.query_params:
        del st.query_params[_LEGACY_PARAM]
    known = st.session_state.get(_VISITOR_KEY)
    if isinstance(known, str) and _VALID_ID.match(known):
        return known
    visitor = verify(_cookie(), salt=salt) or uuid.uuid4().hex
    st.session_state[_VISITOR_KEY] = visitor
    if visitor != verify(_cookie(), salt=salt):
        _write_cookie(sign(visitor, salt=salt))
    return visitor


def _cookie() -> str | None:
    try:
        value = st.context.cookies.get(COOKIE)
    except Exception:  # outside a browser session there are no cookies
        return None
    return value if isinstance(value, str) else None


def _write_cookie(value: str) -> None:
    """Have the browser store the signed value (see the module docstring for why it is done this way)."""
    if not re.fullmatch(r"[0-9a-f]{32}\.[0-9a-f]{32}", value):  # only our own hex ever reaches the page
        raise ValueError("not a signed visitor id")
    st.html(
        "<script>document.cookie = "
        f"'{COOKIE}={value}; path=/; max-age={COOKIE_MAX_AGE_S}; SameSite=Strict'"
        " + (location.protocol === 'https:' ? '; Secure' : '');</script>",
        unsafe_allow_javascript=True,
    )


UNKNOWN_ADDRESS = "unknown"  # the one key every visitor of unknown address shares
IPV6_PREFIX = 64
# Streamlit reports a loopback peer as no address at all (``st.context.ip_address`` is None for these).
_HIDDEN_LOOPBACK_PEERS = ("127.0.0.1", "::1")
_UNKNOWN_WARNED = threading.Event()

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_ip(text: str) -> IPAddress | None:
    """An address as a peer or a proxy writes it (``203.0.113.9``, ``203.0.113.9:4711``, ``2001:db8::1``,
    ``[2001:db8::1]:443``, quoted), or None when it is none (``unknown``, ``_hidden``, garbage)."""
    text = text.strip().strip('"').strip()
    if text.startswith("["):
        end = text.find("]")
        candidates = [text[1:end]] if end > 0 else []
    elif text.count(":") == 1:  # IPv4 with a port
        candidates = [text.split(":", 1)[0]]
    else:
        candidates = [text]
    for candidate in candidates:
        try:
            return ipaddress.ip_address(candidate)
        except ValueError:
            continue
    return None


def address_key(address: str | None) -> str:
    """What per-address limits count under: an IPv4 address itself, an IPv6 address's /64 network (an
    IPv4-mapped one is its IPv4 address), and ``unknown`` for no address or one that does not parse."""
    ip = parse_ip(address) if address else None
    if ip is None or ip.is_unspecified:
        return UNKNOWN_ADDRESS
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((int(ip), IPV6_PREFIX), strict=False))
    return str(ip)


def peer_is_trusted(peer: str | None, trusted_proxies: Sequence[str]) -> bool:
    """Whether the connection's peer is one of ``trusted_proxies`` (addresses or networks). A peer of
    None is Streamlit's loopback peer (127.0.0.1 or ::1): trusted when either is listed."""
    networks = []
    for proxy in trusted_proxies:
        try:
            networks.append(ipaddress.ip_network(proxy.strip(), strict=False))
        except ValueError:  # settings refuse these; never trust what does not parse
            continue
    candidates = _HIDDEN_LOOPBACK_PEERS if peer is None else (peer,)
    for candidate in candidates:
        ip = parse_ip(candidate)
        if ip is None:
            continue
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if any(ip in network for network in networks):
            return True
    return False


def client_address(peer: str | None, forwarded_for: str | None, trusted_proxies: Sequence[str]) -> str | None:
    """The visitor's address from the peer (None: a loopback peer) and its ``X-Forwarded-For``: from a
    trusted proxy the header's last entry (the one the proxy wrote; a client's own entries to its left
    are ignored), None when the proxy wrote none; from any other peer the peer itself."""
    if peer_is_trusted(peer, trusted_proxies):
        last = (forwarded_for or "").split(",")[-1].strip()
        return last or None
    return peer or None


def current_address(*, trusted_proxies: Sequence[str] = ()) -> str | None:
    """This request's visitor address (:func:`client_address`), or None where it is not known: no
    request behind the run (AppTest, bare mode), a loopback peer that is not a trusted proxy."""
    try:
        has_request = bool(dict(st.context.headers))
        peer = st.context.ip_address
        forwarded = st.context.headers.get("X-Forwarded-For")
    except Exception:  # outside a browser session (AppTest, bare mode) there is no address
        return None
    if not has_request:
        return None
    peer_text = peer if isinstance(peer, str) and peer else None
    return client_address(peer_text, forwarded if isinstance(forwarded, str) else None, trusted_proxies)


def current_address_key(*, trusted_proxies: Sequence[str] = ()) -> str:
    """This request's :func:`address_key`; the first unknown one in the process is logged as a warning
    (every visitor of unknown address then shares one bucket of the per-address limits)."""
    key = address_key(current_address(trusted_proxies=trusted_proxies))
    if key == UNKNOWN_ADDRESS and not _UNKNOWN_WARNED.is_set():
        _UNKNOWN_WARNED.set()
        _LOG.warning(
            "visitor addresses are unknown (no request address, a loopback peer that is not in "
            "ARENA_TRUSTED_PROXIES, or a trusted proxy that sent no X-Forwarded-For): all such visitors "
            "share one bucket of the per-address limits and of the admin login back-off"
        )
    return key
