"""Fixit Arena web app: the router. Run with ``streamlit run webapp/app.py`` (or ``make run``).

Only navigation lives here; every page is a short script under ``webapp/pages/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

# `streamlit run webapp/app.py` puts webapp/ on sys.path, not the repository root the layers live in.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import streamlit as st  # noqa: E402

from webapp import resources  # noqa: E402
from webapp.admin_gate import startup_problem  # noqa: E402
from webapp.visitor import current_visitor_id  # noqa: E402

st.set_page_config(page_title="Fixit Arena", page_icon="🛠️", layout="wide")
_problem = startup_problem()  # secrets fail closed: no page is served with weak secrets on a network
if _problem:
    st.error(_problem)
    st.stop()
# The visitor comes from a signed cookie (written on first sight), so a reload resumes the open battle.
current_visitor_id(salt=resources.settings().hash_salt.get_secret_value())

_PAGES = Path(__file__).resolve().parent / "pages"

navigation = st.navigation(
    {
        "Arena": [
            st.Page(_PAGES / "arena.py", title="Arena (anonymous)", icon="⚔️", default=True),
            st.Page(_PAGES / "side_by_side.py", title="Side by side (named)", icon="👥"),
            st.Page(_PAGES / "chat.py", title="Chat (single model)", icon="💬"),
        ],
        "Results": [
            st.Page(_PAGES / "leaderboard.py", title="Leaderboard", icon="🏆"),
            st.Page(_PAGES / "dataset.py", title="Dataset", icon="📦"),
        ],
        "More": [
            st.Page(_PAGES / "about.py", title="About", icon="ℹ️"),
            st.Page(_PAGES / "admin.py", title="Admin", icon="🔐"),
        ],
    }
)
navigation.run()
