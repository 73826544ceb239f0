"""db.fixing: the Fixing board's queries on real SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from db import actions, boards
from db.boards import fix_chains, fixing, recurrence_flags, turns_to_fix, vote_features
from db.views import ModelCounts
from tests.db.conftest import Arena


def _reply(engine: Engine, battle_id: str, side: str, label: str, mistakes: list[str]) -> int:
    return actions.append_message(engine, battle_id=battle_id, side=side, kind="reply", content="call",
                                  grader_label=label, grader_mistakes=mistakes).id


def _correct(engine: Engine, battle_id: str, side: str, *, label: str, mistakes: list[str],
             person: str | None) -> int:
    correction = actions.record_correction(engine, battle_id=battle_id, side=side, content="Wrong time.")
    _reply(engine, battle_id, side, label, mistakes)
    if person is not None:
        actions.set_correction_outcome(engine, correction_id=correction.id, outcome=person,
                                       judged_by="person")
    return correction.id


@pytest.fixture
def populated(engine: Engine) -> Engine:
    arena = Arena(engine)
    arena.contestants("m1", "m2")
    battle = arena.battle("m1", "m2", replies=False)
    for side in ("a", "b"):
        actions.append_message(engine, battle_id=battle.id, side=side, kind="request",
                               content="Add a meeting")
    # m1 (side a): chatty, corrected twice: the person says not fixed then fixed; the grader agrees once.
    _reply(engine, battle.id, "a", "partial", ["chatty"])
    _correct(engine, battle.id, "a", label="partial", mistakes=["chatty"], person="not_fixed")
    _correct(engine, battle.id, "a", label="correct", mistakes=[], person="fixed")
    _reply(engine, battle.id, "a", "partial", ["chatty", "regression"])  # chatty is back: a recurrence
    # m2 (side b): wrong time, fixed per the grader, the person says not fixed; a second one unjudged.
    _reply(engine, battle.id, "b", "partial", ["wrong_time"])
    _correct(engine, battle.id, "b", label="correct", mistakes=[], person="not_fixed")
    _correct(engine, battle.id, "b", label="correct", mistakes=[], person=None)
    auto = actions.open_battle(engine, mode="auto", scenario="calendar", contestant_a="m2")
    actions.append_message(engine, battle_id=auto.id, side="a", kind="request", content="x")
    _reply(engine, auto.id, "a", "garbage", [])
    assert arena.close_all() == 1  # the visitor skips it: only a closed battle is public
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
        actions.append_message(engine, battle_id=battle.id, side=side, kind="request", content="hi")
        for n, text in enumerate(texts):
            actions.append_message(engine, battle_id=battle.id, side=side, kind="reply", content=text,
                                   grader_label="partial" if n == 0 else "correct",
                                   grader_mistakes=["chatty"] if n == 0 else [])
    actions.record_vote(engine, battle_id=battle.id, choice="b")
    tie = arena.battle("m3", "m1")
    actions.record_vote(engine, battle_id=tie.id, choice="both_bad")
    arena.battle("m2", "m3")  # no vote: not counted
    style = vote_features.vote_style_features(engine)
    assert style.models == ("m1", "m2", "m3") and list(style.outcome) == [0.0, 0.5]
    assert (list(style.model_a), list(style.model_b)) == ([0, 2], [1, 0])
    long_reply = len(replies["a"][0])
    # Side a of the first vote: mean length of its two replies; one of two chatty, apologising, multi-line.
    assert list(style.features_a[0]) == [(long_reply + 2) / 2, 0.5, 0.5, 0.5]
    assert list(style.features_b[0]) == [float(len("action.y()")), 1.0, 0.0, 0.0]
    assert list(style.features_a[1]) == [2.0, 0.0, 0.0, 0.0]
    assert vote_features.vote_style_features(engine, scenario="chess").outcome.size == 0


def test_counted_votes_one_by_one_with_their_visitor(engine: Engine) -> None:
    arena = Arena(engine)
    arena.contestants("m1", "m2")
    visitor = actions.get_or_create_visitor(engine, anon_id="v-1")
    first = arena.battle("m1", "m2", visitor_id=visitor.id)
    actions.record_vote(engine, battle_id=first.id, choice="b", visitor_id=visitor.id)
    second = arena.battle("m2", "m1")
    actions.record_vote(engine, battle_id=second.id, choice="tie")
    named = arena.battle("m1", "m2", mode="named")
    actions.record_vote(engine, battle_id=named.id, choice="a")
    votes = vote_features.counted_votes(engine)
    assert votes.models == ("m1", "m2")
    assert (list(votes.model_a), list(votes.model_b)) == ([0, 1], [1, 0])
    assert list(votes.outcome) == [1, 2] and list(votes.visitor) == [visitor.id, -1]
    assert vote_features.counted_votes(engine, modes=None).outcome.size == 3


def test_reply_flags_aggregate_and_long_conversations_only(populated: Engine) -> None:
    flags = fixing.reply_flags(populated)
    assert flags.models == ("m1", "m2")
    assert (flags.graded, flags.regressions, flags.chatty) == ((4, 3), (1, 0), (3, 0))
    assert flags.recurrences == (1, 0)  # m1's chatty: made, cleared by the fix, back
    sequences: dict[str, dict[int, list[tuple[str, ...]]]] = {}
    for reply in fixing.graded_replies(populated):
        sequences.setdefault(reply.model, {}).setdefault(reply.conversation_id, []).append(reply.mistakes)
    assert flags.recurrences == tuple(count_recurrences(sequences.get(m, {}).values()) for m in flags.models)
    assert fixing.reply_flags(populated, modes=("auto",)).graded == (0, 1)
    long_ones = fixing.graded_replies(populated, min_replies=4)
    assert {r.model for r in long_ones} == {"m1"} and len(long_ones) == 4


def _retried_dialogue(arena: Arena, scenario: str, *, retry: bool) -> int:
    """m1 (side a): a reply with ``wrong_year``, corrected (fixed), corrected again (the mistake is back,
    with a regression); with ``retry`` that last reply is retried with a clean one. The visitor then
    skips the battle (the boards count closed battles only). Returns the first try's message id."""
    engine = arena.engine
    battle = arena.battle("m1", "m2", scenario=scenario, replies=False)
    actions.append_message(engine, battle_id=battle.id, side="a", kind="request", content="Add a meeting")
    first = _reply(engine, battle.id, "a", "partial", ["wrong_year"])
    _correct(engine, battle.id, "a", label="correct", mistakes=[], person=None)
    back = _correct(engine, battle.id, "a", label="partial", mistakes=["wrong_year", "regression"],
                    person=None)
    if retry:  # retrying the last reply (it is superseded) with a clean one
        side = actions.get_battle(engine, battle_id=battle.id).sides["a"]
        (answer,) = [c.next_reply_message_id for c in side.corrections if c.id == back]
        assert answer == side.replies[-1].id
        actions.append_message(engine, battle_id=battle.id, side="a", kind="reply", content="call",
                               grader_label="correct", grader_mistakes=[], replaces_message_id=answer)
    arena.close_all()
    return first


def test_roll_up_follows_retries_and_relabels(arena: Arena) -> None:
    """The per-conversation roll-up the aggregates sum is rewritten by a retry and by a late label."""
    engine = arena.engine
    arena.contestants("m1", "m2")
    _retried_dialogue(arena, "calendar", retry=False)
    first = _retried_dialogue(arena, "chess", retry=True)
    flags = fixing.reply_flags(engine, scenario="calendar")
    assert (flags.graded[0], flags.regressions[0], flags.recurrences[0]) == (3, 1, 1)
    assert list(boards.first_try_counts(engine, modes=None, models=("m1", "m2")).trials) == [2, 0]
    # The same dialogue with its last reply retried: no recurrence and no regression.
    flags = fixing.reply_flags(engine, scenario="chess")
    assert (flags.graded[0], flags.regressions[0], flags.recurrences[0]) == (3, 0, 0)
    # Relabelling a first try after the battle closed changes first-try accuracy at once.
    def chess() -> ModelCounts:
        return boards.first_try_counts(engine, scenario="chess", modes=None, models=("m1", "m2"))

    assert list(chess().successes) == [0, 0]
    actions.set_grader_label(engine, message_id=first, label="correct", mistakes=[])
    assert (list(chess().successes), list(chess().trials)) == ([1, 0], [1, 0])


def _turns_one_by_one(links: list[fixing.CorrectionLink], model: str) -> dict[str, int]:
    """The fold's turns to fix over all of a model's correction links read one row each (the roll-up
    folds each side apart when it is written, and SQL sums the sides)."""
    mine = [(k.faulty_message_id, k.next_reply_message_id, k.fixed) for k in links if k.model == model]
    return turns_to_fix(mine)


def count_recurrences(conversations: Iterable[Sequence[Sequence[str]]]) -> int:
    """Recurrences over conversations given as sequences of mistake kinds, one per graded reply."""
    return sum(sum(recurrence_flags(replies)) for replies in conversations)


def test_fix_chains_on_hand_made_links() -> None:
    links = [
        (1, 2, True),  # fixed at once
        (10, 11, False), (11, 12, False), (12, 13, True),  # the third correction worked
        (20, 21, False), (21, 22, False),  # gave up
        (30, 31, None),  # nobody judged it: left out
        (40, 41, False), (41, 42, True),
        (50, 51, False), (51, 52, None),  # judged once, then unjudged: never fixed
        (60, 61, False), (61, 62, False), (62, 63, False), (63, 64, True),  # fixed at the fourth: 3+
    ]
    assert fix_chains(links) == [1, 3, None, 2, None, 4]
    assert turns_to_fix(links) == {"1": 1, "2": 1, "3+": 2, "never": 2}
    assert fix_chains([]) == [] and turns_to_fix([]) == {"1": 0, "2": 0, "3+": 0, "never": 0}
    assert fix_chains([(1, 2, False), (2, 1, False)]) == []  # a cycle has no start: no chain, no hang


def test_recurrence_flags_need_a_cleared_mistake() -> None:
    sticky = [["bad_format"], [], ["bad_format"], ["bad_format"]]  # fixed, back (1), still there (0)
    assert recurrence_flags(sticky) == [False, False, True, False]
    assert recurrence_flags([["chatty"], ["chatty"], ["chatty"]]) == [False, False, False]
    # Per reply: chatty cleared by the second reply, back in the third alongside a new kind.
    assert recurrence_flags([["chatty"], ["wrong_time"], ["chatty", "wrong_time"]]) == [False, False, True]


@pytest.mark.parametrize("judge", ["person", "grader"])
def test_turns_to_fix_in_sql_equal_the_chains_read_one_by_one(populated: Engine, judge: str) -> None:
    counted = fixing.turns_to_fix_counts(populated, judge=judge)  # type: ignore[arg-type]
    links = fixing.correction_links(populated, judge=judge)  # type: ignore[arg-type]
    for model, buckets in zip(counted.models, counted.buckets, strict=True):
        assert buckets == _turns_one_by_one(links, model)
    # people: m1 fixed at the second correction; m2's first correction not fixed, the second unjudged.
    # grader: m1 fixed at the second correction, m2 at the first.
    expected = {"person": ({"1": 0, "2": 1, "3+": 0, "never": 0}, {"1": 0, "2": 0, "3+": 0, "never": 1}),
                "grader": ({"1": 0, "2": 1, "3+": 0, "never": 0}, {"1": 1, "2": 0, "3+": 0, "never": 0})}
    assert counted.buckets == expected[judge]


def test_chains_follow_corrections_of_corrections(arena: Arena) -> None:
    """A correction of the reply that answered a correction continues its chain, across a retry."""
    engine = arena.engine
    arena.contestants("m1", "m2")
    battle = arena.battle("m1", "m2", replies=False)
    actions.append_message(engine, battle_id=battle.id, side="a", kind="request", content="Add a meeting")
    _reply(engine, battle.id, "a", "partial", ["wrong_time"])
    _correct(engine, battle.id, "a", label="partial", mistakes=["wrong_time"], person="not_fixed")
    retried = actions.get_battle(engine, battle_id=battle.id).sides["a"].corrections[-1].next_reply_message_id
    actions.append_message(engine, battle_id=battle.id, side="a", kind="reply", content="call",
                           grader_label="partial", grader_mistakes=["wrong_time"],
                           replaces_message_id=retried)
    _correct(engine, battle.id, "a", label="partial", mistakes=["wrong_time"], person="not_fixed")
    _correct(engine, battle.id, "a", label="correct", mistakes=[], person="fixed")
    actions.append_message(engine, battle_id=battle.id, side="a", kind="request", content="Another one")
    _reply(engine, battle.id, "a", "partial", ["wrong_year"])
    _correct(engine, battle.id, "a", label="correct", mistakes=[], person="fixed")
    arena.close_all()
    counted = fixing.turns_to_fix_counts(engine, judge="person", models=("m1",))
    assert counted.buckets == ({"1": 1, "2": 0, "3+": 1, "never": 0},)


def test_bulk_seeded_roll_ups_equal_the_per_row_definitions(tmp_path: Path) -> None:
    """Random graded dialogues bulk-loaded (db.seed, the refill functions of migration 0005): the
    aggregates equal recurrence and turns to fix recomputed from the rows one by one."""
    from db.engine import make_engine
    from db.migrate import upgrade_to_head
    from db.seed import bulk_votes, seed_contestants, seed_graded_replies

    url = f"sqlite:///{tmp_path / 'seeded.db'}"
    upgrade_to_head(url)
    engine = make_engine(url)
    try:
        bulk_votes(engine, seed_contestants(engine, 4), 300)
        assert seed_graded_replies(engine, replies=2_000) == 2_000
        window: dict[str, Any] = {"scenario": "bench", "modes": ("anonymous",)}
        flags = fixing.reply_flags(engine, **window)
        sequences: dict[str, dict[int, list[tuple[str, ...]]]] = {}
        for reply in fixing.graded_replies(engine, **window):
            sequences.setdefault(reply.model, {}).setdefault(reply.conversation_id, []).append(reply.mistakes)
        assert sum(flags.graded) == 2_000 and sum(flags.recurrences) > 0
        assert flags.recurrences == tuple(count_recurrences(sequences[m].values()) for m in flags.models)
        for judge in ("person", "grader"):
            counted = fixing.turns_to_fix_counts(engine, judge=judge, **window)
            links = fixing.correction_links(engine, judge=judge, **window)
            for model, buckets in zip(counted.models, counted.buckets, strict=True):
                assert buckets == _turns_one_by_one(links, model)
            assert sum(counted.buckets[0].values()) > 0
    finally:
        engine.dispose()


def test_the_bulk_loader_stores_what_the_orm_would(tmp_path: Path) -> None:
    """The benchmark's driver-level inserts put each value through its column type, as SQLAlchemy does:
    aware UTC timestamps, JSON lists and objects, booleans read back as written."""
    from sqlalchemy import select

    from db.engine import make_engine, read_session
    from db.migrate import upgrade_to_head
    from db.models import Conversation, Message, Vote
    from db.seed import bulk_votes, seed_contestants, seed_graded_replies

    url = f"sqlite:///{tmp_path / 'seeded.db'}"
    upgrade_to_head(url)
    engine = make_engine(url)
    try:
        bulk_votes(engine, seed_contestants(engine, 3), 20)
        seed_graded_replies(engine, replies=20)
        assert boards.pairwise_counts(engine, scenario="bench").total == 20
        with read_session(engine) as session:
            vote = session.scalars(select(Vote)).first()
            message = session.scalars(select(Message).where(Message.kind == "reply")).first()
            request = session.scalars(select(Message).where(Message.kind == "request")).first()
            side = session.scalars(select(Conversation)).first()
            assert vote is not None and message is not None and request is not None and side is not None
            assert vote.created_at.tzinfo is not None and vote.revealed is False
            assert isinstance(message.grader_mistakes, list) and message.superseded is False
            assert request.grader_mistakes is None and side.params == {}
        # A voted battle is closed at its vote's time, as record_vote writes it (the boards count closed
        # battles only: without it the seeded Fixing figures are all zero).
        voted = actions.get_battle(engine, battle_id=vote.battle_id)
        assert voted.status == "voted" and voted.closed_at == vote.created_at
    finally:
        engine.dispose()


def test_a_flagged_battle_leaves_the_fixing_figures_and_comes_back_unflagged(populated: Engine) -> None:
    graded = fixing.reply_flags(populated).graded
    assert graded == (4, 3)
    battle = next(b for b in actions.recent_battles(populated, limit=10) if b.mode == "anonymous")
    actions.flag_battle(populated, battle_id=battle.id, reason="spam")
    assert fixing.reply_flags(populated).graded == (0, 0)
    assert fixing.reply_flags(populated, exclude_flagged=False).graded == graded
    actions.unflag_battle(populated, battle_id=battle.id)
    assert fixing.reply_flags(populated).graded == graded
