"""Boards that read at a glance (issue 43, item 4), in AppTest over a real SQLite database: heatmaps
name every model on both axes, style control re-ranks the one table and shows each model's rank change,
wide tables keep the model's name pinned and scroll inside their frame, and an empty board says in words
how it fills, with no command line on the page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from tests.db.conftest import back_date
from tests.webapp.test_leaderboard_boards import (
    GOOD,
    LONG,
    PAST_DELAY,
    _battle,
    _board,
    _frame_with,
    _frames,
    _fresh_db,
    _open,
)
from webapp import charts
from webapp.leaderboard_data import RANK_DELTA, rank_delta, style_ranked

VOTES_PER_PAIR = 30


def _style_votes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Votes that reward length: *mixed* wins against *terse* exactly when its reply is the long one, which
    tells the style fit what length is worth; *wordy* (always long) wins 70% of its battles on length."""
    engine = _fresh_db(monkeypatch, tmp_path, "wordy", "mixed", "terse")
    for n in range(VOTES_PER_PAIR):
        long = n % 2 == 0
        _battle(engine, "mixed", "terse", reply_a=LONG if long else GOOD, reply_b=GOOD,
                vote="a" if long else "b")
        for rival in ("terse", "mixed"):
            _battle(engine, "wordy", rival, reply_a=LONG, reply_b=GOOD, vote="a" if n % 10 < 7 else "b")
    back_date(engine, PAST_DELAY)


def _texts(at: AppTest) -> list[str]:
    kinds = (at.title, at.subheader, at.markdown, at.caption, at.info, at.warning, at.error)
    return [str(element.value) for kind in kinds for element in kind]


def _heatmaps(at: AppTest) -> list[dict[str, Any]]:
    specs = [json.loads(chart.proto.spec) for chart in at.get("vega_lite_chart")]
    return [spec for spec in specs if "model_b" in json.dumps(spec)]


def _axes_name(spec: dict[str, Any], models: list[str]) -> None:
    """Every layer of a heatmap spec puts every model on both axes and culls no label."""
    for layer in spec["layer"]:
        for channel in ("x", "y"):
            encoding = layer["encoding"][channel]
            assert encoding["scale"]["domain"] == models, channel
            assert encoding["axis"]["labelOverlap"] is False, channel


def test_style_control_reranks_the_table_on_screen(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _style_votes(monkeypatch, tmp_path)
    at = _open()
    plain = _frame_with(at, "Rating")
    assert plain["Model"].tolist()[0] == "Wordy", "without style control the long replies win"
    assert RANK_DELTA not in plain.columns
    rank_before = dict(zip(plain["Model"], plain["Rank"], strict=True))
    at.toggle(key="lb_style").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    ranked = [frame for frame in _frames(at) if "Rating" in frame.columns]
    assert len(ranked) == 1, "the table on screen is re-ranked, no second table is added"
    table = ranked[0]
    assert table["Model"].tolist()[-1] == "Wordy", "once length is accounted for, its lead is gone"
    assert table["Rating"].is_monotonic_decreasing and table["Rank"].is_monotonic_increasing
    pairs = zip(table["Model"], table["Rank"], strict=True)
    deltas = [rank_delta(int(rank_before[model]), int(rank)) for model, rank in pairs]
    assert table[RANK_DELTA].tolist() == deltas and set(deltas) != {"0"}
    assert table["Votes"].tolist() == [2 * VOTES_PER_PAIR] * 3
    coefficients = _frame_with(at, "Coefficient").set_index("Feature")
    assert coefficients.loc["length", "Coefficient"] > 0, "votes favour longer replies"
    at.toggle(key="lb_style").set_value(False).run()
    assert _frame_with(at, "Rating")["Model"].tolist() == plain["Model"].tolist(), "toggled off: as before"


def test_heatmaps_name_every_model_on_both_axes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _style_votes(monkeypatch, tmp_path)
    at = _open()
    models = _frame_with(at, "Rating")["Model"].tolist()
    heatmaps = _heatmaps(at)
    assert len(heatmaps) == 2  # win rate and battles
    for spec in heatmaps:
        _axes_name(spec, models)


def test_a_crowded_heatmap_stands_its_labels_upright() -> None:
    names = [f"Model number {n} with a long instruction-tuned name" for n in range(15)]
    matrix = pd.DataFrame(0.5, index=names, columns=names)
    spec = charts.matrix_heatmap(matrix, title="win rate", value_format=".2f").to_dict()
    _axes_name(spec, names)
    x_axis = spec["layer"][0]["encoding"]["x"]["axis"]
    assert x_axis["labelAngle"] == -90 and x_axis["labelLimit"] >= 240
    few = charts.matrix_heatmap(matrix.iloc[:4, :4], title="win rate", value_format=".2f").to_dict()
    assert few["layer"][0]["encoding"]["x"]["axis"]["labelAngle"] == -45


def test_style_ranked_keeps_a_model_the_style_fit_could_not_rate() -> None:
    plain = pd.DataFrame({"Rank": [1, 2, 3], "Model": ["A", "B", "C"], "Rating": [1100.0, 1000.0, 900.0],
                          "95% low": [1050.0, 950.0, 850.0], "95% high": [1150.0, 1050.0, 950.0],
                          "Votes": [10, 8, 2]})
    styled = pd.DataFrame({"Rank": [1, 2], RANK_DELTA: ["+1", "−1"], "Model": ["B", "A"],
                           "Rating": [1060.0, 940.0], "95% low": [1000.0, 880.0],
                           "95% high": [1120.0, 1000.0]})
    table = style_ranked(plain, styled)
    assert table.columns.tolist() == ["Rank", RANK_DELTA, "Model", "Rating", "95% low", "95% high", "Votes"]
    assert table["Model"].tolist() == ["B", "A", "C"]
    assert table["Votes"].tolist() == [8, 10, 2], "each model keeps its own plain columns"
    assert table[RANK_DELTA].tolist() == ["+1", "−1", "–"] and pd.isna(table["Rank"].iloc[2])
    assert style_ranked(plain, pd.DataFrame()) is plain
    assert [rank_delta(3, 1), rank_delta(1, 3), rank_delta(2, 2)] == ["+2", "−2", "0"]


def test_wide_tables_pin_the_model_and_scroll_inside_their_frame(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _style_votes(monkeypatch, tmp_path)
    at = _open()
    at.toggle(key="lb_style").set_value(True).run()
    tables = [d for d in at.dataframe if "Rating" in d.value.columns]
    assert len(tables) == 1
    columns = json.loads(tables[0].proto.columns)
    assert all(columns[name]["pinned"] for name in ("Rank", RANK_DELTA, "Model"))
    assert "Votes" not in columns or not columns["Votes"].get("pinned")


def test_empty_boards_say_how_they_fill_without_a_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fresh_db(monkeypatch, tmp_path, "alpha", "beta")
    at = _open()
    seen = {"votes": _texts(at)}
    assert not _frames(at) and not at.get("vega_lite_chart")
    _board(at, "fixing")
    for source in ("people", "grader", "auto", "suites", "replay", "ratings"):
        at.radio(key="lb_fix_source").set_value(source).run()
        assert not at.exception, [e.value for e in at.exception]
        seen[source] = _texts(at)
    seen["automatic"] = _texts(_board(at, "auto"))
    assert any("every vote cast in the Arena counts here" in t for t in seen["votes"])
    assert any("marks the next one ✓ or ✗" in t for t in seen["people"])
    assert any("once the next reply is graded" in t for t in seen["grader"])
    for board in ("auto", "suites"):
        assert any("an operator runs" in t for t in seen[board]), board
    assert any("an operator replays the corrections people wrote" in t for t in seen["replay"])
    assert any("votes and replay fill it" in t for t in seen["ratings"])
    empty_tab = "No automatic runs yet: an operator runs the automatic arena"
    assert any(t.startswith(empty_tab) for t in seen["automatic"])
    for board, texts in seen.items():
        assert not any("python -m" in t or "--models" in t for t in texts), board
