"""Every ``db.actions`` function and every refusal, on SQLite and PostgreSQL (fixtures in conftest.py)."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import Engine, func, select

from db import actions, boards
from db.errors import BattleClosed, InvalidInput, NotFound, VoteRefused
from db.models import Battle, Message, Vote, utcnow


def _count(engine: Engine, model: type) -> int:
    with engine.connect() as conn:
        return int(conn.scalar(select(func.count()).select_from(model)) or 0)


# --- contestants and visitors ---------------------------------------------------------------------------


def test_contestants_upsert_list_enable(engine: Engine) -> None:
    actions.upsert_contestant(engine, slug="zeta", display_name="Zeta", family="llama", params={"t": 0.7})
    actions.upsert_contestant(engine, slug="alpha", display_name="Alpha", source="gguf:x")
    updated = actions.upsert_contestant(engine, slug="zeta", display_name="Zeta 2", family="llama")
    assert updated.display_name == "Zeta 2" and updated.params == {} and updated.enabled
    assert [c.slug for c in actions.list_contestants(engine)] == ["alpha", "zeta"]
    off = actions.set_contestant_enabled(engine, slug="alpha", enabled=False)
    assert off.enabled is False
    assert [c.slug for c in actions.list_contestants(engine, enabled_only=True)] == ["zeta"]
    # upsert keeps the enabled flag unless told otherwise
    assert actions.upsert_contestant(engine, slug="alpha", display_name="Alpha").enabled is False
    assert actions.get_contestant(engine, slug="zeta").family == "llama"
    with pytest.raises(NotFound):
        actions.get_contestant(engine, slug="nope")
    with pytest.raises(NotFound):
        actions.set_contestant_enabled(engine, slug="nope", enabled=True)
    with pytest.raises(InvalidInput):
        actions.upsert_contestant(engine, slug=" ", display_name="blank")


def test_visitor_get_or_create_and_address_hash(engine: Engine) -> None:
    h = actions.hash_address("10.0.0.1", salt="pepper")
    assert h == actions.hash_address("10.0.0.1", salt="pepper")
    assert h != actions.hash_address("10.0.0.1", salt="other") and "10.0.0.1" not in h
    first = actions.get_or_create_visitor(engine, anon_id="abc", address_hash=h)
    again = actions.get_or_create_visitor(engine, anon_id="abc")
    assert again.id == first.id and again.address_hash == h
    assert actions.get_or_create_visitor(engine, anon_id="other").id != first.id
    with pytest.raises(InvalidInput):
        actions.hash_address("x", salt="")
    with pytest.raises(InvalidInput):
        actions.get_or_create_visitor(engine, anon_id="")
    with pytest.raises(InvalidInput):
        actions.get_or_create_visitor(engine, anon_id="x" * 65)


# --- opening battles -------------------------------------------------------------------------------------


def test_open_battle_two_sides_and_single_side(arena, engine: Engine) -> None:
    visitor = actions.get_or_create_visitor(engine, anon_id="v")
    battle = actions.open_battle(
        engine, mode="anonymous", scenario="calendar", contestant_a="m1", contestant_b="m2",
        visitor_id=visitor.id, system_prompt="be brief", params_a={"temperature": 0.0},
    )
    assert battle.status == "open" and battle.visitor_id == visitor.id and len(battle.id) == 36
    assert battle.sides["a"].contestant.slug == "m1" and battle.sides["b"].contestant.slug == "m2"
    assert battle.sides["a"].system_prompt == battle.sides["b"].system_prompt == "be brief"
    assert battle.sides["a"].params == {"temperature": 0.0} and battle.sides["b"].params == {}
    assert battle.created_at.tzinfo is not None
    direct = actions.open_battle(engine, mode="direct", scenario="free", contestant_a="m3")
    assert set(direct.sides) == {"a"} and direct.dialogue is None and battle.dialogue is None
    played = {"id": "calendar-7-00000", "scenario": "calendar", "seed": 7,
              "turns": [{"user": "Add lunch", "kind": "request", "expected": "x"}]}
    with_dialogue = actions.open_battle(engine, mode="named", scenario="calendar", contestant_a="m1",
                                        contestant_b="m2", dialogue=played)
    assert actions.get_battle(engine, battle_id=with_dialogue.id).dialogue == played


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"mode": "anonymous", "contestant_a": "m1", "contestant_b": "m1"}, InvalidInput),
        ({"mode": "anonymous", "contestant_a": "m1"}, InvalidInput),
        ({"mode": "ranked", "contestant_a": "m1", "contestant_b": "m2"}, InvalidInput),
        ({"mode": "named", "contestant_a": "m1", "contestant_b": "ghost"}, NotFound),
        ({"mode": "named", "contestant_a": "m1", "contestant_b": "m2", "visitor_id": 999}, NotFound),
        ({"mode": "named", "contestant_a": "m1", "contestant_b": "m2", "scenario": ""}, InvalidInput),
        ({"mode": "named", "contestant_a": "m1", "contestant_b": "m2", "dialogue": {"turns": []}},
         InvalidInput),
        ({"mode": "named", "contestant_a": "m1", "contestant_b": "m2",
          "dialogue": {"id": "d", "turns": ["x" * 70_000]}}, InvalidInput),
    ],
)
def test_open_battle_refusals_write_nothing(arena, engine: Engine, kwargs: dict, error: type) -> None:
    kwargs = {"scenario": "calendar", **kwargs}
    with pytest.raises(error):
        actions.open_battle(engine, **kwargs)
    assert _count(engine, Battle) == 0


def test_open_battle_refuses_disabled_contestant_atomically(arena, engine: Engine) -> None:
    actions.set_contestant_enabled(engine, slug="m2", enabled=False)
    with pytest.raises(InvalidInput, match="disabled"):
        actions.open_battle(engine, mode="anonymous", scenario="c", contestant_a="m1", contestant_b="m2")
    assert _count(engine, Battle) == 0  # the battle row flushed before the check was rolled back


# --- messages ---------------------------------------------------------------------------------------------


def test_append_messages_positions_roles_first_try(arena, engine: Engine) -> None:
    b = arena.battle(replies=False)
    req = actions.append_message(engine, battle_id=b.id, side="a", kind="request", content="Add a meeting")
    rep = actions.append_message(
        engine, battle_id=b.id, side="a", kind="reply", content="action.add(...)", ttft_ms=12.5,
        total_ms=80.0, prompt_tokens=40, completion_tokens=9, finish_reason="stop",
        grader_label="partial", grader_mistakes=["year"],
    )
    req2 = actions.append_message(engine, battle_id=b.id, side="a", kind="request", content="next")
    rep2 = actions.append_message(engine, battle_id=b.id, side="a", kind="reply", content="second")
    assert [req.position, rep.position, req2.position, rep2.position] == [0, 1, 2, 3]
    assert (req.role, rep.role) == ("user", "assistant")
    assert rep.first_try and not rep2.first_try
    stored = actions.get_battle(engine, battle_id=b.id).sides["a"].messages[1]
    assert stored.ttft_ms == 12.5 and stored.completion_tokens == 9 and stored.grader_mistakes == ("year",)
    assert stored.finish_reason == "stop" and stored.grader_label == "partial"
    assert actions.get_battle(engine, battle_id=b.id).sides["b"].messages == ()


def test_append_message_bad_input_is_refused_and_writes_nothing(arena, engine: Engine) -> None:
    b = arena.battle(replies=False)
    cases = [
        ({"kind": "request", "content": ""}, InvalidInput),
        ({"kind": "request", "content": "   \n"}, InvalidInput),
        ({"kind": "request", "content": "x" * 12_001}, InvalidInput),
        ({"kind": "request", "content": "x" * 101, "max_chars": 100}, InvalidInput),
        ({"kind": "shout", "content": "x"}, InvalidInput),
        ({"kind": "request", "content": "x", "side": "c"}, InvalidInput),
        ({"kind": "request", "content": "x", "ttft_ms": 3.0}, InvalidInput),
        ({"kind": "reply", "content": "x", "total_ms": -1.0}, InvalidInput),
        ({"kind": "reply", "content": "x", "grader_label": "great"}, InvalidInput),
        ({"kind": "reply", "content": ""}, InvalidInput),
        ({"kind": "correction", "content": "fix it"}, InvalidInput),  # nothing to correct yet
    ]
    for kwargs, error in cases:
        kwargs = {"side": "a", **kwargs}
        with pytest.raises(error):
            actions.append_message(engine, battle_id=b.id, **kwargs)
    with pytest.raises(NotFound):
        actions.append_message(engine, battle_id="no-such-battle", side="a", kind="request", content="x")
    assert _count(engine, Message) == 0
    assert actions.append_message(engine, battle_id=b.id, side="a", kind="request", content="x" * 12_000)
    failed = actions.append_message(engine, battle_id=b.id, side="a", kind="reply", content="", error="OOM")
    assert failed.error == "OOM" and failed.content == ""


def test_single_side_battle_has_no_side_b(arena, engine: Engine) -> None:
    b = arena.battle("m1", None, mode="direct", replies=False)
    with pytest.raises(NotFound):
        actions.append_message(engine, battle_id=b.id, side="b", kind="request", content="x")


def test_retry_supersedes_reply_and_relinks_correction(arena, engine: Engine) -> None:
    b = arena.battle()
    faulty = b.sides["a"].replies[-1]
    corr = actions.record_correction(engine, battle_id=b.id, side="a", content="The current year is 2024.")
    assert corr.faulty_message_id == faulty.id and corr.next_reply_message_id is None and corr.side == "a"
    first = actions.append_message(engine, battle_id=b.id, side="a", kind="reply", content="try 1")
    second = actions.append_message(
        engine, battle_id=b.id, side="a", kind="reply", content="try 2", replaces_message_id=first.id
    )
    view = actions.get_battle(engine, battle_id=b.id).sides["a"]
    assert [m.content for m in view.replies] == ["ok", "try 2"]
    assert [m.superseded for m in view.messages if m.kind == "reply"] == [False, True, False]
    assert view.corrections[0].next_reply_message_id == second.id
    with pytest.raises(InvalidInput, match="already replaced"):
        actions.append_message(
            engine, battle_id=b.id, side="a", kind="reply", content="x", replaces_message_id=first.id
        )
    other_side = actions.get_battle(engine, battle_id=b.id).sides["b"].replies[0]
    with pytest.raises(InvalidInput, match="not a reply of side a"):
        actions.append_message(
            engine, battle_id=b.id, side="a", kind="reply", content="x", replaces_message_id=other_side.id
        )


def test_correction_outcome_and_grader_label(arena, engine: Engine) -> None:
    b = arena.battle()
    corr = actions.record_correction(engine, battle_id=b.id, side="b", content="Just the API call please")
    with pytest.raises(InvalidInput, match="nothing to judge"):
        actions.set_correction_outcome(engine, correction_id=corr.id, outcome="fixed", judged_by="person")
    unknown = actions.set_correction_outcome(
        engine, correction_id=corr.id, outcome="unknown", judged_by="grader"
    )
    assert unknown.outcome == "unknown" and unknown.judged_at is not None
    reply = actions.append_message(engine, battle_id=b.id, side="b", kind="reply", content="fixed call")
    judged = actions.set_correction_outcome(
        engine, correction_id=corr.id, outcome="not_fixed", judged_by="person"
    )
    assert (judged.outcome, judged.judged_by) == ("not_fixed", "person")
    assert judged.next_reply_message_id == reply.id
    with pytest.raises(InvalidInput):
        actions.set_correction_outcome(engine, correction_id=corr.id, outcome="maybe", judged_by="person")
    with pytest.raises(InvalidInput):
        actions.set_correction_outcome(engine, correction_id=corr.id, outcome="fixed", judged_by="robot")
    with pytest.raises(NotFound):
        actions.set_correction_outcome(engine, correction_id=10_000, outcome="fixed", judged_by="person")
    labelled = actions.set_grader_label(engine, message_id=reply.id, label="correct", mistakes=[])
    assert labelled.grader_label == "correct" and labelled.grader_mistakes == () and labelled.side == "b"
    with pytest.raises(InvalidInput, match="only replies"):
        actions.set_grader_label(engine, message_id=b.sides["a"].messages[0].id, label="correct")
    with pytest.raises(InvalidInput):
        actions.set_grader_label(engine, message_id=reply.id, label="meh")
    with pytest.raises(NotFound):
        actions.set_grader_label(engine, message_id=10_000, label="correct")


# --- votes --------------------------------------------------------------------------------------------------


def test_vote_once_then_closed(arena, engine: Engine) -> None:
    visitor = actions.get_or_create_visitor(engine, anon_id="v")
    b = arena.battle(visitor_id=visitor.id)
    vote = actions.record_vote(engine, battle_id=b.id, choice="b", visitor_id=visitor.id)
    assert vote.counted and vote.choice == "b" and vote.visitor_id == visitor.id
    battle = actions.get_battle(engine, battle_id=b.id)
    assert battle.status == "voted" and battle.closed_at is not None and battle.vote == vote
    with pytest.raises(VoteRefused) as refused:
        actions.record_vote(engine, battle_id=b.id, choice="a", visitor_id=visitor.id)
    assert refused.value.reason == "already_voted"
    with pytest.raises(BattleClosed):
        actions.append_message(engine, battle_id=b.id, side="a", kind="request", content="more")
    assert _count(engine, Vote) == 1


@pytest.mark.parametrize("choice", ["a", "b", "tie", "both_bad"])
def test_vote_choices_accepted(arena, engine: Engine, choice: str) -> None:
    assert actions.record_vote(engine, battle_id=arena.battle().id, choice=choice).choice == choice


def test_vote_refusals(arena, engine: Engine) -> None:
    owner = actions.get_or_create_visitor(engine, anon_id="owner")
    stranger = actions.get_or_create_visitor(engine, anon_id="stranger")

    def reason(battle_id: str, **kwargs: object) -> str:
        with pytest.raises(VoteRefused) as refused:
            actions.record_vote(engine, battle_id=battle_id, choice="a", **kwargs)  # type: ignore[arg-type]
        return refused.value.reason

    not_ready = arena.battle(replies=False)
    actions.append_message(engine, battle_id=not_ready.id, side="a", kind="reply", content="only a")
    assert reason(not_ready.id) == "not_ready"
    assert reason(arena.battle("m1", None, mode="direct").id) == "single_side"
    assert reason(arena.battle(visitor_id=owner.id).id, visitor_id=stranger.id) == "not_owner"
    stale = arena.battle()
    assert actions.abandon_stale_battles(engine, older_than=utcnow() + dt.timedelta(seconds=1)) >= 1
    assert reason(stale.id) == "closed"
    flagged = arena.battle()
    actions.flag_battle(engine, battle_id=flagged.id, reason="spam")
    assert reason(flagged.id) == "closed"
    with pytest.raises(InvalidInput):
        actions.record_vote(engine, battle_id=arena.battle().id, choice="c")
    with pytest.raises(NotFound):
        actions.record_vote(engine, battle_id="missing", choice="a")
    assert _count(engine, Vote) == 0


def test_revealed_before_vote_refused_or_recorded_uncounted(arena, engine: Engine) -> None:
    b = arena.battle()
    revealed = actions.mark_revealed(engine, battle_id=b.id)
    assert revealed.revealed_before_vote and revealed.revealed_at is not None
    with pytest.raises(VoteRefused) as refused:
        actions.record_vote(engine, battle_id=b.id, choice="a")
    assert refused.value.reason == "revealed"
    vote = actions.record_vote(engine, battle_id=b.id, choice="a", accept_revealed=True)
    assert vote.revealed and not vote.counted
    assert boards.pairwise_counts(engine).total == 0
    assert boards.pairwise_counts(engine, exclude_revealed=False).total == 1
    # Revealing after the vote (the normal flow) keeps the vote counted.
    normal = arena.battle()
    actions.record_vote(engine, battle_id=normal.id, choice="b")
    after = actions.mark_revealed(engine, battle_id=normal.id)
    assert not after.revealed_before_vote and after.revealed_at is not None and after.vote.counted
    assert boards.pairwise_counts(engine).total == 1


def test_flag_and_unflag(arena, engine: Engine) -> None:
    b = arena.battle()
    actions.record_vote(engine, battle_id=b.id, choice="a")
    flagged = actions.flag_battle(engine, battle_id=b.id, reason="abuse")
    assert flagged.status == "flagged" and flagged.flag_reason == "abuse" and not flagged.vote.counted
    assert boards.pairwise_counts(engine).total == 0
    assert boards.pairwise_counts(engine, exclude_flagged=False).total == 1
    restored = actions.unflag_battle(engine, battle_id=b.id)
    assert restored.status == "voted" and restored.vote.counted and boards.pairwise_counts(engine).total == 1
    with pytest.raises(InvalidInput):
        actions.unflag_battle(engine, battle_id=b.id)
    open_one = arena.battle()
    actions.flag_battle(engine, battle_id=open_one.id, reason="x")
    assert actions.unflag_battle(engine, battle_id=open_one.id).status == "open", "the prior status returns"
    with pytest.raises(InvalidInput):
        actions.flag_battle(engine, battle_id=b.id, reason="")
    with pytest.raises(NotFound):
        actions.flag_battle(engine, battle_id="missing", reason="x")
    assert _count(engine, Vote) == 1  # moderation flags, it never deletes


# --- resume, abandon, limits, admin ------------------------------------------------------------------------


def test_resume_open_battle_and_abandon(arena, engine: Engine) -> None:
    v = actions.get_or_create_visitor(engine, anon_id="v")
    assert actions.resume_open_battle(engine, visitor_id=v.id) is None
    older = arena.battle(visitor_id=v.id, replies=False)
    newer = arena.battle(visitor_id=v.id, replies=False)
    assert actions.resume_open_battle(engine, visitor_id=v.id).id == newer.id
    actions.append_message(engine, battle_id=older.id, side="a", kind="request", content="back to this one")
    resumed = actions.resume_open_battle(engine, visitor_id=v.id)
    assert resumed.id == older.id and resumed.sides["a"].messages[0].content == "back to this one"
    assert actions.resume_open_battle(engine, visitor_id=v.id, mode="named") is None
    cutoff = utcnow()
    fresh = arena.battle(visitor_id=v.id, replies=False)
    assert actions.abandon_stale_battles(engine, older_than=cutoff) == 2
    assert actions.get_battle(engine, battle_id=older.id).status == "abandoned"
    assert actions.resume_open_battle(engine, visitor_id=v.id).id == fresh.id
    with pytest.raises(InvalidInput):
        actions.abandon_stale_battles(engine, older_than=dt.datetime(2026, 1, 1))  # naive
    with pytest.raises(NotFound):
        actions.get_battle(engine, battle_id="missing")


def test_a_voted_battle_is_shown_again_until_dismissed(arena, engine: Engine) -> None:
    """The reveal stays across reloads: the page resumes the battle just voted on until *New battle*."""
    v = actions.get_or_create_visitor(engine, anon_id="v")
    other = actions.get_or_create_visitor(engine, anon_id="w")
    voted = arena.battle(visitor_id=v.id)
    actions.record_vote(engine, battle_id=voted.id, choice="a", visitor_id=v.id)
    assert actions.resume_open_battle(engine, visitor_id=v.id) is None  # no longer open ...
    assert actions.resume_battle(engine, visitor_id=v.id, mode="anonymous").id == voted.id  # ... still shown
    assert actions.resume_battle(engine, visitor_id=v.id, mode="named") is None
    with pytest.raises(InvalidInput):
        actions.dismiss_battle(engine, battle_id=voted.id, visitor_id=other.id)  # not theirs to dismiss
    actions.dismiss_battle(engine, battle_id=voted.id, visitor_id=v.id)
    actions.dismiss_battle(engine, battle_id=voted.id, visitor_id=v.id)  # twice: nothing more happens
    assert actions.resume_battle(engine, visitor_id=v.id, mode="anonymous") is None
    skipped = arena.battle(visitor_id=v.id)
    actions.dismiss_battle(engine, battle_id=skipped.id, visitor_id=v.id)  # open: never dismissed
    assert actions.resume_battle(engine, visitor_id=v.id, mode="anonymous").id == skipped.id
    actions.abandon_battle(engine, battle_id=skipped.id, visitor_id=v.id)
    assert actions.resume_battle(engine, visitor_id=v.id, mode="anonymous") is None  # skipped: not shown


def test_rate_limit_counts(arena, engine: Engine) -> None:
    v = actions.get_or_create_visitor(engine, anon_id="v")
    other = actions.get_or_create_visitor(engine, anon_id="other")
    start = utcnow()
    b = arena.battle(visitor_id=v.id)  # 2 requests + 2 replies
    arena.battle(visitor_id=other.id)
    actions.record_correction(engine, battle_id=b.id, side="a", content="wrong year")
    assert actions.count_battles_since(engine, visitor_id=v.id, since=start) == 1
    assert actions.count_messages_since(engine, visitor_id=v.id, since=start) == 3
    later = utcnow() + dt.timedelta(seconds=1)
    assert actions.count_battles_since(engine, visitor_id=v.id, since=later) == 0
    assert actions.count_messages_since(engine, visitor_id=v.id, since=later) == 0


def test_admin_figures_and_table_counts(arena, engine: Engine) -> None:
    since = utcnow() - dt.timedelta(hours=2)
    b = arena.battle()
    arena.battle("m1", "m3")
    actions.append_message(engine, battle_id=b.id, side="a", kind="reply", content="", error="timeout",
                           ttft_ms=10.0, total_ms=100.0, completion_tokens=5)
    actions.append_message(engine, battle_id=b.id, side="a", kind="reply", content="x", ttft_ms=30.0,
                           total_ms=300.0, completion_tokens=7)
    hours = boards.admin_battles_per_hour(engine, since=since)
    assert sum(h.count for h in hours) == 2 and all(h.hour.tzinfo is not None for h in hours)
    assert hours[-1].hour <= utcnow() < hours[-1].hour + dt.timedelta(hours=1)
    figures = {f.model: f for f in boards.admin_latency(engine, since=since)}
    m1 = figures["m1"]
    assert (m1.replies, m1.errors, m1.completion_tokens) == (4, 1, 12)
    assert m1.mean_ttft_ms == pytest.approx(20.0) and m1.max_total_ms == pytest.approx(300.0)
    assert figures["m2"].mean_ttft_ms is None and figures["m3"].replies == 1
    counts = boards.table_counts(engine)
    assert counts["battles"] == 2 and counts["contestants"] == 3 and counts["messages"] == 10
    assert counts["votes"] == 0 and counts["corrections"] == 0
