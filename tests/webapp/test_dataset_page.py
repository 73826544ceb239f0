"""The Dataset page says what is published and when, and offers no empty download (issue 43).

Probe of the old page: "7 battles" in the counts, every download empty, and the 24-hour delay only a grey
caption; nothing said when the first battle would appear.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from tests.webapp.conftest import open_app

DELAY_H = 24
DAY = dt.datetime(2026, 5, 2, 10, 0, tzinfo=dt.UTC)


def _ctx() -> Any:
    from webapp import context

    return context.reader()


def _battle(ctx: Any, *, vote: bool = True) -> str:
    """An anonymous calendar battle between m1 and m2 with one turn a side; voted unless ``vote`` is off."""
    from db import actions as db_actions

    battle = db_actions.open_battle(ctx.engine, mode="anonymous", scenario="calendar", contestant_a="m1",
                                    contestant_b="m2")
    for side in ("a", "b"):
        db_actions.append_message(ctx.engine, battle_id=battle.id, side=side, kind="request", content="Hi")
        db_actions.append_message(ctx.engine, battle_id=battle.id, side=side, kind="reply", content="Hello")
    if vote:
        db_actions.record_vote(ctx.engine, battle_id=battle.id, choice="a")
    return battle.id


def _contestants(ctx: Any) -> None:
    from db import actions as db_actions

    for slug in ("m1", "m2"):
        db_actions.upsert_contestant(ctx.engine, slug=slug, display_name=slug.upper(), family="test")


def _closed_at(ctx: Any, battle_id: str) -> dt.datetime:
    from db import actions as db_actions

    closed = db_actions.get_battle(ctx.engine, battle_id=battle_id).closed_at
    assert closed is not None
    return closed


def _close_earlier(ctx: Any, battle_id: str, delta: dt.timedelta) -> None:
    """Move one battle's closing time back by ``delta`` (the page's cut-off is the real clock)."""
    from db.engine import write_session
    from db.models import Battle

    with write_session(ctx.engine) as session:
        battle = session.get(Battle, battle_id)
        assert battle is not None and battle.closed_at is not None
        battle.closed_at -= delta
        battle.updated_at -= delta


def _message(at: AppTest) -> str:
    (info,) = at.info
    return str(info.value)


def _downloads(at: AppTest) -> list[Any]:
    buttons = list(at.get("download_button"))
    assert len(buttons) == 8
    return buttons


def _hhmm_after_delay(closed: dt.datetime, hours: float) -> str:
    """The minute the page must name: the first whole minute after the close, plus the delay."""
    return f"{closed + dt.timedelta(minutes=1, hours=hours):%H:%M} UTC"


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_the_page_names_recorded_published_and_the_next_one(
    arena_env: Callable[..., str], backend: str, request: pytest.FixtureRequest
) -> None:
    """Four battles: one flagged (closed two hours ago), one open, two closed now. None is published;
    the next one is the earliest closed, unflagged battle: not the flagged one, though it closed first."""
    from webapp import gateway_data

    settings = {"public_export_delay_hours": str(DELAY_H)}
    if backend == "postgres":
        settings["database_url"] = request.getfixturevalue("pg_schema_url")
    arena_env(**settings)
    ctx = _ctx()
    _contestants(ctx)
    flagged = _battle(ctx)
    gateway_data.flag(ctx, battle_id=flagged, reason="abuse", undo=False, admin_session="admin-1")
    _close_earlier(ctx, flagged, dt.timedelta(hours=2))
    _battle(ctx, vote=False)
    first, second = _battle(ctx), _battle(ctx)
    _close_earlier(ctx, second, dt.timedelta(minutes=30))  # the earlier close of the two: the next one
    waiting = _closed_at(ctx, second)

    page = open_app("pages/dataset.py")
    message = _message(page)
    assert message.startswith(
        "4 battles recorded; 0 published yet: a battle is published 24 h after it closes; the next one at "
        f"{_hhmm_after_delay(waiting, DELAY_H)}"), message
    assert all(b.proto.disabled for b in _downloads(page)), "every download would be empty"
    assert all("next one is published at" in b.proto.help for b in _downloads(page))

    past_delay = dt.timedelta(hours=DELAY_H, minutes=2)  # the cut-off is rounded down to the minute
    _close_earlier(ctx, second, past_delay)  # now past the delay: published
    page = open_app("pages/dataset.py")
    assert _message(page).startswith(
        "4 battles recorded; 1 published yet: a battle is published 24 h after it closes; the next one at "
        f"{_hhmm_after_delay(_closed_at(ctx, first), DELAY_H)}"), _message(page)
    assert not any(b.proto.disabled for b in _downloads(page))
    assert [m.value for m in page.metric][0] == "1"

    _close_earlier(ctx, first, past_delay)
    page = open_app("pages/dataset.py")
    assert _message(page) == ("4 battles recorded; 2 published: a battle is published 24 h after it "
                              "closes; no closed battle is waiting."), "open and flagged never wait"

    page.selectbox(key="ds_scenario").set_value("free-chat").run()
    assert _message(page) == ("0 battles recorded; 0 published: a battle is published 24 h after it "
                              "closes; no closed battle is waiting."), "counts follow the filters"
    assert all(b.proto.disabled for b in _downloads(page))
    assert all(b.proto.help.endswith("no published battle matches these filters.") for b in _downloads(page))


def test_without_a_delay_closed_battles_are_published_at_once(arena_env: Callable[..., str]) -> None:
    arena_env(public_export_delay_hours="0")
    ctx = _ctx()
    _contestants(ctx)
    _battle(ctx, vote=False)
    page = open_app("pages/dataset.py")
    assert _message(page) == "1 battle recorded; 0 published: closed battles are published at once."
    assert all(b.proto.disabled for b in _downloads(page)), "only an open battle: nothing to download"
    _battle(ctx)
    page = open_app("pages/dataset.py")
    assert _message(page) == "2 battles recorded; 1 published: closed battles are published at once."
    assert not any(b.proto.disabled for b in _downloads(page))
    card = "\n".join(str(m.value) for m in page.markdown)
    assert "## Columns" in card and "## Licence" in card
    assert "## Files" not in card and "## Counts" not in card, "the page's card lists no file and no count"


# --- the sentence and the minute it names -----------------------------------------------------------------


def test_the_named_minute_is_the_first_at_which_the_cut_off_publishes_the_battle() -> None:
    from webapp.gateway_data import published_at
    from webapp.leaderboard_data import publication_cutoff

    closed = dt.datetime(2026, 5, 2, 14, 4, 30, 250_000, tzinfo=dt.UTC)
    assert published_at(closed, 24) == dt.datetime(2026, 5, 3, 14, 5, tzinfo=dt.UTC)
    assert published_at(closed.replace(second=0, microsecond=0), 1) == dt.datetime(2026, 5, 2, 15, 5,
                                                                                    tzinfo=dt.UTC)
    assert published_at(closed, 0.01) == dt.datetime(2026, 5, 2, 14, 6, tzinfo=dt.UTC), "rounded up"
    for delay in (0.5, 1, 24):
        for seconds in (0, 1, 29, 59):
            at = published_at(closed.replace(second=seconds, microsecond=0), delay)
            then = closed.replace(second=seconds, microsecond=0)
            cutoff = publication_cutoff(delay, now=at)
            assert cutoff is not None and then < cutoff, "published at the named minute"
            before = publication_cutoff(delay, now=at - dt.timedelta(microseconds=1))
            assert before is not None and not then < before, "and not a moment before"


def _pub(recorded: int, published: int, delay: float, next_at: dt.datetime | None) -> Any:
    from webapp.gateway_data import Publication

    return Publication(recorded=recorded, published=published, delay_hours=delay, next_at=next_at)


def test_the_publication_sentence() -> None:
    from webapp.dataset_view import publication_message

    today = DAY.replace(hour=14, minute=5)
    assert publication_message(_pub(7, 0, 24, today), now=DAY) == (
        "7 battles recorded; 0 published yet: a battle is published 24 h after it closes; the next one at "
        "14:05 UTC.")
    assert publication_message(_pub(7, 3, 24, today + dt.timedelta(days=1)), now=DAY).endswith(
        "3 published yet: a battle is published 24 h after it closes; the next one at 14:05 UTC tomorrow.")
    assert publication_message(_pub(1, 0, 0.5, today + dt.timedelta(days=3)), now=DAY) == (
        "1 battle recorded; 0 published yet: a battle is published 0.5 h after it closes; the next one at "
        "14:05 UTC on 2026-05-05.")
    assert publication_message(_pub(1_200, 1_000, 24, None), now=DAY) == (
        "1,200 battles recorded; 1,000 published: a battle is published 24 h after it closes; no closed "
        "battle is waiting.")
    assert publication_message(_pub(2, 1, 0, None), now=DAY) == (
        "2 battles recorded; 1 published: closed battles are published at once.")
