"""The Leaderboard's three tabs in AppTest, rendered from a real SQLite database: Votes with style
control and bootstrap intervals, Fixing from people / the grader / the automatic arena, and the
automatic arena's emoji tables from stored runs."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import Engine
from streamlit.testing.v1 import AppTest

from db import actions as db_actions
from db.engine import make_engine
from db.migrate import upgrade_to_head
from scenarios.premade import load_premade
from scenarios.runner import RunnerConfig, run_arena
from scenarios.storage import ensure_contestant, store_run
from tests.db.conftest import back_date
from tests.scenarios.scripted import CALENDAR, ScriptedModel, always_chatty, guesses_durations, perfect
from webapp.leaderboard_data import RANK_DELTA, rank_delta

DELAY_HOURS = 24  # the publication delay (the default of ARENA_PUBLIC_EXPORT_DELAY_HOURS)
PAST_DELAY = dt.timedelta(hours=DELAY_HOURS + 1)
PAGE = str(Path(__file__).resolve().parents[2] / "webapp" / "pages" / "leaderboard.py")
GOOD = 'action.add_calendar_entry("Meeting with Fred", date="2024-11-11", time="17:00", duration=30)'
LONG = "I'm sorry for the confusion! Here is the call:\n" + GOOD + "\nLet me know if you need more."


def _battle(engine: Engine, a: str, b: str, *, reply_a: str, reply_b: str, vote: str) -> None:
    battle = db_actions.open_battle(engine, mode="anonymous", scenario="calendar", contestant_a=a,
                                    contestant_b=b)
    for side, text in (("a", reply_a), ("b", reply_b)):
        db_actions.append_message(engine, battle_id=battle.id, side=side, kind="request",
                                  content=CALENDAR.turn(1).user)
        chatty = text != GOOD
        db_actions.append_message(engine, battle_id=battle.id, side=side, kind="reply", content=text,
                                  grader_label="partial" if chatty else "correct",
                                  grader_mistakes=["chatty"] if chatty else [])
    db_actions.record_vote(engine, battle_id=battle.id, choice=vote)


def _corrected(engine: Engine, model: str, *, fixed_by_grader: bool, person: str) -> None:
    battle = db_actions.open_battle(engine, mode="direct", scenario="calendar", contestant_a=model)
    db_actions.append_message(engine, battle_id=battle.id, side="a", kind="request",
                              content=CALENDAR.turn(1).user)
    db_actions.append_message(engine, battle_id=battle.id, side="a", kind="reply", content=LONG,
                              grader_label="partial", grader_mistakes=["chatty"])
    correction = db_actions.record_correction(engine, battle_id=battle.id, side="a",
                                              content="Just the API call please.")
    db_actions.append_message(engine, battle_id=battle.id, side="a", kind="reply",
                              content=GOOD if fixed_by_grader else LONG,
                              grader_label="correct" if fixed_by_grader else "partial",
                              grader_mistakes=[] if fixed_by_grader else ["chatty"])
    db_actions.set_correction_outcome(engine, correction_id=correction.id, outcome=person, judged_by="person")
    db_actions.abandon_battle(engine, battle_id=battle.id)  # the visitor leaves: the chat closes


def _fresh_db(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *slugs: str) -> Engine:
    """A migrated SQLite file the page will read (through the environment), with these contestants.

    The page shows battles closed more than ``DELAY_HOURS`` ago: a test ages what it stored with
    ``back_date(engine, PAST_DELAY)`` before opening the page."""
    url = f"sqlite:///{(tmp_path / 'arena.db').as_posix()}"
    monkeypatch.setenv("ARENA_DATABASE_URL", url)
    monkeypatch.setenv("ARENA_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("ARENA_PUBLIC_EXPORT_DELAY_HOURS", str(DELAY_HOURS))
    upgrade_to_head(url)
    engine = make_engine(url)
    for slug in slugs:
        ensure_contestant(engine, slug=slug, name=slug.title())
    return engine


@pytest.fixture
def board_db(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Engine:
    engine = _fresh_db(monkeypatch, tmp_path, "verbose", "terse", "perfect", "chatty", "qwen-like")
    # Votes: the verbose model (long, apologising, multi-line replies) wins most battles.
    for n in range(12):
        _battle(engine, "verbose", "terse", reply_a=LONG, reply_b=GOOD, vote="a" if n % 4 else "b")
    # Corrections judged by people (and, through the next reply's label, by the grader).
    for fixed, person in ((True, "fixed"), (True, "fixed"), (False, "not_fixed"), (True, "not_fixed")):
        _corrected(engine, "terse", fixed_by_grader=fixed, person=person)
    _corrected(engine, "verbose", fixed_by_grader=False, person="not_fixed")
    # The automatic arena: all three protocols, two correction styles.
    models = [ScriptedModel("perfect", perfect), ScriptedModel("chatty", always_chatty),
              ScriptedModel("qwen-like", guesses_durations)]
    ids: list[str] = []
    run_arena(scenario=CALENDAR, models=models, cases=load_premade(),
              config=RunnerConfig(repeats=5, max_fix_attempts=2, correction_styles=("fix", "hint")),
              sink=lambda record: ids.append(store_run(engine, record)))
    back_date(engine, PAST_DELAY)
    return engine


def _frames(at: AppTest) -> list[pd.DataFrame]:
    return [d.value for d in at.dataframe]


def _frame_with(at: AppTest, column: str) -> pd.DataFrame:
    return next(frame for frame in _frames(at) if column in frame.columns)


def _open() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _board(at: AppTest, board: str) -> AppTest:
    at.radio(key="lb_board").set_value(board).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_three_tabs_render_from_the_database(board_db: Engine) -> None:
    at = _open()
    assert at.radio(key="lb_board").options == ["🗳️ Votes", "🛠️ Fixing", "🤖 Automatic arena"]
    votes = _frame_with(at, "Rating")
    assert set(votes["Model"]) == {"Verbose", "Terse"} and votes["Votes"].tolist() == [12, 12]
    assert not any("Corrections" in frame.columns for frame in _frames(at)), "only the chosen board"
    assert not any("Daily vote cap" in c.value for c in at.caption), "no cap unless one is set"
    # Fixing, people by default: terse 2 of 4 judged fixed, verbose 0 of 1.
    fixing = _frame_with(_board(at, "fixing"), "Corrections")
    terse = fixing.set_index("Model").loc["Terse"]
    assert terse["Fix rate"].startswith("50% (") and terse["Corrections"] == 4
    assert terse["Turns to fix (1/2/3+/never)"] == "2 / 0 / 0 / 2"
    assert terse["κ person–grader"] == "0.50 (-0.35–1.00, n=4)"  # person and grader disagree once
    assert fixing["Model"].tolist()[0] == "Terse"
    markdown = "\n".join(m.value for m in _board(at, "auto").markdown)
    assert "| perfect | ✓✓✓✓✓ |" in markdown and "## Fixing pre-made mistakes" in markdown
    assert "| qwen-like (hint) |" in markdown


def test_fixing_sources_and_styles(board_db: Engine) -> None:
    at = _board(_open(), "fixing")
    at.radio(key="lb_fix_source").set_value("grader").run()
    grader = _frame_with(at, "Corrections").set_index("Model")
    assert grader.loc["Terse", "Fix rate"].startswith("75% (")  # three of four next replies correct
    at.radio(key="lb_fix_source").set_value("auto").run()
    assert not at.exception, [e.value for e in at.exception]
    auto = _frame_with(at, "Corrections").set_index("Model")
    assert set(auto.index) == {"Perfect", "Chatty", "Qwen-Like"}
    assert auto.loc["Perfect", "First try (pass@1)"].startswith("100% (")
    assert auto.loc["Perfect", "pass^5"].startswith("100% (")
    assert auto.loc["Chatty", "Chatty"].startswith("100%")
    assert "κ person–grader" not in auto.columns
    styles = _frame_with(at, "Correction style")
    qwen = styles[styles["Model"] == "Qwen-Like"].set_index("Correction style")["Fix rate"]
    assert qwen["fix"].startswith("100% (") and not qwen["hint"].startswith("100%")


def test_style_control_reranks_the_one_table(board_db: Engine) -> None:
    at = _open()
    before = _frame_with(at, "Rating").set_index("Model")
    assert RANK_DELTA not in before.columns
    at.toggle(key="lb_style").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    ranked = [frame for frame in _frames(at) if "Rating" in frame.columns]
    assert len(ranked) == 1, "style control re-ranks the table on screen; it adds no second one"
    table = ranked[0]
    assert list(table.columns[:3]) == ["Rank", RANK_DELTA, "Model"]
    assert set(table["Model"]) == {"Verbose", "Terse"}
    assert table["Rank"].is_monotonic_increasing
    assert table["Votes"].tolist() == [12, 12], "the plain board's other columns stay"
    for model, rank, delta in zip(table["Model"], table["Rank"], table[RANK_DELTA], strict=True):
        assert delta == rank_delta(int(before.loc[model, "Rank"]), int(rank))
    coefficients = _frame_with(at, "Coefficient").set_index("Feature")
    assert list(coefficients.index) == ["length", "chatty", "apology", "multiline"]
    assert at.toggle(key="lb_outliers").disabled and at.selectbox(key="lb_interval").disabled
    assert any("Δ rank: places gained (+) or lost (−)" in c.value for c in at.caption)


def test_bootstrap_intervals(board_db: Engine) -> None:
    at = _open()
    at.selectbox(key="lb_interval").set_value("bootstrap").run()
    assert not at.exception, [e.value for e in at.exception]
    plain = _frame_with(at, "Votes")
    assert (plain["95% low"] <= plain["Rating"]).all() and (plain["Rating"] <= plain["95% high"]).all()


def test_anomalous_voters_can_be_dropped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    engine = _fresh_db(monkeypatch, tmp_path, "strong", "weak")
    monkeypatch.setenv("ARENA_VOTES_PER_VISITOR_PER_DAY", "50")
    voters = {f"honest-{n}": ("a", 6) for n in range(10)} | {"contrarian": ("b", 8)}
    for anon, (choice, count) in voters.items():
        visitor = db_actions.get_or_create_visitor(engine, anon_id=anon)
        for _ in range(count):
            battle = db_actions.open_battle(engine, mode="anonymous", scenario="calendar",
                                            contestant_a="strong",
                                            contestant_b="weak", visitor_id=visitor.id)
            for side in ("a", "b"):
                db_actions.append_message(engine, battle_id=battle.id, side=side, kind="request",
                                          content="hi")
                db_actions.append_message(engine, battle_id=battle.id, side=side, kind="reply", content="ok")
            db_actions.record_vote(engine, battle_id=battle.id, choice=choice, visitor_id=visitor.id)
    back_date(engine, PAST_DELAY)
    at = _open()
    assert _frame_with(at, "Votes")["Votes"].tolist() == [68, 68]
    at.toggle(key="lb_outliers").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    captions = [c.value for c in at.caption]
    assert "Anomalous-voter test: 8 votes from 1 of 11 tested visitors dropped." in captions
    assert any(c.startswith("Daily vote cap: 50 votes per visitor per UTC day.") for c in captions)
    assert _frame_with(at, "Votes")["Votes"].tolist() == [60, 60]
