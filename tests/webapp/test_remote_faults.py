"""The remote path under faults, at the app's level: a real battle in the web app against a fake
OpenAI-compatible engine on loopback (``tests.fake_openai``) that misbehaves for one of the two models.

For each fault (429 with ``Retry-After``, 500s, a stream that stalls, a stream that ends without
``[DONE]``, a 10 MB line, bytes that are not UTF-8, a server that goes away mid-reply) the visitor reads a
clear message on that side only, the reply is stored with finish reason ``error`` and a category, the
other side's reply is stored as usual, and the model's line recovers: once the engine behaves, a Retry
of that side streams a good reply. The remote limits are short (``ARENA_REMOTE_IDLE_TIMEOUT_S``,
``ARENA_REMOTE_REPLY_DEADLINE_S``), so each drill ends in seconds.

The circuit breaker, with three models: two failures in a row rest the faulty model (the pickers leave
it out, the Arena pairs the other two), the cool-down passes (the stored times are moved back, not
slept through), and its trial closes the breaker again.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from streamlit.testing.v1 import AppTest

from db import actions as db_actions
from tests.db.conftest import back_date
from tests.fake_openai import FakeServer, Handler, Script, serve
from tests.webapp.conftest import open_app, warm_pool
from tests.webapp.test_arena_app import ARENA, TURN_1, _send, _texts

FAULTY, STEADY, SPARE = "faulty-served", "steady-served", "spare-served"  # engine: "faulty", "steady"
IDLE_S, DEADLINE_S = "0.3", "6"
RETRY_AFTER_S = 1.5  # longer than the client's own first backoffs (0.5 s, 1 s): the gaps show it obeyed
SERVER_GIVES_UP_S = 5.0  # a stalled script stops after this: an unbounded client fails, not hangs
HEADLINE = "This model could not reply. Retry this side, or go on with the other."
FIXED_REPLY = "Hello from the engine, working again."


def _words(h: Handler, *words: str) -> None:
    h.start_sse()
    for word in words[:-1]:
        h.delta(word)
    h.delta(words[-1], finish_reason="stop")
    h.done()


def _stall(h: Handler) -> None:
    h.start_sse()
    h.delta("Let me")
    h.wait_for_client_close(SERVER_GIVES_UP_S)


def _no_done(h: Handler) -> None:
    h.start_sse()
    h.delta("Let me")
    h.delta(" see")
    h.end_body()  # the body ends properly, but neither a finish reason nor [DONE] came


def _huge_line(h: Handler) -> None:
    h.start_sse()
    h.raw("data: " + "z" * 10_000_000 + "\n\n")
    h.done()


def _not_utf8(h: Handler) -> None:
    h.start_sse()
    h.delta("Let me")
    h.raw(b'data: {"choices": [{"index": 0, "delta": {"content": "caf\xe9 \xff\xfe"}}]}\n\n')
    h.done()


def _goes_away(h: Handler) -> None:
    h.start_sse()
    h.delta("Let me")
    h.hang_up()


# Each fault: what the engine does for the faulty model, and the category the visitor reads.
FAULTS: dict[str, tuple[Callable[[Handler], None], str]] = {
    "429 with Retry-After": (lambda h: h.error_status(429, "slow down", retry_after=f"{RETRY_AFTER_S:g}"),
                             "busy"),
    "500s": (lambda h: h.error_status(500, "engine on fire"), "engine_error"),
    "a stream that stalls": (_stall, "timeout"),
    "a stream that ends without [DONE]": (_no_done, "engine_error"),
    "a 10 MB line": (_huge_line, "engine_error"),
    "bytes that are not UTF-8": (_not_utf8, "engine_error"),
    "a server that goes away mid-reply": (_goes_away, "engine_error"),
}


class Engine:
    """What the fake engine does now: ``fault`` (a key of :data:`FAULTS`) for the faulty model, or None."""

    def __init__(self) -> None:
        self.fault: str | None = None

    def script(self) -> Script:
        def answer(h: Handler, attempt: int) -> None:
            if h.body.get("model") == "steady":
                _words(h, "Hello", " there.")
            elif self.fault is not None:
                FAULTS[self.fault][0](h)
            else:
                _words(h, *(word + " " for word in FIXED_REPLY.split()[:-1]), FIXED_REPLY.split()[-1])

        return answer


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine()


@pytest.fixture(scope="module")
def server(engine: Engine) -> Iterator[FakeServer]:
    with serve(engine.script()) as running:
        yield running


def _catalogue(path: Path, server: FakeServer, *entries: tuple[str, str, str]) -> Path:
    """A catalogue of remote models (slug, name, the engine's model name) behind ``server``."""
    path.write_text("".join(
        f'[[model]]\nslug = "{slug}"\nname = "{name}"\nfamily = "remote"\n'
        f'source = "remote:{server.base_url}"\nremote_model = "{model}"\n\n'
        for slug, name, model in entries
    ))
    return path


@pytest.fixture(scope="module")
def catalogue(tmp_path_factory: pytest.TempPathFactory, server: FakeServer) -> Path:
    return _catalogue(tmp_path_factory.mktemp("faults") / "faults.toml", server,
                      (FAULTY, "Faulty Served", "faulty"), (STEADY, "Steady Served", "steady"))


@pytest.fixture
def faulty(engine: Engine, server: FakeServer) -> Iterator[Engine]:
    """The engine, behaving again after the test whatever happened in it; its record starts empty."""
    with server.recorded.lock:
        server.recorded.requests.clear()
        server.recorded.times.clear()
    yield engine
    engine.fault = None


def _requests_for(server: FakeServer, model: str) -> list[float]:
    """When each request for the engine's ``model`` arrived."""
    rec = server.recorded
    with rec.lock:
        return [t for body, t in zip(rec.requests, rec.times, strict=True) if body.get("model") == model]


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_fault_fails_one_side_clearly_and_the_model_recovers(
    fault: str, arena_env: Callable[..., str], catalogue: Path, faulty: Engine, server: FakeServer
) -> None:
    from webapp import context

    url = arena_env(catalogue=catalogue, remote_idle_timeout_s=IDLE_S, remote_reply_deadline_s=DEADLINE_S)
    faulty.fault = fault
    at = open_app(ARENA)
    _send(at, TURN_1)

    category = FAULTS[fault][1]
    assert _texts(at.error) == [HEADLINE], "one clear message, on the failed side only"
    assert any(t.startswith(f"{category} (error ") for t in _texts(at.text)), _texts(at.text)
    db = create_engine(url)
    battle = db_actions.get_battle(db, battle_id=at.session_state["battle_id:anonymous"])
    failed = next(s for s in "ab" if battle.sides[s].contestant.slug == FAULTY)
    other = "b" if failed == "a" else "a"
    stored = battle.sides[failed].messages[-1]
    assert (stored.kind, stored.finish_reason) == ("reply", "error")
    assert (stored.error or "").startswith(f"{category} (error "), stored.error
    untouched = battle.sides[other].messages[-1]
    assert (untouched.kind, untouched.finish_reason, untouched.error) == ("reply", "stop", None)
    assert untouched.content == "Hello there."
    assert at.button(key=f"anonymous:vote_{failed}").disabled

    if fault == "429 with Retry-After":  # every attempt waited as long as the engine asked
        arrivals = _requests_for(server, "faulty")
        gaps = [b - a for a, b in itertools.pairwise(arrivals)]
        assert gaps and min(gaps) >= RETRY_AFTER_S * 0.95, gaps

    # The line recovers: nothing is left in it, and once the engine behaves the next request succeeds.
    status = context.reader().pool.status()[FAULTY]
    assert (status.state, status.outstanding) == ("ready", 0)
    faulty.fault = None
    at.button(key=f"anonymous:retry_{failed}").click().run()
    assert not at.exception, [e.value for e in at.exception]
    battle = db_actions.get_battle(db, battle_id=at.session_state["battle_id:anonymous"])
    (standing,) = battle.sides[failed].replies
    assert (standing.finish_reason, standing.error, standing.content) == ("stop", None, FIXED_REPLY)
    assert any(m.superseded and m.finish_reason == "error" for m in battle.sides[failed].messages)
    assert not at.button(key=f"anonymous:vote_{failed}").disabled


# --- the circuit breaker ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def three_models(tmp_path_factory: pytest.TempPathFactory, server: FakeServer) -> Path:
    """The faulty model and two steady ones: the Arena can still pair while the faulty one rests."""
    return _catalogue(tmp_path_factory.mktemp("breaker") / "breaker.toml", server,
                      (FAULTY, "Faulty Served", "faulty"), (STEADY, "Steady Served", "steady"),
                      (SPARE, "Spare Served", "steady"))


def _chat_with_faulty(at: AppTest) -> None:
    at.selectbox(key="direct:model_0").set_value(FAULTY).run()
    at.chat_input(key="direct:input").set_value(TURN_1).run()
    assert not at.exception, [e.value for e in at.exception]


def _offered(page: str) -> list[str]:
    return list(open_app(page).selectbox(key="direct:model_0").options)


def test_the_breaker_rests_a_failing_model_then_gives_it_a_trial(
    arena_env: Callable[..., str], three_models: Path, faulty: Engine, data_dir: Path
) -> None:
    url = arena_env(catalogue=three_models, breaker_failures="2", breaker_cooldown_s="120",
                    remote_idle_timeout_s=IDLE_S, remote_reply_deadline_s=DEADLINE_S)
    warm_pool(three_models, data_dir, count=3)
    db = create_engine(url)
    faulty.fault = "a server that goes away mid-reply"
    chat = open_app("pages/chat.py")
    _chat_with_faulty(chat)
    assert _texts(chat.error) == [HEADLINE]
    assert "Faulty Served" in _offered("pages/chat.py"), "one failure is not a pattern"

    chat.button(key="direct:retry_a").click().run()  # the second failure in a row opens the breaker
    assert _texts(chat.error) == [HEADLINE]
    assert db_actions.open_breakers(db, now=dt.datetime.now(dt.UTC)) == {FAULTY}
    assert _offered("pages/chat.py") == ["Steady Served", "Spare Served"], "the pickers leave it out"
    arena = open_app(ARENA)
    for _ in range(3):  # drawn from three ready models, the faulty one would show up soon
        _send(arena, TURN_1)
        battle = db_actions.get_battle(db, battle_id=arena.session_state["battle_id:anonymous"])
        assert {side.contestant.slug for side in battle.sides.values()} == {STEADY, SPARE}
        arena.button(key="anonymous:skip").click().run()

    faulty.fault = None
    back_date(db, dt.timedelta(seconds=121))  # the cool-down passed: half-open, offered again
    assert db_actions.open_breakers(db, now=dt.datetime.now(dt.UTC)) == frozenset()
    trial = open_app("pages/chat.py")
    assert "Faulty Served" in list(trial.selectbox(key="direct:model_0").options)
    _chat_with_faulty(trial)  # the trial: a good reply closes the breaker
    assert not trial.error and db_actions.open_breakers(db, now=dt.datetime.now(dt.UTC)) == frozenset()

    faulty.fault = "a server that goes away mid-reply"
    again = open_app("pages/chat.py")
    _chat_with_faulty(again)
    assert _texts(again.error) == [HEADLINE]
    assert "Faulty Served" in _offered("pages/chat.py"), "closed: one failure starts a new streak"
