"""Replay: every correction a person wrote becomes a test for every model.

An item (:class:`ReplayItem`, one record of ``python -m db export --view replay``) is a conversation up
to and including a faulty reply, then the person's correction. A model is asked for the next reply, and
the grader judges it in that context, with the scenario's state model, as it judged the original:
``fixed`` (the reply is right), ``regression`` (it broke an entry that was right) or ``not_fixed``.

Only items whose dialogue the grader can follow are replayed (:func:`follows`: the corrected reply
answers a turn of the battle's generated dialogue, or of the scenario's reference dialogue); the others
(free chat, off-script requests) are skipped and counted. Model output is parsed by the grader, never
run. Items run on a thread pool of ``concurrency`` workers, so a local model batches them in one
decode loop and a remote engine gets concurrent requests; each answer goes to ``sink`` as it ends.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from inference.protocol import (
    ChatMessage,
    ChatModel,
    GenerationParams,
    GenerationResult,
    complete,
    error_result,
)
from scenarios.base import Scenario
from scenarios.dialogue import DialogueGrader, DialogueMessage, ReplyGrade
from scenarios.generate import battle_script
from scenarios.suite import in_flight

REPLAY_VERSION = 1  # the export's ``version`` (db.export.replay.REPLAY_VERSION; a test keeps them equal)
ReplayOutcome = Literal["fixed", "not_fixed", "regression"]
REQUIRED = ("version", "id", "scenario", "system_prompt", "history", "model")


class ReplayFileError(ValueError):
    """A replay file or item that cannot be used (another version, a missing field): exit 2."""


@dataclass(frozen=True, slots=True)
class ReplayItem:
    """One correction event as a test (see the module docstring). ``history`` ends with the faulty reply
    and the correction; ``dialogue`` is the battle's generated dialogue (None: the reference one)."""

    id: int
    scenario: str
    system_prompt: str
    history: tuple[DialogueMessage, ...]
    model: str
    dialogue: Mapping[str, Any] | None = None
    person_verdict: str | None = None
    grader_fixed: bool | None = None
    battle_id: str = ""
    created_at: dt.datetime | None = None  # when the correction was sent

    @property
    def correction(self) -> str:
        return self.history[-1].content

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ReplayItem:
        """An item from an export record; :class:`ReplayFileError` saying what is wrong."""
        missing = [name for name in REQUIRED if record.get(name) is None]
        if missing:
            raise ReplayFileError(f"missing field(s) {', '.join(missing)}")
        if record["version"] != REPLAY_VERSION:
            raise ReplayFileError(f"replay file version {record['version']!r}; this version reads "
                                  f"{REPLAY_VERSION}")
        try:
            history = tuple(DialogueMessage.from_mapping(m) for m in record["history"])
        except (ValueError, TypeError, AttributeError) as exc:
            raise ReplayFileError(f"history: {exc}") from exc
        if len(history) < 2 or history[-1].kind != "correction" or history[-2].kind != "reply":
            raise ReplayFileError("history must end with the faulty reply and then the correction")
        return cls(id=int(record["id"]), scenario=str(record["scenario"]),
                   system_prompt=str(record["system_prompt"]), history=history, model=str(record["model"]),
                   dialogue=_dialogue(record.get("dialogue")), person_verdict=record.get("person_verdict"),
                   grader_fixed=record.get("grader_fixed"), battle_id=str(record.get("battle_id") or ""),
                   created_at=_moment(record.get("created_at")))


def _moment(value: object) -> dt.datetime | None:
    """A record's timestamp: a datetime (Parquet) or ISO 8601 text (JSONL); naive means UTC."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value)
        except ValueError:
            raise ReplayFileError(f"created_at is not an ISO 8601 time: {value!r}") from None
    if not isinstance(value, dt.datetime):
        raise ReplayFileError("created_at must be a time")
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def _dialogue(value: object) -> Mapping[str, Any] | None:
    if value is None:
        return None
    try:
        parsed = json.loads(value) if isinstance(value, str) else value
    except json.JSONDecodeError as exc:
        raise ReplayFileError(f"dialogue is not JSON: {exc.msg}") from exc
    if not isinstance(parsed, dict):
        raise ReplayFileError("dialogue must be a JSON object or null")
    return parsed


def read_replay_file(path: Path) -> list[ReplayItem]:
    """The items of a JSONL or Parquet replay file; :class:`ReplayFileError` naming the first bad item."""
    if not path.is_file():
        raise ReplayFileError(f"no replay file {path}")
    records: Iterable[Any]
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            records = pq.read_table(path).to_pylist()
        except Exception as exc:  # noqa: BLE001 - any unreadable file is bad input
            raise ReplayFileError(f"{path} is not a readable Parquet file: {exc}") from exc
    else:
        records = _jsonl(path)
    items = []
    for number, record in enumerate(records, start=1):
        if not isinstance(record, dict):
            raise ReplayFileError(f"{path.name} item {number}: not a JSON object")
        try:
            items.append(ReplayItem.from_record(record))
        except ReplayFileError as exc:
            raise ReplayFileError(f"{path.name} item {number}: {exc}") from None
    return items


def _jsonl(path: Path) -> list[Any]:
    out = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ReplayFileError(f"{path.name} line {number}: not JSON ({exc.msg})") from None
    return out


def script_for(scenario: Scenario, item: ReplayItem) -> Any:
    """The turns the item's battle played; :class:`ReplayFileError` when its dialogue is not one of this
    scenario's (another generator version, another scenario)."""
    try:
        return battle_script(scenario, item.dialogue)
    except (ValueError, KeyError, TypeError) as exc:
        raise ReplayFileError(f"item {item.id}: its dialogue does not fit scenario {scenario.slug!r}: "
                              f"{exc}") from None


def grade_answer(scenario: Scenario, item: ReplayItem, text: str) -> ReplyGrade | None:
    """The grade of ``text`` as the reply after the item's correction, in the dialogue's context; None
    when the grader cannot follow the dialogue there (off script) or the reply answers no correction."""
    grader = DialogueGrader(scenario, script_for(scenario, item))
    for message in item.history:
        grader.add(message)
    grade = grader.add(DialogueMessage(role="assistant", kind="reply", content=text))
    if grade is None or grade.grade is None or grade.fixed is None:
        return None
    return grade


def follows(scenario: Scenario, item: ReplayItem) -> bool:
    """Whether the grader can judge an answer to this item: the faulty reply itself, given as the answer,
    is graded (which needs only the history and the dialogue, no model)."""
    return scenario.api is not None and grade_answer(scenario, item, item.history[-2].content) is not None


def outcome_of(grade: ReplyGrade) -> ReplayOutcome:
    if grade.fixed:
        return "fixed"
    return "regression" if grade.regression else "not_fixed"


@dataclass(frozen=True, slots=True)
class ReplayAnswer:
    """One model's answer to one item, graded (``outcome`` None: the engine failed; nothing to grade)."""

    item: ReplayItem
    model: str
    result: GenerationResult
    grade: ReplyGrade | None

    @property
    def outcome(self) -> ReplayOutcome | None:
        if self.result.error or self.grade is None:
            return None
        return outcome_of(self.grade)

    @property
    def own(self) -> bool:
        return self.model == self.item.model

    def as_json(self) -> dict[str, Any]:
        """``--json``'s line per answer: ``item, model, own, outcome, label, mistakes, error``."""
        grade = self.grade.grade if self.grade is not None else None
        return {"item": self.item.id, "model": self.model, "own": self.own, "outcome": self.outcome,
                "label": grade.label if grade is not None else None,
                "mistakes": [str(m) for m in grade.mistakes] if grade is not None else [],
                "error": self.result.error}


def chat_of(item: ReplayItem) -> list[ChatMessage]:
    """What the model is sent: the system prompt, then the history (faulty reply and correction last)."""
    chat = [ChatMessage(role="system", content=item.system_prompt)] if item.system_prompt else []
    return chat + [ChatMessage(role=m.role, content=m.content) for m in item.history]  # type: ignore[arg-type]


def answer_item(scenario: Scenario, model: ChatModel, item: ReplayItem,
                params: GenerationParams) -> ReplayAnswer:
    """Ask ``model`` for the reply after the item's correction and grade it (an engine error is kept as
    the answer's result, ungraded)."""
    started = time.perf_counter()
    try:
        result = complete(model, chat_of(item), params)
    except Exception as exc:  # noqa: BLE001 - a broken engine fails this item, not the run
        result = error_result(exc, started=started)
    grade = None if result.error else grade_answer(scenario, item, result.text)
    return ReplayAnswer(item=item, model=model.slug, result=result, grade=grade)


def run_replay(*, items: Sequence[ReplayItem], scenarios: Mapping[str, Scenario], model: ChatModel,
               params: GenerationParams, concurrency: int,
               sink: Callable[[ReplayAnswer], None] | None = None,
               progress: Callable[[int, int], None] | None = None) -> list[ReplayAnswer]:
    """Answer every item with ``concurrency`` requests in flight; each answer goes to ``sink`` as it
    ends. Items must be followable (:func:`follows`) and their scenarios in ``scenarios``."""
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    def finished(answer: ReplayAnswer, done: int) -> None:
        if sink is not None:
            sink(answer)
        if progress is not None:
            progress(done, len(items))

    jobs = [functools.partial(answer_item, scenarios[item.scenario], model, item, params) for item in items]
    answers = in_flight(jobs, concurrency=concurrency, name="replay", on_done=finished)
    return sorted(answers, key=lambda a: a.item.id)
