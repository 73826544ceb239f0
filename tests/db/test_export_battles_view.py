"""The export's ``battles`` view, end to end: votes stored through ``db.actions`` in SQLite and
PostgreSQL, ``python -m db export --view battles`` writes the file, ``python -m ranking fit --battles``
reads it unchanged, and the ratings (plain and style-controlled) equal the ones fitted from the
database directly, as the Votes board fits them."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from sqlalchemy import Engine

from commands.db import main as db_main
from commands.ranking import main as ranking_main
from db import actions
from db.boards import STYLE_COLUMNS, pairwise_counts, vote_style_features
from ranking import fit_style_bt, leaderboard
from settings import get_settings

MODELS = ("m1", "m2", "m3", "m4")
REPLIES = (
    "calendar.add(day=3)",
    "Sorry, here it is:\ncalendar.add(day=3, hour=12)",
    "Sure! I will add it for you: calendar.add(day=3)",
    "calendar.add(day=3, title='Lunch with Ana', minutes=30)\n\nLet me know if you need anything else.",
)


@pytest.fixture
def voted(engine: Engine, db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """60 voted battles among four models (seeded), with replies of different styles, plus the votes the
    board does not count (revealed before the vote, flagged), an open battle and a named battle."""
    monkeypatch.setenv("ARENA_HASH_SALT", "battles-view-salt")
    get_settings.cache_clear()
    for slug in MODELS:
        actions.upsert_contestant(engine, slug=slug, display_name=slug.upper())
    visitor = actions.get_or_create_visitor(engine, anon_id="researcher")
    rng = random.Random(7)
    strength = {"m1": 0.9, "m2": 0.6, "m3": 0.4, "m4": 0.2}
    pair: list[str] = ["", ""]  # the last battle's models

    def battle(mode: str = "anonymous") -> str:
        a, b = pair[:] = rng.sample(MODELS, 2)
        view = actions.open_battle(engine, mode=mode, scenario="calendar", contestant_a=a, contestant_b=b,
                                   visitor_id=visitor.id)
        for side in ("a", "b"):
            actions.append_message(engine, battle_id=view.id, side=side, kind="request",
                                   content="Lunch on 3rd")
            for _ in range(rng.randint(1, 2)):
                reply = actions.append_message(engine, battle_id=view.id, side=side, kind="reply",
                                               content=rng.choice(REPLIES))
                if rng.random() < 0.5:
                    actions.set_grader_label(engine, message_id=reply.id, label="partial",
                                             mistakes=["chatty"] if rng.random() < 0.5 else ["no_title"])
        return view.id

    def choice() -> str:
        a, b = pair
        roll = rng.random()
        if roll < 0.1:
            return "tie"
        if roll < 0.15:
            return "both_bad"
        return "a" if rng.random() < strength[a] / (strength[a] + strength[b]) else "b"

    for _ in range(60):
        bid = battle()
        actions.record_vote(engine, battle_id=bid, choice=choice(), visitor_id=visitor.id)
    revealed = battle()
    actions.mark_revealed(engine, battle_id=revealed)
    actions.record_vote(engine, battle_id=revealed, choice="a", visitor_id=visitor.id, accept_revealed=True)
    flagged = battle()
    actions.record_vote(engine, battle_id=flagged, choice="b", visitor_id=visitor.id)
    actions.flag_battle(engine, battle_id=flagged, reason="spam")
    named = battle("named")
    actions.record_vote(engine, battle_id=named, choice="a", visitor_id=visitor.id)
    yield {"url": db_url, "revealed": revealed, "flagged": flagged, "named": named, "open": battle()}
    get_settings.cache_clear()


def _export(capsys: pytest.CaptureFixture[str], url: str, out: Path, *extra: str) -> dict[str, object]:
    code = db_main(["export", "--url", url, "--format", out.suffix[1:], "--view", "battles",
                    "--out", str(out), "--no-progress", "--chunk-size", "7", *extra])
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    summary: dict[str, object] = json.loads(stdout)
    return summary


def _fit(capsys: pytest.CaptureFixture[str], path: Path, *extra: str) -> dict[str, dict[str, float]]:
    code = ranking_main(["fit", "--battles", str(path), "--bootstrap", "0", "--json", *extra])
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    return {row["model"]: row for row in json.loads(stdout)}


def test_ranking_fit_reads_the_export_and_agrees_with_the_database(
    voted: dict[str, str], engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = voted["url"]
    summary = _export(capsys, url, tmp_path / "all" / "battles.parquet")
    table = pq.read_table(tmp_path / "all" / "battles.parquet")
    assert table.column_names[:6] == ["model_a", "model_b", "winner", "mode", "scenario", "tstamp"]
    assert {f"{c}_{s}" for c in STYLE_COLUMNS for s in "ab"} <= set(table.column_names)
    ids = table.column("battle_id").to_pylist()
    assert len(ids) == 61 and summary["counts"] == {  # 60 anonymous + 1 named; uncounted votes are not rows
        "battles": 61, "conversations": 0, "messages": 0, "corrections": 0, "votes": 61, "records": 61}
    assert voted["named"] in ids and not {voted["revealed"], voted["flagged"], voted["open"]} & set(ids)
    assert set(table.column("winner").to_pylist()) <= {"a", "b", "tie", "both_bad"}

    # The anonymous votes, as the Votes board counts them by default.
    _export(capsys, url, tmp_path / "anon" / "battles.parquet", "--mode", "anonymous")
    _export(capsys, url, tmp_path / "anon-csv" / "battles.csv", "--mode", "anonymous")
    from_file = _fit(capsys, tmp_path / "anon" / "battles.parquet", "--interval", "sandwich")
    assert _fit(capsys, tmp_path / "anon-csv" / "battles.csv", "--interval", "sandwich") == from_file
    pairs = pairwise_counts(engine)
    board = leaderboard(pairs.models, pairs.wins, pairs.ties, pairs.both_bad, bootstrap=0,
                        interval="sandwich")
    assert set(from_file) == {row.model for row in board.rows}
    for row in board.rows:
        assert from_file[row.model]["rating"] == pytest.approx(row.rating, abs=1e-6)
        assert from_file[row.model]["ci_low"] == pytest.approx(row.ci_low, abs=1e-6)
        assert from_file[row.model]["battles"] == row.battles

    # Style control: the file's features are the board's, and so is the contextual fit.
    styled = vote_style_features(engine)
    anon = pq.read_table(tmp_path / "anon" / "battles.parquet")
    for side, features in (("a", styled.features_a), ("b", styled.features_b)):
        got = np.column_stack([anon.column(f"{c}_{side}").to_numpy() for c in STYLE_COLUMNS])
        assert np.allclose(np.sort(got, axis=0), np.sort(features, axis=0))
    fit = fit_style_bt(styled.models, styled.model_a, styled.model_b, styled.outcome, styled.features_a,
                       styled.features_b, features=STYLE_COLUMNS)
    from_file_styled = _fit(capsys, tmp_path / "anon-csv" / "battles.csv", "--style-control")
    for m, model in enumerate(fit.models):
        if model in from_file_styled:
            assert from_file_styled[model]["rating"] == pytest.approx(float(fit.ratings[m]), abs=1e-6)


def test_the_battles_csv_and_card(voted: dict[str, str], tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "battles.csv"
    _export(capsys, voted["url"], out, "--mode", "named")
    rows = pacsv.read_csv(out).to_pylist()
    assert len(rows) == 1 and rows[0]["battle_id"] == voted["named"] and rows[0]["winner"] == "a"
    card = (tmp_path / "README.md").read_text()
    assert "--view battles" in card and "data_files" in card and "`winner`" in card
    # Open battles have no vote: --include-open adds no row to this view.
    assert _export(capsys, voted["url"], tmp_path / "o" / "battles.csv", "--include-open")["counts"] == \
        _export(capsys, voted["url"], tmp_path / "c" / "battles.csv")["counts"]
