"""``python -m webapp bench --servers 2 --visitors V``: the JSON contract of the multi-process load run, on
a small crowd (real app servers on a fresh PostgreSQL database, the tiny models behind ``inference
serve``, headless Chromium visitors). Figures live in docs/BENCHMARKS.md, never in assertions."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from commands.webapp import main

pytestmark = pytest.mark.browser


def test_two_servers_and_a_small_crowd_lose_and_double_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    postgres = os.environ.get("ARENA_TEST_POSTGRES_URL")
    if postgres is None:
        pytest.skip("ARENA_TEST_POSTGRES_URL is not set: no PostgreSQL server configured for tests")
    if shutil.which("chromium") is None:
        pytest.skip("Debian's chromium is not on PATH (apt-get install chromium)")
    code = main(["bench", "--servers", "2", "--visitors", "3", "--concurrency", "3",
                 "--postgres-url", postgres])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert report["servers"] == 2 and report["visitors"] == 3 and report["database"] == "postgresql"
    assert report["failed"] == 0 and report["first_error"] is None, report["first_error"]
    assert report["voted"] == 3 and report["rows"] == {"votes": 3, "lost": 0, "duplicated": 0}
    for figure in ("page_ms", "reply_ms", "ttft_ms"):
        assert 0 < report[figure]["p50"] <= report[figure]["p99"], figure
    assert report["votes_per_s"] > 0


def test_servers_need_visitors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--servers", "2"]) == 2
    assert "--servers needs --visitors" in capsys.readouterr().err
