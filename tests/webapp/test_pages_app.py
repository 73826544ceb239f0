"""Every other page in AppTest on a real database: side by side, chat, leaderboard, dataset, admin, about."""

from __future__ import annotations

import datetime as dt
import io
import json
from collections.abc import Callable

import pyarrow.parquet as pq
import streamlit as st
from sqlalchemy import create_engine

from db import actions as db_actions
from db import boards as db_boards
from settings import DEV_ADMIN_PASSWORD
from tests.db.conftest import back_date
from tests.webapp.conftest import open_app
from tests.webapp.test_arena_app import TURN_1, _texts


def _send(at, mode: str, text: str, *, route: str | None = None) -> None:  # noqa: ANN001
    if route is not None:
        at.radio(key=f"{mode}:route").set_value(route)
    at.chat_input(key=f"{mode}:input").set_value(text).run()
    assert not at.exception, [e.value for e in at.exception]


def _anonymous_battle(vote: str) -> str:
    at = open_app("pages/arena.py")
    at.chat_input(key="anonymous:input").set_value(TURN_1).run()
    at.button(key=f"anonymous:vote_{vote}").click().run()
    return str(at.session_state["battle_id:anonymous"])


def test_side_by_side_named_models_vote_kept_off_default_board(arena_env: Callable[..., str]) -> None:
    url = arena_env()
    at = open_app("pages/side_by_side.py")
    at.selectbox(key="named:model_0").set_value("tiny-gemma3")
    at.selectbox(key="named:model_1").set_value("tiny-llama").run()
    assert "Tiny Gemma 3 (random)" in at.subheader[0].value, "named before the vote"
    _send(at, "named", "hello there")
    at.button(key="named:vote_tie").click().run()
    engine = create_engine(url)
    battle = db_actions.get_battle(engine, battle_id=at.session_state["battle_id:named"])
    assert battle.mode == "named" and battle.vote is not None and battle.vote.choice == "tie"
    assert battle.sides["a"].contestant.slug == "tiny-gemma3"
    assert db_boards.pairwise_counts(engine).total == 0, "named votes stay off the default leaderboard"
    assert db_boards.pairwise_counts(engine, modes=("anonymous", "named")).total == 1


def test_chat_with_one_model_records_corrections(arena_env: Callable[..., str]) -> None:
    url = arena_env()
    at = open_app("pages/chat.py")
    assert len(at.subheader) == 1
    _send(at, "direct", TURN_1)
    at.checkbox(key="direct:correction").set_value(True)
    _send(at, "direct", "Respect the date format")
    at.button(key="direct:notfixed_a").click().run()
    battle = db_actions.get_battle(create_engine(url), battle_id=at.session_state["battle_id:direct"])
    assert battle.mode == "direct" and set(battle.sides) == {"a"}
    assert battle.sides["a"].corrections[0].outcome == "not_fixed"
    assert not any(b.key and "vote" in b.key for b in at.button), "no vote bar for one model"


def test_leaderboard_filters(arena_env: Callable[..., str]) -> None:
    url = arena_env(public_export_delay_hours="24")
    first = _anonymous_battle("a")
    _anonymous_battle("b")
    at = open_app("pages/leaderboard.py")
    assert any("Computed over 0 votes" in c for c in _texts(at.caption)), "closed just now: not public"
    engine = create_engine(url)
    back_date(engine, dt.timedelta(hours=25))  # a day (the publication delay) and an hour later
    st.cache_data.clear()  # the board's 60 s cache runs out
    at = open_app("pages/leaderboard.py")
    assert any("Computed over 2 votes" in c for c in _texts(at.caption))
    table = at.dataframe[0].value
    assert set(table["Model"]) == {"Tiny Llama (random)", "Tiny Gemma 3 (random)"}
    assert table["Votes"].tolist() == [2, 2]
    assert list(table.columns[:6]) == ["Rank", "Model", "Rating", "95% low", "95% high", "Votes"]

    at.toggle(key="lb_corrections").set_value(True).run()
    assert any("Computed over 0 votes" in c for c in _texts(at.caption)), "no battle had a correction"
    at.toggle(key="lb_corrections").set_value(False).run()
    at.selectbox(key="lb_scenario").set_value("free-chat").run()
    assert any("Computed over 0 votes" in c for c in _texts(at.caption))
    at.selectbox(key="lb_scenario").set_value("calendar").run()
    assert any("Computed over 2 votes" in c for c in _texts(at.caption))

    db_actions.flag_battle(engine, battle_id=first, reason="test")
    at.toggle(key="lb_anonymous").set_value(False).run()  # a filter combination not cached yet
    assert any("Computed over 1 vote at" in c for c in _texts(at.caption)), "flagged votes leave the board"

    vote = db_actions.get_battle(engine, battle_id=first).vote
    assert vote is not None
    voted_on = vote.created_at.date()
    day_before = voted_on - dt.timedelta(days=1)
    at.date_input(key="lb_dates").set_value((day_before, day_before)).run()
    assert any("Computed over 0 votes" in c for c in _texts(at.caption)), "nothing was voted the day before"
    at.date_input(key="lb_dates").set_value((day_before, voted_on)).run()
    assert any("Computed over 1 vote at" in c for c in _texts(at.caption))


def _public(ctx, scenario: str | None = None):  # noqa: ANN001, ANN202
    from webapp import gateway_data

    return gateway_data.public_filters(
        ctx.settings, scenario=scenario, since=None, until=None, corrections_only=False
    )


def test_dataset_page_downloads(arena_env: Callable[..., str]) -> None:
    arena_env(public_export_delay_hours="0")
    _anonymous_battle("a")
    at = open_app("pages/dataset.py")
    assert any("1 battle matches these filters" in c for c in _texts(at.caption))
    assert [m.value for m in at.metric][:4] == ["1", "4", "0", "1"]
    buttons = {b.label: b for b in at.get("download_button")}
    assert set(buttons) == {
        "Dialogues (JSONL)",
        "Dialogues (Parquet)",
        "Tables (CSV, zipped)",
        "Battles, one row per vote (CSV, for ranking fit)",
        "Preference pairs (JSONL)",
        "Correction triples (JSONL)",
        "Replay items: every correction as a test for any model (JSONL, for `scenarios replay --from`)",
        "Replay pairs: two models on the same correction (CSV)",
    }
    from webapp import context, gateway_data  # the lazily-called export behind the buttons
    from webapp.resources import engine, settings

    ctx = context.Context(
        settings=settings(),
        engine=engine(settings().resolved_database_url),
        visitor_id=0,
        anon_id="",
    )
    lines = gateway_data.dataset_bytes(
        ctx, _public(ctx), fmt="jsonl", view="dialogues"
    ).splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["scenario"] == "calendar"
    parquet = gateway_data.dataset_bytes(ctx, _public(ctx), fmt="parquet", view="dialogues")
    assert pq.read_table(io.BytesIO(parquet)).num_rows == 1
    none = gateway_data.dataset_bytes(
        ctx, _public(ctx, scenario="free-chat"), fmt="jsonl", view="dialogues"
    )
    assert none == b""
    pairs = gateway_data.dataset_bytes(ctx, _public(ctx), fmt="csv", view="replay_pairs").decode()
    assert len(pairs.splitlines()) <= 1, "no model was replayed: at most the header"


def test_admin_gate_and_actions(arena_env: Callable[..., str]) -> None:
    url = arena_env(admin_password="correct horse")
    battle_id = _anonymous_battle("a")
    at = open_app("pages/admin.py")
    at.text_input(key="admin_password").input("wrong")
    _submit(at, "Log in")
    assert "Wrong password." in _texts(at.error)
    assert not at.toggle, "nothing of the admin page shows before login"

    at.text_input(key="admin_password").input("correct horse")
    _submit(at, "Log in")
    assert not at.error
    engine = create_engine(url)
    at.toggle(key="admin_enable_tiny-llama").set_value(False).run()
    assert not db_actions.get_contestant(engine, slug="tiny-llama").enabled

    at.selectbox(key="admin_flag_id").set_value(battle_id)
    _submit(at, "Flag")
    assert any("flagged" in s for s in _texts(at.success))
    assert db_actions.get_battle(engine, battle_id=battle_id).status == "flagged"
    assert db_boards.pairwise_counts(engine).total == 0
    assert db_actions.get_battle(engine, battle_id=battle_id).vote is not None, "nothing is deleted"
    assert [m.value for m in at.metric][:2] == ["1", "1"]


def _submit(at, label: str) -> None:  # noqa: ANN001
    for button in at.get("form_submit_button"):
        if button.label == label:
            button.click().run()
            return
    raise AssertionError(f"no submit button {label!r}")


def test_admin_in_production_refuses_the_development_password(arena_env: Callable[..., str]) -> None:
    arena_env(environment="production", admin_password="prod-Secret-1-long!", hash_salt="prod-salt-1-longer")
    at = open_app("pages/admin.py")
    at.text_input(key="admin_password").input(DEV_ADMIN_PASSWORD)
    _submit(at, "Log in")
    assert "Wrong password." in _texts(at.error) and not at.toggle
    at.text_input(key="admin_password").input("prod-Secret-1-long!")
    _submit(at, "Log in")
    assert at.toggle, "the real password opens it"


def test_about_page(arena_env: Callable[..., str]) -> None:
    arena_env()
    at = open_app("pages/about.py")
    text = " ".join(_texts(at.markdown))
    assert "Bradley-Terry" in text and "Can LLMs fix their mistakes?" in text
