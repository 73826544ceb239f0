"""Two real app servers on one PostgreSQL database, and one visitor in a real browser on both at once.

Both ``streamlit run`` processes share the settings (so the signed visitor cookie means the same visitor
to each) and a fresh schema on the test server; a scripted engine on loopback serves their two models.
One browser context is one visitor: its cookie is sent to both ports (cookies do not depend on the
port), and its pages play the visitor's tabs on server 1 and server 2. Every limit lives in the
database, so each must hold across the two processes:

- one turn in flight per visitor: a message sent on server 2 while server 1 streams is refused;
- a battle opened on one server resumes, with its messages, on a reload on the other;
- one vote per battle, and the daily vote cap, when the visitor votes on both;
- the battles-per-hour limit counts the battles opened on either server;

and at the end the database holds exactly what the visitor did: no battle, message or vote lost or
written twice.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import func, select, text

from bench.processes import CHROMIUM_ARGS
from tests.e2e.serving import ARTIFACTS, app_env, chromium, send, serve, wait_for_models
from tests.webapp.conftest import ScriptedEngine
from webapp.limits import BUSY

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.browser, pytest.mark.postgres]

BATTLES_PER_HOUR = 2
VOTES_PER_DAY = 1
TAGS = {"north": "Ember", "south": "Frost"}  # not the models' names, which would unmask the battle


@dataclass(frozen=True)
class Servers:
    urls: list[str]
    db_url: str
    engine: ScriptedEngine


@pytest.fixture
def servers(tmp_path: Path, pg_schema_url: str) -> Iterator[Servers]:
    """Two app servers on one fresh PostgreSQL schema, serving two scripted remote models, with low
    per-visitor limits on battles per hour and votes per day."""
    with ScriptedEngine.running() as engine:
        catalogue = engine.catalogue(tmp_path / "served.toml", tuple(TAGS))
        env = app_env(tmp_path, catalogue, pg_schema_url,
                      battles_per_visitor_per_hour=str(BATTLES_PER_HOUR),
                      votes_per_visitor_per_day=str(VOTES_PER_DAY))
        with serve(tmp_path, env, count=2) as urls:
            yield Servers(urls, pg_schema_url, engine)


def _replies(label: str, words: int) -> dict[str, str | None]:
    """Each model's scripted reply: ``<Tag>-<label> <tag>0 … <Tag>-end.`` (``words`` words between)."""
    return {slug: " ".join([f"{tag}-{label}", *(f"{tag.lower()}{i}" for i in range(words)), f"{tag}-end."])
            for slug, tag in TAGS.items()}


def test_one_visitor_on_two_servers(servers: Servers) -> None:
    from playwright.sync_api import expect, sync_playwright

    first_url, second_url = servers.urls
    engine = servers.engine
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    slow = _replies("one", words=24)  # at 2 s a word: nearly a minute, unless the test speeds it up
    with engine.scripted(dict(slow), word_delay_s=2.0), sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), headless=True, args=CHROMIUM_ARGS)
        visitor = browser.new_context(viewport={"width": 1400, "height": 1100})
        visitor.set_default_timeout(60_000)
        on_first = visitor.new_page()
        # Another visitor opens server 2 while ours opens server 1: both processes meet the fresh
        # database at once (its schema, the catalogue's contestants).
        other = browser.new_page()
        on_first.goto(first_url)
        other.goto(second_url)
        wait_for_models(on_first, timeout_s=120)
        wait_for_models(other, timeout_s=120)
        other.close()
        assert "fixit_visitor" in {c["name"] for c in visitor.cookies()}, "server 1 gave the visitor a cookie"

        # Server 1 streams the battle's first turn, slowly.
        on_first.get_by_role("button", name="Send this request").click()
        for tag in TAGS.values():
            expect(on_first.get_by_text(f"{tag}-one", exact=False).first).to_be_visible(timeout=30_000)
        request = _only_request(servers.db_url)

        # The same visitor on server 2: the battle resumes there, and a second turn is refused.
        on_second = visitor.new_page()
        on_second.goto(second_url)
        wait_for_models(on_second, timeout_s=120)
        expect(on_second.get_by_text(request, exact=True).first).to_be_visible()
        send(on_second, "Use the default duration.")
        expect(on_second.get_by_text(BUSY)).to_be_visible()
        assert _generations(servers.db_url) == (2, 2), "only the first turn's two sides ever started"

        engine.word_delay_s = 0.0  # let the first turn finish
        expect(on_first.get_by_role("button", name="👈 A is better")).to_be_enabled(timeout=60_000)
        on_second.reload()  # now it shows the whole battle, read from the database
        wait_for_models(on_second, timeout_s=120)
        for reply in slow.values():
            expect(on_second.get_by_text(reply or "", exact=False).first).to_be_visible()

        # The next turn sent on both servers at the same moment: the early checks both pass (nothing in
        # flight), the ledger's own check lets exactly one through, and the other writes nothing.
        race = _replies("race", words=3)
        engine.replies.update(race)
        with _visitor_held(servers.db_url) as keys:
            for page in (on_first, on_second):  # the dialogue's next turn (a request or a correction)
                page.get_by_role("button", name=re.compile("^Send this ")).click()
            _wait_for_lock_waiters(servers.db_url, keys=keys, count=2)
        busy = _busy_pages((on_first, on_second))
        assert len(busy) == 1, "exactly one server generates the raced turn"
        on_first.reload()  # both pages now show the battle as the database holds it
        on_second.reload()
        for page in (on_first, on_second):
            wait_for_models(page, timeout_s=120)
            for reply in race.values():
                expect(page.get_by_text(reply or "", exact=True)).to_have_count(1)

        # One vote per battle: server 2 takes it, server 1's page (still offering the vote) is refused.
        on_second.get_by_role("button", name="👉 B is better").click()
        expect(on_second.get_by_text("Your vote: Model B")).to_be_visible()
        on_first.get_by_role("button", name="👈 A is better").click()
        expect(on_first.get_by_text("This battle already has a vote.")).to_be_visible()
        expect(on_first.get_by_text("Your vote: Model B")).to_be_visible()

        # A second battle, opened on server 2, resumes on server 1, where the daily vote cap holds.
        second = _replies("two", words=3)
        engine.replies.update(second)
        on_second.get_by_role("button", name="New battle").click()
        on_second.get_by_role("button", name="Send this request").click()
        for reply in second.values():
            expect(on_second.get_by_text(reply or "", exact=True).first).to_be_visible()
        on_first.reload()
        wait_for_models(on_first, timeout_s=120)
        for reply in second.values():
            expect(on_first.get_by_text(reply or "", exact=True).first).to_be_visible()
        capped = f"You have cast {VOTES_PER_DAY} votes today"
        expect(on_first.get_by_text(capped, exact=False)).to_be_visible()
        expect(on_first.get_by_role("button", name="👈 A is better")).to_be_disabled()

        # The battles-per-hour limit counts both servers' battles: a third is refused on server 1.
        on_first.get_by_role("button", name="Skip this battle").click()
        on_first.get_by_role("button", name="Send this request").click()
        expect(on_first.get_by_text(f"(the limit is {BATTLES_PER_HOUR})", exact=False)).to_be_visible()
        on_first.screenshot(path=str(ARTIFACTS / "two_servers.png"), full_page=True)
        browser.close()

    _check_rows(servers.db_url, replies=[*slow.values(), *race.values(), *second.values()])


@contextlib.contextmanager
def _visitor_held(db_url: str) -> Iterator[set[int]]:
    """Hold the ledger's advisory lock on the (only) visitor with battles: every process starting this
    visitor's generations waits inside :func:`db.actions.start_generations` until the block ends. Yields
    the ledger's lock keys of this visitor and of its address (a start takes both)."""
    from db.actions.generations import _lock_key
    from db.engine import make_engine
    from db.models import Battle, Generation

    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            visitor = conn.scalar(select(Battle.visitor_id).limit(1))
            address = conn.scalar(select(Generation.address_hash).limit(1))
            key = _lock_key(f"generation-visitor:{visitor}")
            conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": key})
            try:
                yield {key, _lock_key(f"generation-address:{address}")}
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
                conn.commit()
    finally:
        engine.dispose()


def _wait_for_lock_waiters(db_url: str, *, keys: set[int], count: int, timeout_s: float = 60.0) -> None:
    """Until ``count`` sessions wait for one of the advisory locks ``keys`` in this database (both servers
    are inside the ledger's start; other tests on the same server take advisory locks of their own)."""
    from db.engine import make_engine

    query = text("SELECT classid, objid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                 "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")
    engine = make_engine(db_url)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            with engine.connect() as conn:
                waiting = sum(_signed(high << 32 | low) in keys for high, low in conn.execute(query))
            if waiting == count:
                return
            assert time.monotonic() < deadline, f"{waiting} sessions wait for the ledger, not {count}"
            time.sleep(0.2)
    finally:
        engine.dispose()


def _signed(key: int) -> int:
    """A bigint advisory-lock key from ``pg_locks``' two unsigned 32-bit halves."""
    return key - 2**64 if key >= 2**63 else key


def _busy_pages(pages: tuple[Page, ...], timeout_s: float = 60.0) -> list[Page]:
    """The pages that were told the visitor is busy, once one of them has been (the other streams)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        busy = [page for page in pages if page.get_by_text(BUSY).count()]
        if busy:
            return busy
        time.sleep(0.2)
    raise AssertionError("neither server refused the raced turn")


def _only_request(db_url: str) -> str:
    """The text of the one request stored so far (sent to both sides: one message per side)."""
    from db.engine import make_engine
    from db.models import Message

    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            texts = list(conn.scalars(select(Message.content).where(Message.kind == "request")))
    finally:
        engine.dispose()
    assert len(texts) == 2 and texts[0] == texts[1], texts
    return str(texts[0])


def _generations(db_url: str) -> tuple[int, int]:
    """Generations ever started, and those neither finished nor past their lease."""
    from db.engine import make_engine
    from db.models import Generation

    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            started = conn.scalar(select(func.count()).select_from(Generation))
            running = conn.scalar(select(func.count()).where(Generation.finished_at.is_(None)))
            return int(started or 0), int(running or 0)
    finally:
        engine.dispose()


def _check_rows(db_url: str, *, replies: list[str | None]) -> None:
    """The database holds what the visitor did, once: two battles of one visitor (one voted on server 2,
    one skipped on server 1), one vote, each turn's request and whole reply per side, and every
    generation finished."""
    from db import boards as db_boards
    from db.engine import make_engine
    from db.models import Battle, Message, Vote

    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            battles = conn.execute(select(Battle.visitor_id, Battle.status).order_by(Battle.created_at)).all()
            votes = conn.execute(select(Vote.battle_id, Vote.choice)).all()
            stored = sorted(conn.scalars(select(Message.content).where(Message.kind == "reply")))
            voted = conn.scalar(select(Battle.id).where(Battle.status == "voted"))
        assert [status for _, status in battles] == ["voted", "abandoned"], battles
        assert len({visitor for visitor, _ in battles}) == 1, "one cookie, one visitor, on both servers"
        assert votes == [(voted, "b")], votes
        counts = db_boards.message_counts(engine)
        assert counts["replies"] == 6 and counts["duplicated"] == 0, counts
        assert stored == sorted(reply or "" for reply in replies), "each reply stored whole, once"
        tables = db_boards.table_counts(engine)
        assert tables["messages"] == 6 + 6, "three turns to both sides, each stored once, and their replies"
        assert tables["visitors"] == 2  # ours, and the one that opened server 2
    finally:
        engine.dispose()
    assert _generations(db_url) == (6, 0)
