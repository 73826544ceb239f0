"""Limits a visitor cannot reset.

Probes of the old app: Retry after hitting messages/minute gave 10 more generations and skipped the
turn limit; a new visitor id (dropping ``?v=``) started every limit from zero; ``address_hash`` was
written and never read; one visitor could run generations from several tabs at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from sqlalchemy import create_engine

from db import actions as db_actions
from db import boards as db_boards
from tests.webapp.conftest import open_app
from tests.webapp.test_arena_app import TURN_1, _send, _texts

ARENA = "pages/arena.py"


def _replies(url: str, at, side: str) -> int:  # noqa: ANN001
    battle = db_actions.get_battle(create_engine(url), battle_id=at.session_state["battle_id:anonymous"])
    return sum(1 for m in battle.sides[side].messages if m.kind == "reply")


def test_retry_counts_against_the_rate_limit(arena_env: Callable[..., str]) -> None:
    url = arena_env(generations_per_minute="2")
    at = open_app(ARENA)
    _send(at, TURN_1)  # two generations, one per side
    at.button(key="anonymous:retry_a").click().run()
    assert any("Slow down" in e for e in _texts(at.error))
    assert _replies(url, at, "a") == 1, "no generation ran"


def test_retries_per_side_are_capped(arena_env: Callable[..., str]) -> None:
    url = arena_env(max_turns_per_battle="1")
    at = open_app(ARENA)
    _send(at, TURN_1)
    at.button(key="anonymous:retry_b").click().run()
    assert not at.error and _replies(url, at, "b") == 2
    at.button(key="anonymous:retry_b").click().run()
    assert any("the most a battle allows (2)" in e for e in _texts(at.error))
    assert _replies(url, at, "b") == 2


def _context(url: str, visitor: str, address: str | None):  # noqa: ANN202
    """The context a page builds, for a visitor seen from ``address`` (AppTest has none)."""
    from webapp import context, resources

    settings = resources.settings()
    engine = resources.engine(url)
    digest = db_actions.hash_address(address, salt=settings.hash_salt.get_secret_value()) if address else None
    row = db_actions.get_or_create_visitor(engine, anon_id=visitor, address_hash=digest)
    ctx = context.Context(settings=settings, engine=engine, visitor_id=row.id, anon_id=visitor,
                          address_hash=digest)
    context.ensure_contestants(ctx)
    return ctx


def _turn(ctx, sides: tuple[str, ...] = ("a", "b"), *, finish: bool = True) -> tuple[int,
                                                                                     ...]:  # noqa: ANN001
    """A turn's generations as ``send_turn.generate`` records them (finished, or left in flight)."""
    from webapp.flows import send_turn

    battle = db_actions.open_battle(ctx.engine, mode="named", scenario="calendar", contestant_a="tiny-llama",
                                    contestant_b="tiny-gemma3", visitor_id=ctx.visitor_id, first_request="hi")
    held = send_turn.start_ledger(ctx, battle_id=battle.id, sides=sides)
    if finish:
        db_actions.finish_generations(ctx.engine, ids=held)
    return held


def test_a_new_visitor_id_does_not_reset_the_address_limit(arena_env: Callable[..., str]) -> None:
    from webapp.flows import send_turn

    url = arena_env(generations_per_minute="2", address_limit_factor="2")
    for n in range(2):  # two visitors from one address use the address's 4 generations
        _turn(_context(url, f"visitor-{n}", "198.51.100.7"))
    fresh = _context(url, "visitor-new", "198.51.100.7")
    problem = send_turn.send_problem(fresh, battle=None, text="hello", targets=("a", "b"), correction=False)
    assert problem is not None and "your network" in problem
    elsewhere = _context(url, "visitor-far", "203.0.113.5")
    assert send_turn.send_problem(elsewhere, battle=None, text="hello", targets=("a", "b"),
                                  correction=False) is None


def test_visitors_with_unknown_addresses_share_one_bucket(arena_env: Callable[..., str]) -> None:
    """The probe: with no known address every per-address limit became per visitor. Now unknown
    addresses share one bucket: two fresh cookies use it up for a third."""
    from webapp.flows import send_turn

    url = arena_env(generations_per_minute="2", address_limit_factor="2")
    for n in range(2):
        _turn(_context(url, f"nowhere-{n}", None))
    fresh = _context(url, "nowhere-new", None)
    problem = send_turn.send_problem(fresh, battle=None, text="hello", targets=("a", "b"), correction=False)
    assert problem is not None and "your network" in problem


def test_one_generation_in_flight_per_visitor(arena_env: Callable[..., str]) -> None:
    from webapp.flows import send_turn

    url = arena_env()
    ctx = _context(url, "two-tabs", None)
    held = _turn(ctx, ("a",), finish=False)  # the first tab is streaming
    problem = send_turn.send_problem(ctx, battle=None, text="hi", targets=("a",), correction=False)
    assert problem is not None and "still being generated" in problem
    other = _context(url, "someone-else", "203.0.113.9")
    assert send_turn.send_problem(other, battle=None, text="hi", targets=("a",), correction=False) is None
    db_actions.finish_generations(ctx.engine, ids=held)
    assert send_turn.send_problem(ctx, battle=None, text="hi", targets=("a",), correction=False) is None


def test_a_turn_the_ledger_refuses_writes_nothing(arena_env: Callable[..., str]) -> None:
    """The same turn sent from two servers at once passes both early checks (nothing in flight yet);
    the ledger lets one through, and the other must not store the visitor's message a second time."""
    from webapp import limits
    from webapp.flows import Refused, send_turn
    from webapp.flows.open_battle import load_battle

    url = arena_env()
    ctx = _context(url, "two-servers", None)
    opened = db_actions.open_battle(ctx.engine, mode="named", scenario="calendar", contestant_a="tiny-llama",
                                    contestant_b="tiny-gemma3", visitor_id=ctx.visitor_id, first_request="hi")
    battle = load_battle(ctx, battle_id=opened.id)
    held = send_turn.add_turn(ctx, battle=battle, targets=("a", "b"), text="again", kind="request")
    with pytest.raises(Refused, match=re.escape(limits.BUSY)):  # the other server, a moment later
        send_turn.add_turn(ctx, battle=battle, targets=("a", "b"), text="again", kind="request")
    stored = db_actions.get_battle(ctx.engine, battle_id=opened.id)
    assert [m.content for m in stored.sides["a"].messages] == ["hi", "again"], "the turn is stored once"
    assert db_actions.generations_in_flight(ctx.engine, visitor_id=ctx.visitor_id) == len(held) == 2


def test_an_address_has_a_cap_on_generations_in_flight(arena_env: Callable[..., str]) -> None:
    """The probe: with a new cookie per tab one address ran 16 streams at once. Now the address's
    in-flight cap (ARENA_GENERATIONS_IN_FLIGHT_PER_ADDRESS) refuses the tab past it, in words."""
    from webapp import limits
    from webapp.flows import Refused, send_turn

    url = arena_env(generations_in_flight_per_address="4")
    for n in range(2):
        _turn(_context(url, f"tab-{n}", "198.51.100.7"), finish=False)
    tab = _context(url, "tab-new", "198.51.100.7")
    problem = send_turn.send_problem(tab, battle=None, text="hi", targets=("a",), correction=False)
    assert problem == limits.NETWORK_IN_FLIGHT
    with pytest.raises(Refused, match="for your network right now"):
        _turn(tab, ("a",))


def _votes(url: str) -> int:
    return db_boards.table_counts(create_engine(url))["votes"]


def test_daily_vote_cap_refuses_in_words_before_anything_is_written(arena_env: Callable[..., str]) -> None:
    """ARENA_VOTES_PER_VISITOR_PER_DAY=1: the second battle's vote bar is disabled with the reason, and a
    stale tab (drawn before the first vote) that clicks anyway is refused; one vote is stored."""
    url = arena_env(votes_per_visitor_per_day="1")
    arena = open_app(ARENA)
    _send(arena, TURN_1)
    side_by_side = open_app("pages/side_by_side.py", visitor=arena.session_state["visitor_id"])
    side_by_side.chat_input(key="named:input").set_value(TURN_1).run()
    assert not side_by_side.button(key="named:vote_a").disabled, "under the cap: the vote bar is open"

    arena.button(key="anonymous:vote_a").click().run()
    assert "Thanks! Your vote is recorded." in _texts(arena.success)
    side_by_side.button(key="named:vote_a").click().run()  # drawn before the first vote
    cap_words = "the most a visitor may cast in a day (1)"
    assert any(cap_words in e for e in _texts(side_by_side.error)), _texts(side_by_side.error)
    assert _votes(url) == 1
    battle = db_actions.get_battle(create_engine(url),
                                   battle_id=side_by_side.session_state["battle_id:named"])
    assert battle.status == "open" and battle.vote is None, "nothing was written"

    arena.button(key="anonymous:new").click().run()
    _send(arena, TURN_1)
    assert arena.button(key="anonymous:vote_b").disabled
    assert any(cap_words in w and "midnight UTC" in w for w in _texts(arena.warning))
    assert not arena.button(key="anonymous:skip").disabled, "the battle can still be left"


def test_no_vote_cap_by_default(arena_env: Callable[..., str]) -> None:
    url = arena_env()
    at = open_app(ARENA)
    for _ in range(2):
        _send(at, TURN_1)
        at.button(key="anonymous:vote_tie").click().run()
        at.button(key="anonymous:new").click().run()
    assert _votes(url) == 2 and not at.warning


class _Interrupted(Exception):
    """What Streamlit raises in the script thread when a click or a reload reruns the page mid-stream."""


class _LeftPage:
    """A reply slot of a page the visitor has just left: the first drawing call interrupts the script."""

    def __getattr__(self, name: str):  # noqa: ANN204
        def interrupt(*args: object, **kwargs: object) -> None:
            raise _Interrupted(name)

        return interrupt


def _wait_for_replies(battle_id: str) -> None:
    """Until the battle's replies still being generated in this process are stored."""
    from webapp.replies import DESK

    for job in DESK.running(battle_id).values():
        assert job.done.wait(timeout=120), "a reply job never ended"


def test_an_interrupted_generation_counts_and_frees_its_slot(arena_env: Callable[..., str]) -> None:
    """The probe: every click, reload or navigation during streaming cancelled the reply, and 100
    generations started in a second were never counted. Now each counts from its start; a page that
    leaves mid-stream stops nothing (the reply belongs to the battle), and the slot is freed once the
    reply is stored."""
    from webapp.flows import send_turn
    from webapp.flows.open_battle import load_battle

    url = arena_env(generations_per_minute="4")
    ctx = _context(url, "restless", "198.51.100.7")
    opened = db_actions.open_battle(ctx.engine, mode="named", scenario="calendar", contestant_a="tiny-llama",
                                    contestant_b="tiny-gemma3", visitor_id=ctx.visitor_id, first_request="hi")
    battle = load_battle(ctx, battle_id=opened.id)
    for _ in range(2):
        with pytest.raises(_Interrupted):
            send_turn.generate(ctx, battle=battle, targets=("a", "b"),
                               placeholders=dict.fromkeys("ab", _LeftPage()))
        _wait_for_replies(opened.id)
        in_flight = db_actions.generations_in_flight(ctx.engine, visitor_id=ctx.visitor_id)
        assert in_flight == 0, "the slot is freed once the reply is stored"
        battle = load_battle(ctx, battle_id=opened.id)
    assert send_turn.generations_last_minute(ctx) == (4, 4)
    stored = db_actions.get_battle(ctx.engine, battle_id=opened.id)
    replies = [m for side in stored.sides.values() for m in side.messages if m.kind == "reply"]
    assert len(replies) == 4, "the page left, and each reply was still generated and stored"
    problem = send_turn.send_problem(ctx, battle=battle, text="again", targets=("a",), correction=False)
    assert problem is not None and "Slow down" in problem


def test_interrupted_retries_count_for_the_side_cap(arena_env: Callable[..., str]) -> None:
    """A side may generate twice the turn limit: retries cut short before their reply was stored count."""
    from webapp.flows import send_turn
    from webapp.flows.open_battle import load_battle

    url = arena_env(max_turns_per_battle="1")
    ctx = _context(url, "retrier", "198.51.100.8")
    opened = db_actions.open_battle(ctx.engine, mode="named", scenario="calendar", contestant_a="tiny-llama",
                                    contestant_b="tiny-gemma3", visitor_id=ctx.visitor_id, first_request="hi")
    battle = load_battle(ctx, battle_id=opened.id)
    for _ in range(2):
        assert send_turn.retry_problem(ctx, battle=battle, side="b") is None
        with pytest.raises(_Interrupted):
            send_turn.generate(ctx, battle=battle, targets=("b",), placeholders={"b": _LeftPage()})
        _wait_for_replies(opened.id)
        battle = load_battle(ctx, battle_id=opened.id)
    problem = send_turn.retry_problem(ctx, battle=load_battle(ctx, battle_id=opened.id), side="b")
    assert problem is not None and "the most a battle allows (2)" in problem
