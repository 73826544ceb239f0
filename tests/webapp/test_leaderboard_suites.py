"""The Fixing board's *Fixing suites* source in AppTest, from suite runs stored in a real SQLite database:
one row per model and setting with its figures and intervals over dialogues, ranked by interval overlap
within a setting, per scenario."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import Engine
from streamlit.testing.v1 import AppTest

from inference.protocol import GenerationParams
from scenarios import get_scenario
from scenarios.generate import Dialogue, generate_dialogues
from scenarios.storage import store_run
from scenarios.suite import SuiteConfig, run_suite
from tests.scenarios.scripted import Responder, ScriptedModel
from tests.scenarios.test_suite import PARAMS, _responder
from tests.webapp.test_leaderboard_boards import PAGE, _board, _frame_with, _fresh_db


def _store_suites(engine: Engine, dialogues: list[Dialogue],
                  suites: list[tuple[str, GenerationParams, Responder]]) -> None:
    """Play and store one suite per (model slug, sampling, scripted replies)."""
    for slug, params, respond in suites:
        run_suite(scenario=get_scenario("calendar"), model=ScriptedModel(slug, respond), dialogues=dialogues,
                  config=SuiteConfig(params=params, k=2, concurrency=3),
                  sink=lambda record: store_run(engine, record))


def _suites_board() -> tuple[AppTest, pd.DataFrame]:
    """The Leaderboard on the Fixing board's suites source, and its table."""
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    _board(at, "fixing")
    at.radio(key="lb_fix_source").set_value("suites").run()
    assert not at.exception, [e.value for e in at.exception]
    return at, _frame_with(at, "Fixed within 2")


def test_suites_rank_by_interval_overlap_per_scenario(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    engine = _fresh_db(monkeypatch, tmp_path, "perfect", "chatty", "stubborn")
    calendar = get_scenario("calendar")
    dialogues = generate_dialogues(calendar, count=12, seed=2, false_share=0.5)
    _store_suites(engine, dialogues, [("perfect", PARAMS, _responder(dialogues)),
                                      ("chatty", PARAMS, _responder(dialogues, chatty=True)),
                                      ("stubborn", PARAMS, lambda messages: "I'd rather not.")])
    at, table = _suites_board()
    table = table.set_index("Model")
    assert set(table.index) == {"Perfect", "Chatty", "Stubborn"} and set(table["Dialogues"]) == {12}
    assert table.loc["Chatty", "Fixed within 2"].startswith("100% (100–100")
    assert table.loc["Stubborn", "Fixed within 2"].startswith("0% (0–0")
    assert table.loc["Perfect", "Fixed within 2"] == "–"  # nothing to fix
    assert table.loc["Perfect", "pass@1"].startswith("100%")
    assert table.loc["Chatty", "pass@1"].startswith("0%")
    assert table.loc["Chatty", "Rank"] == "1" and table.loc["Stubborn", "Rank"] == "2"  # intervals apart
    assert table.loc["Perfect", "Rank"] == "–"  # made no mistake: nothing to rank its fixing on
    assert list(table.index) == ["Chatty", "Stubborn", "Perfect"]
    assert any("Fixed within 2" in c.value for c in at.caption)

    at.radio(key="lb_fix_source").set_value("ratings").run()  # the suites' pairwise outcomes rate them
    assert not at.exception, [e.value for e in at.exception]
    ratings = _frame_with(at, "Composite").set_index("Model")
    automatic = {m: float(ratings.loc[m, "Automatic (replay, suites)"].split()[0]) for m in ratings.index}
    assert automatic["Stubborn"] < min(automatic["Perfect"], automatic["Chatty"])
    assert ratings.loc["Stubborn", "People"] == "–", "nobody voted: rated by the suites alone"
    at.radio(key="lb_fix_source").set_value("suites").run()

    at.selectbox(key="lb_scenario").set_value("smart-home").run()  # no suite stored for this scenario
    assert not at.exception, [e.value for e in at.exception]
    assert any("No fixing suite of 'smart-home'" in i.value for i in at.info)


def test_a_greedy_and_a_sampled_suite_are_rows_of_their_own_ranked_apart(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    engine = _fresh_db(monkeypatch, tmp_path, "chatty", "stubborn")
    calendar = get_scenario("calendar")
    dialogues = generate_dialogues(calendar, count=6, seed=3, false_share=0.0)
    sampled = GenerationParams(max_new_tokens=PARAMS.max_new_tokens, temperature=0.7, seed=0)
    _store_suites(engine, dialogues, [("chatty", PARAMS, _responder(dialogues, chatty=True)),  # fixes all
                                      ("chatty", sampled, lambda messages: "I'd rather not."),  # fixes none
                                      ("stubborn", sampled, _responder(dialogues, chatty=True))])
    _, table = _suites_board()
    rows = {(r["Model"], r["Sampling"]): r for r in table.to_dict("records")}
    assert set(rows) == {("Chatty", "greedy"), ("Chatty", "temperature 0.7"), ("Stubborn", "temperature 0.7")}
    assert rows["Chatty", "greedy"]["Fixed within 2"].startswith("100% (100–100")
    assert rows["Chatty", "temperature 0.7"]["Fixed within 2"].startswith("0% (0–0")
    assert {r["Dialogues"] for r in rows.values()} == {6}
    # ranked within a setting: alone among greedy suites, Chatty's greedy suite is first there
    assert rows["Chatty", "greedy"]["Rank"] == "1"
    hot = (rows["Stubborn", "temperature 0.7"]["Rank"], rows["Chatty", "temperature 0.7"]["Rank"])
    assert hot == ("1", "2")
