"""A real browser (Debian's chromium, headless, driven by Playwright) clicks through a full battle against
``streamlit run`` on a free port; the vote and the correction must be in the database afterwards. Then
the Leaderboard's three boards: Votes (and its style-controlled fit), Fixing (the visitor's verdict on
the correction) and the Automatic arena (one scripted run stored beside the battle).

Screenshots of the revealed battle, the Dataset page and each board go to ``var/test-artifacts/``
(git-ignored; CI keeps them).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.processes import CHROMIUM_ARGS
from db.export import export_bytes
from db.vote_filters import VoteFilters
from tests.e2e.serving import ARTIFACTS, REPO, app_env, chromium, send, serve, wait_for_models
from tests.webapp.conftest import ScriptedEngine

pytestmark = pytest.mark.browser


@contextlib.contextmanager
def _serve(tmp_path: Path, catalogue: Path) -> Iterator[tuple[str, str]]:
    """One app server on a fresh SQLite database, serving the models of ``catalogue``; yields the page's
    URL and the database URL."""
    db_url = f"sqlite:///{(tmp_path / 'arena.db').as_posix()}"
    with serve(tmp_path, app_env(tmp_path, catalogue, db_url)) as (url,):
        yield url, db_url


@pytest.fixture
def app_server(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The app on the tiny catalogue (real keras models with random weights)."""
    with _serve(tmp_path, REPO / "tests" / "data" / "tiny_catalogue.toml") as served:
        yield served


@pytest.fixture
def slow_engine_app(tmp_path: Path) -> Iterator[tuple[str, str, ScriptedEngine]]:
    """The app on two models behind a scripted OpenAI-compatible engine on loopback (the edge of the
    world), which the test makes stream slowly."""
    with ScriptedEngine.running() as engine:
        catalogue = engine.catalogue(tmp_path / "served.toml", ("north", "south"))
        with _serve(tmp_path, catalogue) as (url, db_url):
            yield url, db_url, engine


def _store_automatic_run(db_url: str) -> int:
    """One automatic-arena run of a scripted perfect model, stored as ``scenarios run`` stores it;
    returns the corrections it stored (the grader's, on ``auto`` battles)."""
    from db import boards as db_boards
    from db.engine import make_engine
    from scenarios.premade import load_premade
    from scenarios.runner import RunnerConfig, run_arena
    from scenarios.storage import ensure_contestant, store_run
    from tests.scenarios.scripted import CALENDAR, ScriptedModel, perfect

    engine = make_engine(db_url)
    before = db_boards.table_counts(engine)["corrections"]
    ensure_contestant(engine, slug="perfect", name="Perfect")
    run_arena(scenario=CALENDAR, models=[ScriptedModel("perfect", perfect)], cases=load_premade(),
              config=RunnerConfig(repeats=5, max_fix_attempts=2),
              sink=lambda record: store_run(engine, record))
    stored = db_boards.table_counts(engine)["corrections"] - before
    engine.dispose()
    return stored


def _board(page, name: str) -> None:  # noqa: ANN001
    """Choose a board (the selector at the top of the Leaderboard) and wait for its script run."""
    from playwright.sync_api import expect

    page.get_by_test_id("stRadio").get_by_text(name, exact=True).click()
    expect(page.get_by_test_id("stStatusWidget")).to_be_hidden()


def _check_boards(page, names: set[str]) -> None:  # noqa: ANN001
    """The three boards render from the database (texts shown only when each board has its data); the
    heatmaps name every model (``names``)."""
    from playwright.sync_api import expect

    for heatmap in page.locator(".vega-embed").all()[-2:]:  # win rate and battles: every model named
        for name in names:
            expect(heatmap).to_contain_text(name)
    page.get_by_text("Style control", exact=True).click()
    expect(page.get_by_role("heading", name="Ratings with 95% intervals (style-controlled)")).to_be_visible()
    expect(page.get_by_text("Δ rank: places gained", exact=False)).to_be_visible()
    expect(page.get_by_test_id("stDataFrame")).to_have_count(2)  # the table, re-ranked; coefficients folded
    page.wait_for_timeout(1000)
    page.screenshot(path=str(ARTIFACTS / "leaderboard_style.png"), full_page=True)

    _board(page, "🛠️ Fixing")
    expect(page.get_by_text("Computed over 1 judged correction at")).to_be_visible()
    expect(page.get_by_role("heading", name="Fix rate with 95% intervals")).to_be_visible()
    expect(page.get_by_role("heading", name="Turns to fix")).to_be_visible()
    expect(page.locator(".vega-embed")).to_have_count(2)  # fix rates and turns to fix
    page.wait_for_timeout(1000)
    expect(page.get_by_role("heading", name="Fix rate per mistake kind")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "leaderboard_fixing.png"), full_page=True)

    page.get_by_test_id("stRadio").get_by_text("Ratings: people and grader", exact=True).click()
    expect(page.get_by_test_id("stStatusWidget")).to_be_hidden()
    ratings = page.get_by_test_id("stDataFrame").first
    for column in ("People", "Automatic (replay, suites)", "Composite"):  # the three columns side by side
        expect(ratings).to_contain_text(column)
    expect(page.get_by_text("Agreement between people and the grader", exact=False)).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "leaderboard_ratings.png"), full_page=True)

    _board(page, "🤖 Automatic arena")
    expect(page.get_by_role("heading", name="Fixing pre-made mistakes")).to_be_visible()
    expect(page.get_by_role("cell", name="✓✓✓✓✓").first).to_be_visible()  # perfect's five first tries
    page.screenshot(path=str(ARTIFACTS / "leaderboard_auto.png"), full_page=True)


def test_full_battle_in_chromium(app_server: tuple[str, str]) -> None:
    from playwright.sync_api import expect, sync_playwright

    from db import actions as db_actions
    from db import boards as db_boards
    from db.engine import make_engine

    url, db_url = app_server
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        page.set_default_timeout(120_000)
        page.goto(url)
        wait_for_models(page)

        # The battle plays a generated dialogue: its first request is hinted, and one click sends it.
        page.get_by_role("button", name="Send this request").click()
        vote_a = page.get_by_role("button", name="👈 A is better")
        expect(vote_a).to_be_enabled(timeout=120_000)
        dialogue = _open_battle_dialogue(db_url)
        first_request = dialogue["turns"][0]["user"]
        assert "v=" not in page.url, "no identity in a URL that could be shared"
        cookies = {c["name"]: c for c in page.context.cookies()}
        assert "fixit_visitor" in cookies and "." in cookies["fixit_visitor"]["value"]  # id.HMAC
        assert cookies["fixit_visitor"]["sameSite"] == "Strict"

        page.reload()  # a reload resumes the open battle
        wait_for_models(page)
        expect(page.get_by_text(first_request, exact=True).first).to_be_visible()
        expect(page.get_by_role("button", name="👈 A is better")).to_be_enabled()

        page.get_by_test_id("stRadio").get_by_text("Model A", exact=True).click()  # route to A only
        page.get_by_test_id("stCheckbox").get_by_text("This message corrects the last reply").click()
        send(page, "The current year is 2024.")
        fixed = page.get_by_role("button", name="Fixed ✓")
        expect(fixed).to_be_visible(timeout=120_000)
        fixed.click()
        expect(page.get_by_text("Recorded: fixed ✓")).to_be_visible()

        page.get_by_role("button", name="👈 A is better").click()
        expect(page.get_by_text("Your vote: Model A")).to_be_visible()
        expect(page.get_by_role("button", name="New battle")).to_be_visible()
        expect(page.get_by_text("Badges: ✓ the expected call", exact=False)).to_be_visible()  # the legend
        expect(page.get_by_text("Grader: ", exact=False).first).to_be_visible()  # a badge says why
        page.screenshot(path=str(ARTIFACTS / "revealed_battle.png"), full_page=True)
        revealed = page.get_by_role("heading", level=3).all_inner_texts()
        page.reload()  # the reveal stays until New battle is pressed (no message box: the battle is closed)
        expect(page.get_by_text("Your vote: Model A")).to_be_visible(timeout=120_000)
        assert page.get_by_role("heading", level=3).all_inner_texts() == revealed

        page.get_by_role("link", name="Dataset").click()  # published at once here (delay 0)
        expect(page.get_by_text("battle recorded; 1 published", exact=False)).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "dataset.png"), full_page=True)

        automatic_corrections = _store_automatic_run(db_url)
        page.get_by_role("link", name="Leaderboard").click()
        expect(page.get_by_text("Computed over 1 vote at")).to_be_visible()
        expect(page.get_by_test_id("stDataFrame")).to_be_visible()
        expect(page.locator(".vega-embed")).to_have_count(3)  # ratings, win-rate and battle-count charts
        expect(page.get_by_test_id("stStatusWidget")).to_be_hidden()  # the script run has finished
        page.wait_for_timeout(1500)  # let the canvases paint
        page.screenshot(path=str(ARTIFACTS / "leaderboard.png"), full_page=True)
        _check_boards(page, _battle_names(db_url))
        browser.close()

    engine = make_engine(db_url)
    counts = db_boards.table_counts(engine)
    assert counts["votes"] == 1 and counts["corrections"] == 1 + automatic_corrections
    assert db_boards.pairwise_counts(engine).total == 1
    contestants = {c.display_name for c in db_actions.list_contestants(engine)}
    assert any(name in " ".join(revealed) for name in contestants), revealed
    visitor_battles = db_boards.fix_counts(engine)
    assert int(visitor_battles.successes.sum()) == 1, "the correction was judged fixed by the visitor"
    exported = export_bytes(engine, fmt="jsonl", salt="s", filters=VoteFilters(modes=("anonymous",)))
    (record,) = [json.loads(line) for line in exported.data.decode().splitlines()]
    assert record["dialogue_id"] == dialogue["id"], "the battle's dialogue is in the export"


def test_reload_mid_stream_keeps_both_replies(slow_engine_app: tuple[str, str, ScriptedEngine]) -> None:
    """A visitor who reloads while both sides are still streaming loses nothing: the generations go on
    (their ledger rows stay held), the reloaded page follows them again with the message box disabled,
    and both replies end whole, stored once, with the vote open."""
    from playwright.sync_api import expect, sync_playwright

    url, db_url, engine = slow_engine_app
    tags = {"north": "Ember", "south": "Frost"}  # not the models' names, which would unmask the battle
    replies = {slug: " ".join([f"{tag}-start", *(f"{tag.lower()}{i}" for i in range(24)), f"{tag}-end."])
               for slug, tag in tags.items()}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with engine.scripted(dict(replies), word_delay_s=0.3), sync_playwright() as playwright:  # ~8 s a reply
        browser = playwright.chromium.launch(executable_path=chromium(), headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        page.set_default_timeout(60_000)
        page.goto(url)
        wait_for_models(page, timeout_s=120)
        page.get_by_role("button", name="Send this request").click()
        for tag in tags.values():  # both sides have begun to stream
            expect(page.get_by_text(f"{tag}-start", exact=False).first).to_be_visible(timeout=30_000)
        assert _replies_and_in_flight(db_url) == (0, 2), "both generations run, nothing stored yet"

        page.reload()
        page.get_by_test_id("stChatInputTextArea").wait_for(state="attached")
        assert _replies_and_in_flight(db_url)[1] == 2, "a reload stops the following, not the generation"
        for text in replies.values():
            expect(page.get_by_text(text, exact=False).first).to_be_visible(timeout=60_000)
        expect(page.get_by_role("button", name="👈 A is better")).to_be_enabled(timeout=30_000)
        expect(page.get_by_text("no longer anonymous", exact=False)).to_have_count(0)
        page.screenshot(path=str(ARTIFACTS / "reload_mid_stream.png"), full_page=True)
        browser.close()
    assert _replies_and_in_flight(db_url) == (2, 0), "each reply stored once; the ledger rows freed"


def _replies_and_in_flight(db_url: str) -> tuple[int, int]:
    """Stored replies, and generations neither finished nor past their lease, in the whole database."""
    from sqlalchemy import func, select

    from db.engine import make_engine
    from db.models import Generation, Message

    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            stored = conn.execute(select(func.count()).where(Message.kind == "reply")).scalar_one()
            running = conn.execute(select(func.count()).where(Generation.finished_at.is_(None))).scalar_one()
            return int(stored), int(running)
    finally:
        engine.dispose()


def _battle_names(db_url: str) -> set[str]:
    """The two models of the battle the browser voted on (the votes board's heatmaps show them)."""
    from sqlalchemy import select

    from db.engine import make_engine
    from db.models import Battle, Contestant, Conversation

    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            newest = select(Battle.id).where(Battle.mode == "anonymous").order_by(Battle.created_at.desc())
            battle = conn.execute(newest.limit(1)).scalar()
            names = (select(Contestant.display_name)
                     .join(Conversation, Conversation.contestant_id == Contestant.id)
                     .where(Conversation.battle_id == battle))
            return set(conn.execute(names).scalars())
    finally:
        engine.dispose()


def _open_battle_dialogue(db_url: str) -> dict[str, Any]:
    """The generated dialogue of the newest battle (the one the browser is playing)."""
    from sqlalchemy import select

    from db.engine import make_engine
    from db.models import Battle

    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            newest = select(Battle.dialogue).order_by(Battle.created_at.desc()).limit(1)
            dialogue = conn.execute(newest).scalar()
    finally:
        engine.dispose()
    assert isinstance(dialogue, dict) and dialogue["id"].startswith("calendar-"), dialogue
    return dialogue
