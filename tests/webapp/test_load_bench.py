"""The load test's bookkeeping: a few visitors for a few seconds lose and duplicate nothing.

(Its figures are a benchmark; this only checks that what the visitors were told matches the database.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.webapp_load import reason_of, run_visitors


def test_a_short_load_run_loses_no_row(monkeypatch: pytest.MonkeyPatch, data_dir: Path) -> None:
    for name in ("ARENA_DATABASE_URL", "ARENA_CATALOGUE_PATH", "ARENA_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)  # run_visitors sets them; restored afterwards
    monkeypatch.setenv("ARENA_GENERATIONS_PER_MINUTE", "4")  # some refusals take part too
    report = run_visitors(visitors=3, seconds=4, addresses=1, data_dir=data_dir)  # the tests' warm pool
    rows = report["rows"]
    assert report["completed_replies"] > 0 and rows["replies_told"] > 0
    assert rows["lost"] == rows["duplicated"] == rows["unexpected"] == 0, rows
    assert rows["requests_told"] == rows["requests_stored"] and rows["replies_told"] == rows["replies_stored"]
    assert report["ttft_ms"]["p50"] is not None and report["ttft_ms"]["p95"] >= report["ttft_ms"]["p50"]
    assert set(report["refusals"]) <= {"rate_per_visitor", "rate_per_address", "generation_in_flight",
                                       "in_flight_per_address", "model_line_full", "turn_limit",
                                       "battles_per_hour", "other"}


def test_refusal_sentences_have_names() -> None:
    from settings import Settings
    from webapp import limits

    settings = Settings(environment="test", generations_per_minute=1)
    assert reason_of(limits.rate_problem(1, 1, planned=1, settings=settings) or "") == "rate_per_visitor"
    assert reason_of(limits.rate_problem(0, 9, planned=1, settings=settings) or "") == "rate_per_address"
    assert reason_of(limits.ARENA_BUSY) == "model_line_full"
    assert reason_of(limits.BUSY) == "generation_in_flight"
    assert reason_of(limits.NETWORK_IN_FLIGHT) == "in_flight_per_address"
