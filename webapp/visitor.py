"""Anonymous visitors without cookies: an id in ``st.session_state`` mirrored into the ``?v=`` query param.

The query parameter is what makes a reload (same URL) come back as the same visitor, so the open battle
can be resumed from the database. The address is never stored in clear: ``db`` keeps only its salted
HMAC (``db.repository.hash_address``), for rate limits and abuse checks.
"""

from __future__ import annotations

import re
import uuid

import streamlit as st

_VISITOR_KEY = "visitor_id"
_PARAM = "v"
_VALID = re.compile(r"^[0-9a-f]{32}$")


def current_visitor_id() -> str:
    """This browser tab's visitor id: from session state, else the URL, else a fresh one (then in the URL)."""
    known = st.session_state.get(_VISITOR_KEY)
    if isinstance(known, str) and _VALID.match(known):
        _ensure_param(known)
        return known
    from_url = st.query_params.get(_PARAM, "")
    visitor = from_url if _VALID.match(from_url) else uuid.uuid4().hex
    st.session_state[_VISITOR_KEY] = visitor
    _ensure_param(visitor)
    return visitor


def _ensure_param(visitor: str) -> None:
    if st.query_params.get(_PARAM) != visitor:
        st.query_params[_PARAM] = visitor


def current_address() -> str | None:
    try:
        address = st.context.ip_address
    except Exception:  # outside a browser session (AppTest, bare mode) there is no address
        return None
    return address if isinstance(address, str) and address else None
