"""Public data never leaks a live battle, and a public download is built once per filter set.

Probes of the old app: during an open anonymous battle the Dataset page's export listed it with both
contestants (a visitor learnt A and B before voting); every Download click rebuilt the whole export.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from tests.webapp.conftest import open_app
from tests.webapp.test_arena_app import TURN_1, _send, _texts


def _ctx():  # noqa: ANN202
    from webapp import context

    return context.reader()


def _public_jsonl(scenario: str | None = None) -> bytes:
    from webapp import gateway_data

    ctx = _ctx()
    filters = gateway_data.public_filters(
        ctx.settings, scenario=scenario, since=None, until=None, corrections_only=False
    )
    return gateway_data.dataset_bytes(ctx, filters, fmt="jsonl", view="dialogues")


def test_an_open_battle_is_not_on_the_dataset_page(arena_env: Callable[..., str]) -> None:
    arena_env(public_export_delay_hours="0")
    arena = open_app("pages/arena.py")
    _send(arena, TURN_1)
    battle_id = arena.session_state["battle_id:anonymous"]
    page = open_app("pages/dataset.py")
    assert any("0 battles match" in c for c in _texts(page.caption))
    assert battle_id not in _public_jsonl().decode()
    arena.button(key="anonymous:vote_a").click().run()
    page = open_app("pages/dataset.py")
    assert any("1 battles match" in c for c in _texts(page.caption)), "closed: public (no delay set)"


def test_a_recently_closed_battle_waits_for_the_delay(arena_env: Callable[..., str]) -> None:
    arena_env(public_export_delay_hours="1")
    arena = open_app("pages/arena.py")
    _send(arena, TURN_1)
    arena.button(key="anonymous:vote_a").click().run()
    page = open_app("pages/dataset.py")
    assert any("0 battles match" in c for c in _texts(page.caption))
    assert any("1 hours after it ended" in c for c in _texts(page.caption))
    assert arena.session_state["battle_id:anonymous"] not in _public_jsonl().decode()


def test_a_public_download_is_built_once_per_filter_set(arena_env: Callable[..., str]) -> None:
    from webapp import gateway_data

    arena_env(public_export_delay_hours="0")
    before = gateway_data.BUILDS["jsonl/dialogues"]
    results: list[bytes] = []
    threads = [threading.Thread(target=lambda: results.append(_public_jsonl("calendar"))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results.append(_public_jsonl("calendar"))
    assert len(set(results)) == 1 and len(results) == 5
    assert gateway_data.BUILDS["jsonl/dialogues"] == before + 1, "five clicks, one build"
    _public_jsonl("free-chat")
    assert gateway_data.BUILDS["jsonl/dialogues"] == before + 2, "another filter set is its own build"


def test_the_mode_filter_on_the_dataset_page(arena_env: Callable[..., str]) -> None:
    """The page's Modes choice is the export's ``--mode``: an anonymous vote is gone with "direct" only."""
    arena_env(public_export_delay_hours="0")
    arena = open_app("pages/arena.py")
    _send(arena, TURN_1)
    arena.button(key="anonymous:vote_a").click().run()
    page = open_app("pages/dataset.py")
    assert any("1 battles match" in c for c in _texts(page.caption))
    page.multiselect(key="ds_modes").set_value(["direct"]).run()
    assert any("0 battles match" in c for c in _texts(page.caption))
    page.multiselect(key="ds_modes").set_value(["anonymous", "direct"]).run()
    assert any("1 battles match" in c for c in _texts(page.caption))
