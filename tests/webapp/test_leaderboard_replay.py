"""The Fixing board's *Replay* and *Ratings* sources in AppTest, from a real SQLite database: replay's
fix rates per model (others' mistakes apart from its own), and the people / automatic / composite
ratings side by side with Kendall's τ."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Engine

from db import actions as db_actions
from tests.db.conftest import back_date
from tests.webapp.test_leaderboard_boards import PAST_DELAY, _board, _frame_with, _fresh_db, _open

MODELS = ("ace", "bolt", "crumb")
MISTAKES = ("wrong_time", "chatty")


def _corrected_battle(engine: Engine, a: str, b: str, *, winner: str, mistake: str, fixed: bool) -> int:
    """A voted battle whose side a made ``mistake`` and was corrected once (the grader judged the next
    reply ``fixed`` or not); returns the correction's id."""
    battle = db_actions.open_battle(engine, mode="anonymous", scenario="calendar", contestant_a=a,
                                    contestant_b=b)
    for side in ("a", "b"):
        db_actions.append_message(engine, battle_id=battle.id, side=side, kind="request", content="Add it.")
        db_actions.append_message(engine, battle_id=battle.id, side=side, kind="reply", content="Sure.",
                                  grader_label="partial", grader_mistakes=[mistake])
    correction = db_actions.record_correction(engine, battle_id=battle.id, side="a", content="Write it.")
    db_actions.append_message(engine, battle_id=battle.id, side="a", kind="reply", content="call()",
                              grader_label="correct" if fixed else "partial")
    db_actions.record_vote(engine, battle_id=battle.id, choice=winner)
    return correction.id


@pytest.fixture
def replayed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Engine:
    """Ace beats bolt in every vote and bolt beats crumb; in replay ace fixes everything, bolt half, crumb
    nothing, so people and the grader agree on the order."""
    engine = _fresh_db(monkeypatch, tmp_path, *MODELS, "dusk")
    corrections = [_corrected_battle(engine, "bolt", "ace", winner="b", mistake=MISTAKES[n % 2], fixed=n < 4)
                   for n in range(6)]
    corrections += [_corrected_battle(engine, "crumb", "bolt", winner="b", mistake="wrong_time", fixed=False)
                    for _ in range(6)]
    for number, correction in enumerate(corrections):
        outcomes = {"ace": "fixed", "bolt": "fixed" if number % 2 else "not_fixed", "crumb": "not_fixed"}
        if number == 0:
            outcomes["crumb"] = "regression"
        for model, outcome in outcomes.items():
            db_actions.record_replay_result(engine, correction_id=correction, contestant=model,
                                            outcome=outcome, content="call()")
    back_date(engine, PAST_DELAY)
    return engine


def test_replay_shows_each_models_fix_rate_on_others_and_its_own_mistakes(replayed: Engine) -> None:
    at = _board(_open(), "fixing")
    at.radio(key="lb_fix_source").set_value("replay").run()
    assert not at.exception, [e.value for e in at.exception]
    table = _frame_with(at, "Fixed (others' mistakes)").set_index("Model")
    assert list(table.index) == ["Ace", "Bolt", "Crumb"], "best fix rate on others' mistakes first"
    assert table.loc["Ace", "Fixed (others' mistakes)"].startswith("100% (")
    assert table.loc["Ace", "Answered"] == 12
    assert table.loc["Ace", "Fixed (own mistakes)"] == "–", "ace's mistakes were never corrected"
    assert table.loc["Bolt", "Fixed (own mistakes)"].endswith("n=6)")  # bolt was corrected in 6 battles
    regression = table.loc["Crumb", "Regression"]
    assert regression.startswith("8% (") and regression.endswith("n=12)")
    assert any("Wilson" in c.value for c in at.caption)
    assert any(h.value == "Fix rate per mistake kind" for h in at.subheader), "shown with the source"
    kinds = _frame_with(at, "prose around the call").set_index("Model")  # replay, per mistake kind
    assert kinds.loc["Ace", "time"].startswith("100% (") and kinds.loc["Ace", "time"].endswith("n=9)")
    assert kinds.loc["Crumb", "prose around the call"].startswith("0% (")


def test_the_grader_source_shows_fix_rates_per_mistake_kind(replayed: Engine) -> None:
    at = _board(_open(), "fixing")
    at.radio(key="lb_fix_source").set_value("grader").run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(h.value == "Fix rate per mistake kind" for h in at.subheader)
    kinds = _frame_with(at, "prose around the call").set_index("Model")
    assert list(kinds.columns) == ["time", "prose around the call"], "the most corrected kind first"
    # bolt: time fixed in 2 of 3 (the first four corrections are fixed: n = 0, 2 time; 1, 3 prose)
    assert kinds.loc["Bolt", "time"].startswith("67% (") and kinds.loc["Bolt", "time"].endswith("n=3)")
    assert kinds.loc["Bolt", "prose around the call"].startswith("67% (")
    assert kinds.loc["Crumb", "time"].startswith("0% (")
    assert kinds.loc["Crumb", "prose around the call"] == "–"


def test_ratings_show_people_automatic_and_composite_with_their_agreement(replayed: Engine) -> None:
    at = _board(_open(), "fixing")
    at.radio(key="lb_fix_source").set_value("ratings").run()
    assert not at.exception, [e.value for e in at.exception]
    table = _frame_with(at, "Composite").set_index("Model")
    assert list(table.columns) == ["Rank", "People", "Automatic (replay, suites)", "Composite"]
    assert list(table.index) == ["Ace", "Bolt", "Crumb"]
    people = {m: float(table.loc[m, "People"].split()[0]) for m in table.index}
    assert people["Ace"] > people["Bolt"] > people["Crumb"]
    automatic = {m: float(table.loc[m, "Automatic (replay, suites)"].split()[0]) for m in table.index}
    assert automatic["Ace"] > automatic["Bolt"] > automatic["Crumb"]
    agreement = next(m.value for m in at.markdown if "Kendall" in m.value)
    assert agreement.rstrip().split(": ")[-1].startswith("1.00 (95%"), agreement
    assert any("weighing 0.5 of a vote" in c.value for c in at.caption)


def test_the_pair_samplers_prior_reads_both_signals_and_first_tries(replayed: Engine) -> None:
    from webapp.pairing import UNRATED, pairing_prior

    prior = pairing_prior(replayed, scenario="calendar", slugs=(*MODELS, "dusk"), weight=0.5)
    ace, bolt, crumb, dusk = prior.ratings
    assert ace > bolt > crumb and (dusk, prior.sd[3]) == UNRATED, "dusk: no vote, no replay"
    assert np.all(prior.sd[:3] < UNRATED[1])
    # every first reply of the fixture was graded partial: nobody is known to play; dusk is unknown
    assert np.all(prior.playable[1:3] < 0.1) and prior.playable[3] == 0.5
    other = pairing_prior(replayed, scenario="smart-home", slugs=MODELS, weight=0.5)
    assert np.all(other.ratings == UNRATED[0]) and np.all(other.playable == 0.5)
