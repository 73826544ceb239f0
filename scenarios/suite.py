"""Fixing suites: many generated dialogues per model, several in flight at once.

``python -m scenarios run S --dialogues N`` plays N generated dialogues (``scenarios.generate``) per model.
Each dialogue is one ``suite`` run: every turn is sent as written (a false correction as a correction,
and only after a right reply: a false claim after a mistake tests nothing); after a wrong reply to a
request the correction writer's sentence follows, up to ``max_fix_attempts`` times (never after a false
correction: there, the reply is judged on whether it held its ground). Each
dialogue's first turn is also asked ``k - 1`` more times in fresh conversations (``first_try`` runs, seed
varied per attempt) for τ-bench's pass^k: with the dialogue's own first reply, itself asked in a fresh
conversation, that makes ``k`` samples.

Dialogues run on a thread pool of ``concurrency`` workers: a model that batches (the pool's local
engines) serves them in one decode loop, a remote engine as concurrent requests. The runner stores
nothing: each finished run goes to ``sink`` (the CLI stores it as an ``auto`` battle), progress to
``progress``; a generation that raises is an errored reply, and its dialogue still finishes.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TypeVar

from inference.protocol import ChatModel, GenerationParams
from scenarios.base import Scenario
from scenarios.corrections import Style
from scenarios.generate import Dialogue
from scenarios.records import RunRecord
from scenarios.runner import Progress, ProgressCallback, RunnerConfig, RunSink, new_conversation, seeded

T = TypeVar("T")
DEFAULT_K = 5
DEFAULT_CONCURRENCY = 8  # batch 8: the 2-core engine's best aggregate (docs/BENCHMARKS.md)


@dataclass(frozen=True, slots=True)
class SuiteConfig:
    """How a suite runs: ``k`` first-turn samples per dialogue (its own first reply and ``k - 1`` more),
    ``concurrency`` conversations in flight, corrections per wrong reply, the writer's style, and the
    sampling (``params.seed`` is the base seed)."""

    params: GenerationParams
    k: int = DEFAULT_K
    concurrency: int = DEFAULT_CONCURRENCY
    max_fix_attempts: int = 2
    style: Style = "fix"

    def __post_init__(self) -> None:
        if self.k < 1 or self.concurrency < 1:
            raise ValueError("k and concurrency must be >= 1")
        if self.max_fix_attempts < 0:
            raise ValueError("max_fix_attempts must be >= 0")


@dataclass(frozen=True, slots=True)
class SuiteOutcome:
    """What one model's suite produced, and how long it took (dialogues per minute)."""

    model: str
    records: tuple[RunRecord, ...]
    seconds: float
    failed: int  # dialogues with at least one errored reply

    @property
    def dialogues(self) -> int:
        return sum(1 for r in self.records if r.protocol == "suite")

    @property
    def dialogues_per_minute(self) -> float:
        return 60.0 * self.dialogues / self.seconds if self.seconds > 0 else 0.0


def play_dialogue(scenario: Scenario, model: ChatModel, dialogue: Dialogue, config: SuiteConfig) -> RunRecord:
    """One generated dialogue, played whole with corrections after wrong replies."""
    conv = new_conversation("suite", scenario, model, config.params, 0, dialogue=dialogue)
    conv.record.style = config.style
    fixes = RunnerConfig(max_fix_attempts=config.max_fix_attempts, params=config.params)
    last_reply: int | None = None
    for number, turn in enumerate(dialogue.turns, start=1):
        if turn.is_false_correction and not _last_correct(conv.record, last_reply):
            continue  # a false claim after a wrong reply tests nothing: the reply was not right to keep
        if turn.is_correction and last_reply is not None:
            reply = conv.correct(last_reply, turn.user, scenario=scenario, turn=number)
        else:
            conv.say("correction" if turn.is_false_correction else "request", turn.user)
            reply = conv.ask(turn=number)
        if not turn.is_false_correction:
            conv.correct_until_fixed(reply, scenario=scenario, turn=number, config=fixes)
        last_reply = len(conv.record.messages) - 1
    return conv.record


def first_try(scenario: Scenario, model: ChatModel, dialogue: Dialogue, config: SuiteConfig,
              attempt: int) -> RunRecord:
    """A fresh conversation with the dialogue's first turn only (seed + attempt)."""
    conv = new_conversation("first_try", scenario, model, seeded(config.params, attempt + 1), attempt,
                            dialogue=dialogue)
    conv.say("request", dialogue.turns[0].user)
    conv.ask(turn=1)
    return conv.record


def run_suite(*, scenario: Scenario, model: ChatModel, dialogues: Sequence[Dialogue], config: SuiteConfig,
              sink: RunSink | None = None, progress: ProgressCallback | None = None) -> SuiteOutcome:
    """Play every dialogue (and its k - 1 more first-turn samples) with ``config.concurrency`` in
    flight; each run goes to ``sink`` as it ends, in the order it ends."""
    jobs: list[Callable[[], RunRecord]] = []
    for dialogue in dialogues:
        jobs.append(functools.partial(play_dialogue, scenario, model, dialogue, config))
        jobs += [functools.partial(first_try, scenario, model, dialogue, config, attempt)
                 for attempt in range(config.k - 1)]
    started = time.perf_counter()

    def finished(record: RunRecord, done: int) -> None:
        if sink is not None:
            sink(record)
        if progress is not None:
            progress(Progress(done=done, total=len(jobs), model=model.slug, protocol=record.protocol))

    records = in_flight(jobs, concurrency=config.concurrency, name="suite", on_done=finished)
    seconds = time.perf_counter() - started
    failed = sum(1 for r in records if r.protocol == "suite" and _errored(r))
    return SuiteOutcome(model=model.slug, records=tuple(_in_order(records, dialogues)), seconds=seconds,
                        failed=failed)


def in_flight(jobs: Sequence[Callable[[], T]], *, concurrency: int, name: str,
              on_done: Callable[[T, int], None]) -> list[T]:
    """Run ``jobs`` on ``concurrency`` threads; ``on_done(result, finished so far)`` as each ends, in the
    order they end (which is also the order of the list returned). An exception a job raises is raised."""
    results: list[T] = []
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=name) as pool:
        pending: set[Future[T]] = {pool.submit(job) for job in jobs}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                results.append(future.result())
                on_done(results[-1], len(results))
    return results


def _last_correct(record: RunRecord, reply: int | None) -> bool:
    grade = record.messages[reply].grade if reply is not None else None
    return grade is not None and grade.is_correct


def _errored(record: RunRecord) -> bool:
    return any(m.result is not None and m.result.error for m in record.messages)


def _in_order(records: list[RunRecord], dialogues: Sequence[Dialogue]) -> list[RunRecord]:
    """Dialogue order, each dialogue's suite run before its first-turn samples (by attempt)."""
    rank = {d.id: i for i, d in enumerate(dialogues)}
    return sorted(records, key=lambda r: (rank.get(r.dialogue.id if r.dialogue else "", 0),
                                          r.protocol != "suite", r.attempt))

