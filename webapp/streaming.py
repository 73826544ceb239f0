"""Both sides of a battle stream at the same time.

Each side's ``ChatModel.stream`` runs in its own worker thread and pushes ``(side, event)`` pairs onto
one queue; the script thread drains that queue and is the only one that touches Streamlit elements or
the database. That keeps Streamlit's one-thread-per-script rule and lets a finished side be written to
the database (``on_result``) while the other side is still generating. A side whose model raises is
turned into an ``error`` result for that side only; the other side carries on.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from inference.protocol import (
    CancelToken,
    ChatMessage,
    ChatModel,
    GenerationParams,
    GenerationResult,
    StreamEvent,
    TextDelta,
    error_result,
)


@dataclass(frozen=True)
class StreamJob:
    """One side's request: which model, which conversation, which sampling settings."""

    model: ChatModel
    messages: Sequence[ChatMessage]
    params: GenerationParams


@dataclass
class SideTiming:
    """Wall-clock marks (``time.perf_counter`` seconds) of one side, to prove the sides overlapped."""

    started: float
    first_delta: float | None = None
    finished: float | None = None


@dataclass
class PairOutcome:
    results: dict[str, GenerationResult]
    timings: dict[str, SideTiming] = field(default_factory=dict)

    def overlap_s(self) -> float:
        """Seconds during which both sides were generating at once (0 for one side or no overlap)."""
        if len(self.timings) < 2:
            return 0.0
        spans = [(t.started, t.finished or t.started) for t in self.timings.values()]
        start = max(s for s, _ in spans)
        end = min(e for _, e in spans)
        return max(0.0, end - start)


_DONE = object()


def _worker(side: str, job: StreamJob, out: queue.Queue[object], cancel: CancelToken) -> None:
    started = time.perf_counter()
    got_result = False
    try:
        for event in job.model.stream(job.messages, job.params, cancel=cancel):
            out.put((side, event))
            if isinstance(event, GenerationResult):
                got_result = True
                break
    except Exception as exc:  # a model failure belongs to its side, never to the whole page
        out.put((side, error_result(exc, started=started)))
        got_result = True
    if not got_result:
        out.put((side, error_result("the model ended its stream without a result", started=started)))
    out.put((side, _DONE))


def stream_pair(
    jobs: Mapping[str, StreamJob],
    *,
    on_delta: Callable[[str, str], None],
    on_result: Callable[[str, GenerationResult], None],
    cancel: CancelToken | None = None,
) -> PairOutcome:
    """Run every job concurrently; call ``on_delta(side, text_so_far)`` and ``on_result`` in this thread.

    Returns when every side has produced its :class:`GenerationResult`.
    """
    token = cancel or CancelToken()
    events: queue.Queue[object] = queue.Queue()
    timings = {side: SideTiming(started=time.perf_counter()) for side in jobs}
    threads = [
        threading.Thread(target=_worker, args=(side, job, events, token), daemon=True, name=f"stream-{side}")
        for side, job in jobs.items()
    ]
    for thread in threads:
        thread.start()
    texts = dict.fromkeys(jobs, "")
    results: dict[str, GenerationResult] = {}
    remaining = len(threads)
    try:
        while remaining:
            item = events.get()
            assert isinstance(item, tuple)
            side, event = item
            if event is _DONE:
                remaining -= 1
                continue
            assert isinstance(event, TextDelta | GenerationResult)
            _apply(side, event, texts, timings, results, on_delta, on_result)
    finally:
        if remaining:  # the page was left or re-run mid-stream: stop generating for nobody
            token.cancel()
    for thread in threads:
        thread.join(timeout=1.0)
    return PairOutcome(results=results, timings=timings)


def _apply(
    side: str,
    event: StreamEvent,
    texts: dict[str, str],
    timings: dict[str, SideTiming],
    results: dict[str, GenerationResult],
    on_delta: Callable[[str, str], None],
    on_result: Callable[[str, GenerationResult], None],
) -> None:
    now = time.perf_counter()
    if isinstance(event, TextDelta):
        if timings[side].first_delta is None:
            timings[side].first_delta = now
        texts[side] += event.text
        on_delta(side, texts[side])
        return
    timings[side].finished = now
    results[side] = event
    on_result(side, event)
