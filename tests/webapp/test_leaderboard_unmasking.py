"""The leaderboard unmasks no open battle (issue 39), through the boards' builders and the page itself.

Probe of the old page (at 0836aef): a visitor sent a turn to Model A only, changed the date filter to get
around the 60 s cache, and read which model's figures moved (``first-try n`` 0 → 1, the Fixing board's
``Corrections 1``) before voting. The boards now count a battle only once it is closed, and only past
the publication delay (``publication_cutoff(ARENA_PUBLIC_EXPORT_DELAY_HOURS)``, the export's delay).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from sqlalchemy import Engine
from streamlit.testing.v1 import AppTest

from db import VoteFilters
from db import actions as db_actions
from db.views import BattleView
from tests.db.conftest import back_date
from tests.webapp.test_arena_app import _texts
from tests.webapp.test_leaderboard_boards import GOOD, LONG, _board, _fresh_db, _open
from webapp.leaderboard_data import (
    board_filters,
    build_board,
    build_fixing_board,
    build_style_board,
    publication_cutoff,
)

DELAY_HOURS = 24.0


def _turn_to_model_a(engine: Engine, battle: BattleView) -> None:
    """The probe's turn: side A only; a chatty reply, a correction the visitor judges fixed, a good one."""
    db_actions.append_message(engine, battle_id=battle.id, side="a", kind="request", content="Add a meeting")
    db_actions.append_message(engine, battle_id=battle.id, side="a", kind="reply", content=LONG,
                              grader_label="partial", grader_mistakes=["chatty"])
    correction = db_actions.record_correction(engine, battle_id=battle.id, side="a", content="Just the call.")
    db_actions.append_message(engine, battle_id=battle.id, side="a", kind="reply", content=GOOD,
                              grader_label="correct", grader_mistakes=[])
    db_actions.set_correction_outcome(engine, correction_id=correction.id, outcome="fixed",
                                      judged_by="person", visitor_id=battle.visitor_id)


def _probe_battle(engine: Engine) -> BattleView:
    visitor = db_actions.get_or_create_visitor(engine, anon_id="curious-visitor")
    battle = db_actions.open_battle(engine, mode="anonymous", scenario="calendar", contestant_a="alpha",
                                    contestant_b="beta", visitor_id=visitor.id)
    _turn_to_model_a(engine, battle)
    return battle


def _vote(engine: Engine, battle: BattleView) -> dt.datetime:
    """Side B answers too, then the visitor votes; returns the closing time."""
    db_actions.append_message(engine, battle_id=battle.id, side="b", kind="request", content="Add a meeting")
    db_actions.append_message(engine, battle_id=battle.id, side="b", kind="reply", content=GOOD,
                              grader_label="correct", grader_mistakes=[])
    db_actions.record_vote(engine, battle_id=battle.id, choice="a", visitor_id=battle.visitor_id)
    closed_at = db_actions.get_battle(engine, battle_id=battle.id).closed_at
    assert closed_at is not None
    return closed_at


Shown = tuple[int, int, int, int, list[str], list[str]]


def _shown(engine: Engine, filters: VoteFilters) -> Shown:
    """Votes, style-board votes, people's and grader's judged corrections, and the models the Votes
    and people's Fixing boards list."""
    votes = build_board(engine, filters)
    style = build_style_board(engine, filters)
    people = build_fixing_board(engine, filters, "people")
    grader = build_fixing_board(engine, filters, "grader")
    fixing_models = [] if people.table.empty else list(people.table["Model"])
    vote_models = [] if votes.table.empty else list(votes.table["Model"])
    return votes.votes, style.votes, people.corrections, grader.corrections, vote_models, fixing_models


NOTHING: Shown = (0, 0, 0, 0, [], [])


def test_publication_cutoff_is_the_delay_ago_to_the_minute() -> None:
    now = dt.datetime(2026, 12, 5, 15, 29, 39, 123456, tzinfo=dt.UTC)
    assert publication_cutoff(24, now=now) == dt.datetime(2026, 12, 4, 15, 29, tzinfo=dt.UTC)
    assert publication_cutoff(0.5, now=now) == dt.datetime(2026, 12, 5, 14, 59, tzinfo=dt.UTC)
    assert publication_cutoff(0, now=now) is None, "no delay: every closed battle at once"


def test_boards_show_a_battle_only_once_closed_past_the_delay(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    engine = _fresh_db(monkeypatch, tmp_path, "alpha", "beta")
    battle = _probe_battle(engine)
    assert _shown(engine, board_filters(closed_before=publication_cutoff(DELAY_HOURS))) == NOTHING
    assert _shown(engine, board_filters()) == NOTHING, "open: nothing even with no delay at all"
    day_before = battle.created_at - dt.timedelta(days=1)
    assert _shown(engine, board_filters(anonymous_only=False, since=day_before)) == NOTHING
    closed_at = _vote(engine, battle)
    assert _shown(engine, board_filters(closed_before=publication_cutoff(DELAY_HOURS))) == NOTHING, \
        "closed a moment ago: within the delay"
    later = closed_at + dt.timedelta(hours=DELAY_HOURS, minutes=1)
    published = _shown(engine, board_filters(closed_before=publication_cutoff(DELAY_HOURS, now=later)))
    assert published == (1, 1, 1, 1, ["Alpha", "Beta"], ["Alpha", "Beta"])  # Beta: its first try
    assert _shown(engine, board_filters()) == published


def _captions(at: AppTest) -> str:
    return " ".join(_texts(at.caption))


def _everything_on_the_page_says_nothing(at: AppTest) -> None:
    """Votes (both toggles) and Fixing (people, grader) all computed over nothing."""
    _board(at, "votes")
    for anonymous in (False, True):
        at.toggle(key="lb_anonymous").set_value(anonymous).run()
        assert "Computed over 0 votes" in _captions(at) and not at.dataframe, _captions(at)
    _board(at, "fixing")
    for source in ("grader", "people"):
        at.radio(key="lb_fix_source").set_value(source).run()
        assert "Computed over 0 judged corrections" in _captions(at), _captions(at)
        assert not at.dataframe, "no first-try or fix row for either model"


def test_changing_the_date_filter_reveals_no_open_battle(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The probe on the page, with no publication delay at all (the most open setting): only closing the
    battle publishes it."""
    engine = _fresh_db(monkeypatch, tmp_path, "alpha", "beta")
    monkeypatch.setenv("ARENA_PUBLIC_EXPORT_DELAY_HOURS", "0")
    battle = _probe_battle(engine)
    back_date(engine, dt.timedelta(days=2))  # started long ago: no delay nor date stands in its way
    started = battle.created_at.date() - dt.timedelta(days=2)
    today = dt.datetime.now(dt.UTC).date()
    at = _open()
    _everything_on_the_page_says_nothing(at)
    for dates in ((started, started), (started - dt.timedelta(days=1), today), (started, today)):
        at.date_input(key="lb_dates").set_value(dates).run()  # a new cache key each time
        _everything_on_the_page_says_nothing(at)
    _vote(engine, battle)
    back_date(engine, dt.timedelta(minutes=2))  # closed before the minute the cutoff is rounded to
    at.date_input(key="lb_dates").set_value((started - dt.timedelta(days=2), today)).run()
    _board(at, "fixing")
    assert "Computed over 1 judged correction " in _captions(at), _captions(at)
    fixing = next(d.value for d in at.dataframe if "Corrections" in d.value.columns).set_index("Model")
    assert list(fixing["Corrections"]) == [1, 0] and list(fixing.index) == ["Alpha", "Beta"]
    assert fixing.loc["Alpha", "First try (pass@1)"].endswith("n=1)"), "the probe's first-try n 0 → 1"
    _board(at, "votes")
    assert "Computed over 1 vote " in _captions(at), _captions(at)
