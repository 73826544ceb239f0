"""Fixit Arena web app: the router. Run it from the repository root with
``python -m streamlit run webapp/app.py`` (or ``make run``): ``python -m`` puts the root, where the layers
live, on the import path.

Only navigation lives here; every page is a short script under ``webapp/pages/``.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from webapp import resources
from webapp.admin_gate import startup_problem
from webapp.visitor import current_visitor_id

st.set_page_config(page_title="Fixit Arena", page_icon="🛠️", layout="wide")
_problem = startup_problem()  # secrets fail closed: no page is served with weak secrets on a network
if _problem:
    st.error(_problem)
    st.stop()
resources.start_observability(resources.settings())  # logs' format; metrics and /ready (once per process)
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
