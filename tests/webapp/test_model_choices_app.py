"""Defaults a newcomer can use: a base model is labelled in the pickers, left out of anonymous pairing,
never preselected, and loaded last; Chat and Side by side preselect the Fixing board's best."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import streamlit as st
from sqlalchemy import create_engine
from streamlit.testing.v1 import AppTest

from db import actions as db_actions
from tests.webapp.conftest import APP, BUDGET_MB, TIMEOUT_S, ScriptedEngine, open_app, warm_pool
from tests.webapp.test_arena_app import TURN_1

BASE_LABEL = "Echo 1B · base (not instruction-tuned)"


@pytest.fixture(scope="module")
def base_first_catalogue(tmp_path_factory: pytest.TempPathFactory, engine_server: ScriptedEngine) -> Path:
    """Three models behind the scripted engine, the base one first in the file (as ``gemma3-270m`` sits
    second in the shipped catalogue): the order alone would pick it."""
    path = tmp_path_factory.mktemp("catalogue") / "base_first.toml"
    entries = [("echo-base", "Echo 1B (base)", "base = true\n"), ("plain-a", "Plain A", ""),
               ("plain-b", "Plain B", "")]
    path.write_text("".join(
        f'[[model]]\nslug = "{slug}"\nname = "{name}"\nfamily = "remote"\n'
        f'source = "remote:{engine_server.url}"\nremote_model = "plain"\n{extra}\n'
        for slug, name, extra in entries
    ))
    return path


@pytest.fixture
def configure(
    arena_env: Callable[..., str], base_first_catalogue: Path, data_dir: Path
) -> Callable[..., str]:
    """Point the app at the catalogue above and wait until its three models are ready; the URL."""

    def setup(**settings: str) -> str:
        url = arena_env(base_first_catalogue, **settings)
        warm_pool(base_first_catalogue, data_dir, count=3)
        return url

    return setup


def test_the_pool_loads_the_models_that_can_play_first(
    configure: Callable[..., str], base_first_catalogue: Path, data_dir: Path
) -> None:
    from webapp import context as run
    from webapp import resources

    configure()
    pool = resources.pool(str(base_first_catalogue), BUDGET_MB, str(data_dir), "off")
    assert pool.slugs() == ["plain-a", "plain-b", "echo-base"], "the base model loads last"
    snapshot = run.pool_snapshot(run.reader())
    assert len(snapshot.usable) == 3 and set(snapshot.pairable) == {"plain-a", "plain-b"}
    at = open_app("pages/arena.py")
    assert at.subheader[0].value == "Model A", "the Arena is open"


def test_anonymous_pairing_leaves_the_base_model_out(configure: Callable[..., str]) -> None:
    url = configure()
    engine = create_engine(url)
    at = open_app("pages/arena.py")
    pairs = []
    for _ in range(4):  # drawn from three ready models, a base model would show up at once
        at.chat_input(key="anonymous:input").set_value(TURN_1).run()
        assert not at.exception, [e.value for e in at.exception]
        battle = db_actions.get_battle(engine, battle_id=at.session_state["battle_id:anonymous"])
        pairs.append({side.contestant.slug for side in battle.sides.values()})
        at.button(key="anonymous:skip").click().run()
    assert pairs == [{"plain-a", "plain-b"}] * 4


def test_named_modes_offer_the_base_model_labelled_and_preselect_the_others(
    configure: Callable[..., str],
) -> None:
    url = configure()
    at = open_app("pages/chat.py")
    picker = at.selectbox(key="direct:model_0")
    assert picker.value == "plain-a", "Chat's default is an instruction-tuned model"
    assert picker.options == ["Plain A", "Plain B", BASE_LABEL], "instruction-tuned first, base labelled"

    at = open_app("pages/side_by_side.py")
    assert [at.selectbox(key=f"named:model_{i}").value for i in (0, 1)] == ["plain-a", "plain-b"]
    assert at.selectbox(key="named:model_1").options[-1] == BASE_LABEL
    at.selectbox(key="named:model_1").set_value("echo-base").run()
    at.chat_input(key="named:input").set_value("hello there").run()
    assert not at.exception, [e.value for e in at.exception]
    battle = db_actions.get_battle(create_engine(url), battle_id=at.session_state["battle_id:named"])
    assert battle.sides["b"].contestant.slug == "echo-base", "a named battle may still pick it"


def test_chat_and_side_by_side_preselect_the_fixing_boards_best(configure: Callable[..., str]) -> None:
    configure(public_export_delay_hours="0")
    at = open_app("pages/chat.py")
    at.selectbox(key="direct:model_0").set_value("plain-b").run()
    at.chat_input(key="direct:input").set_value(TURN_1).run()
    at.checkbox(key="direct:correction").set_value(True)
    at.chat_input(key="direct:input").set_value("The current year is 2024.").run()
    at.button(key="direct:fixed_a").click().run()
    at.button(key="direct:skip").click().run()  # "New chat": the chat closes, the board counts it
    assert not at.exception, [e.value for e in at.exception]
    st.cache_data.clear()  # the board's one-minute cache runs out

    at = open_app("pages/chat.py")
    assert at.selectbox(key="direct:model_0").value == "plain-b", "1 of 1 fixed: first on the board"
    at = open_app("pages/side_by_side.py")
    assert [at.selectbox(key=f"named:model_{i}").value for i in (0, 1)] == ["plain-b", "plain-a"]

    # The order is the chosen scenario's: none judged in free chat, so the file's order there. (A picker
    # keeps its value while the tab is open, so a fresh tab opens on free chat.)
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.run()
    at.session_state["named:scenario"] = "free-chat"
    at.switch_page("pages/side_by_side.py").run()
    assert at.selectbox(key="named:scenario").value == "free-chat"
    assert [at.selectbox(key=f"named:model_{i}").value for i in (0, 1)] == ["plain-a", "plain-b"]


def test_the_arena_waits_for_two_models_it_may_pair(
    configure: Callable[..., str], base_first_catalogue: Path
) -> None:
    """Three usable models, but the admin turned one instruction-tuned model off: the base one does not
    make up the Arena's pair, so its page keeps waiting while Side by side opens."""
    url = configure()
    assert open_app("pages/arena.py").chat_input, "two models it may pair: the Arena opens"
    db_actions.set_contestant_enabled(create_engine(url), slug="plain-b", enabled=False)
    arena = open_app("pages/arena.py")
    assert any("the page opens as soon as 2 are ready" in i.value for i in arena.info)
    assert not arena.chat_input, "no battle can start with one model it may pair"
    side_by_side = open_app("pages/side_by_side.py")
    assert side_by_side.chat_input, "named modes still offer the base model"
