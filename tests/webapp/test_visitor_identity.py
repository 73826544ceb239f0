"""Identity that cannot be copied from a URL.

Probe of the old app: every page put ``?v=<visitor id>`` in the URL, so opening someone's shared link
showed their conversation and let you vote in their battle, the vote stored as theirs.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import create_engine, func, select

from db.models import Visitor
from tests.webapp.conftest import open_app
from tests.webapp.test_arena_app import TURN_1, _send, _texts
from webapp.visitor import sign, verify

ARENA = "pages/arena.py"


def test_cookie_values_verify_only_with_the_salt() -> None:
    visitor = "0123456789abcdef0123456789abcdef"
    value = sign(visitor, salt="a-long-hashing-salt-2")
    assert verify(value, salt="a-long-hashing-salt-2") == visitor
    assert verify(value, salt="another-long-salt-3") is None
    assert verify(visitor, salt="a-long-hashing-salt-2") is None, "a bare id is not a cookie"
    forged = "fedcba9876543210fedcba9876543210" + value[32:]
    assert verify(forged, salt="a-long-hashing-salt-2") is None
    assert verify(value + "x", salt="a-long-hashing-salt-2") is None
    assert verify(None, salt="s") is None


def test_an_old_v_link_grants_nothing(arena_env: Callable[..., str]) -> None:
    url = arena_env()
    owner = open_app(ARENA)
    _send(owner, TURN_1)
    owner_id = owner.session_state["visitor_id"]
    from streamlit.testing.v1 import AppTest

    from tests.webapp.conftest import APP, TIMEOUT_S

    stranger = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    stranger.query_params["v"] = owner_id
    stranger.run()
    stranger.switch_page(ARENA).run()
    assert stranger.session_state["visitor_id"] != owner_id
    assert "battle_id:anonymous" not in stranger.session_state, "the owner's battle is not resumed"
    assert TURN_1 not in _texts(stranger.text), "the owner's conversation is not shown"
    assert "v" not in stranger.query_params, "the parameter is dropped from the URL"
    with create_engine(url).connect() as conn:
        assert conn.scalar(select(func.count()).select_from(Visitor)) == 2
