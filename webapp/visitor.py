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

The address is never stored in clear: ``db`` keeps only its salted HMAC (``db.repository.hash_address``).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import uuid
from collections.abc import Sequence

import streamlit as st

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


def current_address(*, trusted_proxies: Sequence[str] = ()) -> str | None:
    """The visitor's network address: the connection's peer, or, when that peer is one of
    ``trusted_proxies`` (``ARENA_TRUSTED_PROXIES``), the last address of its ``X-Forwarded-For`` (the
    one that proxy wrote; a client's own entries to the left of it are ignored)."""
    try:
        address = st.context.ip_address
        forwarded = st.context.headers.get("X-Forwarded-For") if address in trusted_proxies else None
    except Exception:  # outside a browser session (AppTest, bare mode) there is no address
        return None
    if isinstance(forwarded, str) and forwarded.strip():
        return forwarded.split(",")[-1].strip() or None
    return address if isinstance(address, str) and address else None
