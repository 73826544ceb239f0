"""A reply belongs to the battle, not to the browser tab.

Each side's generation runs in a :class:`ReplyJob`: a thread of this server process that streams the
model's reply into the job, and when the reply ends (finished, failed, or cut by the model's own limits)
stores it through ``finish`` (graded, with a failure's partial text kept) and frees its ledger row. The
page only *follows* a job: it draws the text so far until the job is done. A rerun, a reload or a closed
tab stops the following, never the generation, so a visitor who comes back finds the reply stored, or
still streaming: the page finds the battle's running jobs on the process-wide :data:`DESK` and follows
them again.

The desk is per process: a battle resumed on another server process shows the reply once it is stored
(its generation is still counted in the database ledger, so the visitor's limits hold there too).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from inference.protocol import (
    ChatMessage,
    ChatModel,
    GenerationParams,
    GenerationResult,
    TextDelta,
    error_result,
)

_LOG = logging.getLogger(__name__)
UNSTORED = "this reply could not be stored; retry this side."
POLL_S = 0.05  # how often a following page looks at the text so far
KEEP_DONE_S = 120.0  # a finished job stays on the desk this long, for a page that reruns right after


@dataclass
class ReplyJob:
    """One side's reply being generated; ``text`` grows as it streams, ``result`` is set (then ``done``)
    once ``finish`` has stored it; ``notes`` are what ``finish`` wants the visitor told."""

    battle_id: str
    side: str
    text: str = ""
    result: GenerationResult | None = None
    notes: list[tuple[str, str]] = field(default_factory=list)  # (kind, text): "error", "warning"
    done: threading.Event = field(default_factory=threading.Event)
    finished_at: float | None = None

    @property
    def running(self) -> bool:
        return not self.done.is_set()


Finish = Callable[[ReplyJob, GenerationResult], None]


class ReplyDesk:
    """The process's reply jobs by (battle id, side)."""

    def __init__(self) -> None:
        self._jobs: dict[tuple[str, str], ReplyJob] = {}
        self._lock = threading.Lock()

    def start(self, *, battle_id: str, side: str, model: ChatModel, messages: Sequence[ChatMessage],
              params: GenerationParams, finish: Finish) -> ReplyJob:
        """Generate one side's reply in a thread of its own; ``finish(job, result)`` stores it."""
        job = ReplyJob(battle_id=battle_id, side=side)
        with self._lock:
            self._prune()
            self._jobs[(battle_id, side)] = job
        thread = threading.Thread(target=_generate, args=(job, model, list(messages), params, finish),
                                  name=f"reply-{battle_id[:8]}-{side}", daemon=True)
        thread.start()
        return job

    def running(self, battle_id: str) -> dict[str, ReplyJob]:
        """The battle's sides whose reply is still being generated in this process."""
        with self._lock:
            return {side: job for (b, side), job in self._jobs.items() if b == battle_id and job.running}

    def _prune(self) -> None:
        now = time.monotonic()
        stale = [key for key, job in self._jobs.items()
                 if job.finished_at is not None and now - job.finished_at > KEEP_DONE_S]
        for key in stale:
            del self._jobs[key]


DESK = ReplyDesk()


def _generate(job: ReplyJob, model: ChatModel, messages: list[ChatMessage], params: GenerationParams,
              finish: Finish) -> None:
    started = time.perf_counter()
    result: GenerationResult | None = None
    try:
        for event in model.stream(messages, params):  # no cancel token: leaving the page stops nothing
            if isinstance(event, TextDelta):
                job.text += event.text
            elif isinstance(event, GenerationResult):
                result = event
                break
    except Exception as exc:  # a model failure is this side's failed reply, its partial text kept
        result = error_result(exc, started=started, text=job.text)
    if result is None:
        result = error_result("the model ended its stream without a result", started=started, text=job.text)
    try:
        finish(job, result)
    except Exception:  # nobody may be watching: the operator reads it, a following page says it
        _LOG.exception("reply of battle %s side %s was not stored", job.battle_id, job.side)
        job.notes.append(("error", f"Model {job.side.upper()}: {UNSTORED}"))
    finally:
        job.result = job.result or result
        job.finished_at = time.monotonic()
        job.done.set()


def follow(jobs: Mapping[str, ReplyJob], *, on_text: Callable[[str, str], None],
           on_done: Callable[[ReplyJob], None]) -> None:
    """Draw each job's text as it grows (``on_text(side, text)``) and each finished job once
    (``on_done``), until every job is done. Stopping here (a rerun) leaves the jobs running."""
    shown = dict.fromkeys(jobs, "")
    pending = dict(jobs)
    while pending:
        for side, job in list(pending.items()):
            finished = job.done.is_set()  # read before the text: a done job's text is final
            if job.text != shown[side]:
                shown[side] = job.text
                on_text(side, job.text)
            if finished:
                del pending[side]
                on_done(job)
        if pending:
            time.sleep(POLL_S)
