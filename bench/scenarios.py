"""``python -m scenarios bench``: how fast the grader and correction writer are on ordinary and hostile
replies. They run in the web page on every reply, so the budget is a small fraction of a frame: the
target is 1 ms per ordinary reply and 50 ms for the worst hostile input."""

from __future__ import annotations

import functools
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scenarios import get_scenario

LABELED = Path(__file__).resolve().parents[1] / "tests" / "data" / "labeled_replies.jsonl"
TARGET_REPLY_MS = 1.0
TARGET_HOSTILE_MS = 50.0
HOSTILE: dict[str, str] = {
    "1 MB of text": "a" * 1_000_000,
    "1 MB inside a call": "action.add_calendar_entry(" + "A" * 1_000_000 + ")",
    "NUL byte": 'action.add_calendar_entry("Meeting\x00", date="2024-11-11", time="17:00", duration=30)',
    "100k nested parens": "action.add_calendar_entry(" + "(" * 100_000 + ")" * 100_000 + ")",
    "900 unary minus": "action.add_calendar_entry('x', duration=" + "-" * 900 + "1)",
    "code injection": "__import__('os').system('echo pwned')",
}


def _timed(fn: Callable[[], object], *, repeat: int) -> list[float]:
    """Milliseconds per call, one figure per repetition."""
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def run_bench(*, rounds: int = 20) -> dict[str, Any]:
    """Grade the labeled set ``rounds`` times and each hostile input ``rounds`` times; figures in ms."""
    scenario = get_scenario("calendar")
    rows = [json.loads(line) for line in LABELED.read_text(encoding="utf-8").splitlines() if line.strip()]

    def grade_all() -> None:
        for row in rows:
            grade = scenario.grade(row["reply"], target_turn=row["target"])
            assert grade is not None
            scenario.correction(grade, target_turn=row["target"])

    per_reply = [ms / len(rows) for ms in _timed(grade_all, repeat=rounds)]
    reply_ms = statistics.median(per_reply)
    hostile: dict[str, dict[str, Any]] = {}
    worst = 0.0
    for name, text in HOSTILE.items():
        times = _timed(functools.partial(scenario.grade, text, target_turn=2), repeat=rounds)
        grade = scenario.grade(text, target_turn=2)
        label = grade.label if grade is not None else None
        hostile[name] = {"median_ms": round(statistics.median(times), 4), "max_ms": round(max(times), 4),
                         "label": label}
        worst = max(worst, statistics.median(times))  # medians: a shared machine's preemption spikes
        # show up in max_ms, which is reported but not judged
    return {
        "replies": len(rows),
        "rounds": rounds,
        "grade_and_correct_ms_per_reply": round(reply_ms, 4),
        "replies_per_s": round(1000 / reply_ms),
        "reply_ratio_vs_target": round(TARGET_REPLY_MS / reply_ms, 1),
        "hostile": hostile,
        "worst_hostile_median_ms": round(worst, 4),
        "hostile_ratio_vs_target": round(TARGET_HOSTILE_MS / worst, 1),
        "worst_hostile_vs_ordinary": round(worst / reply_ms, 1),
    }
