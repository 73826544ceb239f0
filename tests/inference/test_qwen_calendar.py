"""Slow: Qwen2.5-Coder-1.5B-Instruct, through the command line as a user runs it, answers the calendar
scenario's first turn at temperature 0 with an API call (the issue's acceptance check)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scenarios.catalog.calendar import SYSTEM_PROMPT, TURNS

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def test_the_1_5b_writes_an_add_calendar_entry_call(tmp_path: Path) -> None:
    messages = tmp_path / "turn1.json"
    messages.write_text(json.dumps([{"role": "system", "content": SYSTEM_PROMPT},
                                    {"role": "user", "content": TURNS[0].user}]))
    cmd = [sys.executable, "-m", "inference", "generate", "--model", "qwen2.5-coder-1.5b-instruct",
           "--messages", str(messages), "--temperature", "0", "--json"]
    env = dict(os.environ, ARENA_MESH="off")  # one device, as a user runs it (the tests have 8 virtual ones)
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-2000:]
    reply = json.loads(proc.stdout.strip().splitlines()[-1])["text"]
    assert "action.add_calendar_entry(" in reply, reply
    # The loading stages, on stderr ("convert" only where no earlier start stored the converted weights)
    for stage in ("read", "compile"):
        assert f"qwen2.5-coder-1.5b-instruct: {stage}" in proc.stderr
