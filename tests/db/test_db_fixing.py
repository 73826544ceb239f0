"""db.fixing: the Fixing board's queries on real SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import Engine

from db import fixing
from db import repository as repo
from tests.db.conftest import Arena


def _reply(engine: Engine, battle_id: str, side: str, label: str, mistakes: list[str]) -> int:
    return repo.append_message(engine, battle_id=battle_id, side=side, kind="reply", content="call",
                               grader_label=label, grader_mistakes=mistakes).id


def _correct(engine: Engine, battle_id: str, side: str, *, label: str, mistakes: list[str],
             person: str | None) -> int:
    correction = repo.record_correction(engine, battle_id=battle_id, side=side, content="Wrong time.")
    _reply(engine, battle_id, side, label, mistakes)
    if person is not None:
        repo.set_correction_outcome(engine, correction_id=correction.id, outcome=person, judged_by="person")
    return correction.id


@pytest.fixture
def populated(engine: Engine) -> Engine:
    arena = Arena(engine)
    arena.contestants("m1", "m2")
    battle = arena.battle("m1", "m2", replies=False)
    for side in ("a", "b"):
        repo.append_message(engine, battle_id=battle.id, side=side, kind="request", content="Add a meeting")
    # m1 (side a): chatty, corrected twice: the person says not fixed then fixed; the grader agrees once.
    _reply(engine, battle.id, "a", "partial", ["chatty"])
    _correct(engine, battle.id, "a", label="partial", mistakes=["chatty"], person="not_fixed")
    _correct(engine, battle.id, "a", label="correct", mistakes=[], person="fixed")
    _reply(engine, battle.id, "a", "partial", ["chatty", "regression"])  # chatty is back: a recurrence
    # m2 (side b): wrong time, fixed per the grader, the person says not fixed; a second one unjudged.
    _reply(engine, battle.id, "b", "partial", ["wrong_time"])
    _correct(engine, battle.id, "b", label="correct", mistakes=[], person="not_fixed")
    _correct(engine, battle.id, "b", label="correct", mistakes=[], person=None)
    auto = repo.open_battle(engine, mode="auto", scenario="calendar", contestant_a="m2")
    repo.append_message(engine, battle_id=auto.id, side="a", kind="request", content="x")
    _reply(engine, auto.id, "a", "garbage", [])
    return engine


def test_fix_outcomes_by_judge(populated: Engine) -> None:
    person = fixing.fix_outcomes(populated, judge="person", scenario="calendar")
    assert person.models == ("m1", "m2")
    assert (list(person.successes), list(person.trials)) == ([1, 0], [2, 1])
    grader = fixing.fix_outcomes(populated, judge="grader")
    assert (list(grader.successes), list(grader.trials)) == ([1, 2], [2, 2])
    assert list(fixing.fix_outcomes(populated, judge="grader", scenario="chess").trials) == [0, 0]
    with pytest.raises(ValueError, match="judge"):
        fixing.fix_outcomes(populated, judge="crowd")  # type: ignore[arg-type]


def test_judge_table_pairs_person_and_grader(populated: Engine) -> None:
    table = fixing.judge_table(populated)
    assert table.models == ("m1", "m2")
    # m1: (person not fixed, grader not fixed) and (fixed, fixed); m2: (not fixed, grader fixed).
    assert (table.both_fixed, table.person_only, table.grader_only, table.neither) == \
        ((1, 0), (0, 0), (0, 1), (1, 0))


def test_correction_links_chain_and_carry_the_verdict(populated: Engine) -> None:
    person = fixing.correction_links(populated, judge="person")
    assert [(link.model, link.fixed) for link in person] == \
        [("m1", False), ("m1", True), ("m2", False), ("m2", None)]
    assert person[1].faulty_message_id == person[0].next_reply_message_id  # corrected twice in a row
    grader = fixing.correction_links(populated, judge="grader")
    assert [link.fixed for link in grader] == [False, True, True, True]


def test_graded_replies_in_order_and_auto_battles(populated: Engine) -> None:
    replies = fixing.graded_replies(populated)
    m1 = [r.mistakes for r in replies if r.model == "m1"]
    assert m1 == [("chatty",), ("chatty",), (), ("chatty", "regression")]
    assert len({r.conversation_id for r in replies}) == 2  # the auto battle is not a human mode
    (auto_id,) = fixing.auto_battle_ids(populated, scenario="calendar")
    assert fixing.graded_replies(populated, modes=("auto",))[0].mistakes == ()
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)
    assert fixing.auto_battle_ids(populated, since=later) == [] and auto_id


def test_vote_style_features_per_side(engine: Engine) -> None:
    arena = Arena(engine)
    arena.contestants("m1", "m2", "m3")
    replies = {"a": ["Sorry! Here it is:\naction.x()", "ok"], "b": ["action.y()"]}
    battle = arena.battle("m1", "m2", replies=False)
    for side, texts in replies.items():
        repo.append_message(engine, battle_id=battle.id, side=side, kind="request", content="hi")
        for n, text in enumerate(texts):
            repo.append_message(engine, battle_id=battle.id, side=side, kind="reply", content=text,
                                grader_label="partial" if n == 0 else "correct",
                                grader_mistakes=["chatty"] if n == 0 else [])
    repo.record_vote(engine, battle_id=battle.id, choice="b")
    tie = arena.battle("m3", "m1")
    repo.record_vote(engine, battle_id=tie.id, choice="both_bad")
    arena.battle("m2", "m3")  # no vote: not counted
    style = fixing.vote_style_features(engine)
    assert style.models == ("m1", "m2", "m3") and list(style.outcome) == [0.0, 0.5]
    assert (list(style.model_a), list(style.model_b)) == ([0, 2], [1, 0])
    long_reply = len(replies["a"][0])
    # Side a of the first vote: mean length of its two replies; one of two chatty, apologising, multi-line.
    assert list(style.features_a[0]) == [(long_reply + 2) / 2, 0.5, 0.5, 0.5]
    assert list(style.features_b[0]) == [float(len("action.y()")), 1.0, 0.0, 0.0]
    assert list(style.features_a[1]) == [2.0, 0.0, 0.0, 0.0]
    assert fixing.vote_style_features(engine, scenario="chess").outcome.size == 0


def test_counted_votes_one_by_one_with_their_visitor(engine: Engine) -> None:
    arena = Arena(engine)
    arena.contestants("m1", "m2")
    visitor = repo.get_or_create_visitor(engine, anon_id="v-1")
    first = arena.battle("m1", "m2", visitor_id=visitor.id)
    repo.record_vote(engine, battle_id=first.id, choice="b", visitor_id=visitor.id)
    second = arena.battle("m2", "m1")
    repo.record_vote(engine, battle_id=second.id, choice="tie")
    named = arena.battle("m1", "m2", mode="named")
    repo.record_vote(engine, battle_id=named.id, choice="a")
    votes = fixing.counted_votes(engine)
    assert votes.models == ("m1", "m2")
    assert (list(votes.model_a), list(votes.model_b)) == ([0, 1], [1, 0])
    assert list(votes.outcome) == [1, 2] and list(votes.visitor) == [visitor.id, -1]
    assert fixing.counted_votes(engine, modes=None).outcome.size == 3


def test_reply_flags_aggregate_and_long_conversations_only(populated: Engine) -> None:
    flags = fixing.reply_flags(populated)
    assert flags.models == ("m1", "m2")
    assert (flags.graded, flags.regressions, flags.chatty) == ((4, 3), (1, 0), (3, 0))
    assert fixing.reply_flags(populated, modes=("auto",)).graded == (0, 1)
    long_ones = fixing.graded_replies(populated, min_replies=4)
    assert {r.model for r in long_ones} == {"m1"} and len(long_ones) == 4
