"""Part of the CLI's composition root: store automatic runs as ``auto`` battles, and read them back;
read replay items from the database and store the answers (``python -m scenarios replay``).

The only ``scenarios`` module that imports ``db``; the runner, grader and correction writer never do
(the runner hands finished :class:`RunRecord` objects to a sink, and ``python -m scenarios run`` passes
:func:`store_run` bound to an engine).

Mapping, decided here: one run = one ``auto`` battle with a single conversation on side ``a`` (the
contestant under test; side ``b`` stays empty — an automatic run has no opponent, and ranking compares
models through their fix and first-try rates, not through votes). The scripted history of a fixing case
and its pre-made faulty reply are stored as replies with ``finish_reason="scripted"``; the faulty reply
carries its grade, the history none (so it never counts as a first try). Correction events are judged
by the ``grader``. The conversation's params hold the sampling settings plus an ``auto`` object with the
protocol, attempt, fixing case, correction style, each reply's target turn and, for a suite's runs, the
generated dialogue played (``dialogue``: its id, seed and turns, as ``generate`` prints them), so
:func:`load_runs` rebuilds the records and re-grades them against the same dialogue.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine

from db import GRADER_LABELS, BattleView, storable_text
from db.actions import (
    append_message,
    get_battle,
    open_battle,
    record_correction,
    record_replay_result,
    replayed_corrections,
    set_correction_outcome,
    upsert_contestant,
)
from inference.protocol import GenerationParams, GenerationResult
from scenarios.base import Scenario
from scenarios.dialogue import DialogueGrader
from scenarios.generate import Dialogue
from scenarios.grader import Grade
from scenarios.records import RunCorrection, RunMessage, RunRecord
from scenarios.replay import ReplayAnswer, ReplayItem

SCRIPTED = "scripted"
MAX_CHARS = 100_000  # model replies are bounded by max_new_tokens; keep whatever they said


def db_label(grade: Grade) -> str:
    """The grader label as stored: the schema knows all four labels (``many`` since migration 0002)."""
    if grade.label not in GRADER_LABELS:
        raise ValueError(f"grader label {grade.label!r} is not in the schema's {GRADER_LABELS}")
    return grade.label


def ensure_contestant(engine: Engine, *, slug: str, name: str, family: str = "", source: str = "") -> None:
    """Make sure the contestant exists (and keep its descriptive fields current)."""
    upsert_contestant(engine, slug=slug, display_name=name, family=family, source=source)


def store_run(engine: Engine, record: RunRecord) -> str:
    """Write one run as an ``auto`` battle; return the battle id. The contestant must exist."""
    meta: dict[str, Any] = {
        "protocol": record.protocol,
        "attempt": record.attempt,
        "case": record.case,
        "style": record.style,
        "run": record.run,
        "reply_turns": [m.target_turn for m in record.messages if m.kind == "reply"],
    }
    if record.dialogue is not None:  # a suite's generated dialogue: its id, seed and turns
        meta["dialogue"] = {k: v for k, v in record.dialogue.as_json().items() if k != "system_prompt"}
    params: dict[str, Any] = {**dataclasses.asdict(record.params), "auto": meta}
    battle = open_battle(engine, mode="auto", scenario=record.scenario, contestant_a=record.model,
                         system_prompt=record.system_prompt, params_a=params)
    ids: list[int | None] = []
    correction_ids: dict[int, int] = {}
    for index, message in enumerate(record.messages):
        if message.kind == "correction":
            view = record_correction(engine, battle_id=battle.id, side="a", content=message.content,
                                     max_chars=MAX_CHARS)
            correction_ids[index] = view.id
            ids.append(view.feedback_message_id)
        elif message.kind == "request":
            ids.append(append_message(engine, battle_id=battle.id, side="a", kind="request",
                                      content=message.content, max_chars=MAX_CHARS).id)
        else:
            ids.append(_store_reply(engine, battle.id, message))
    for correction in record.corrections:
        set_correction_outcome(engine, correction_id=correction_ids[correction.feedback],
                               outcome=correction.outcome, judged_by="grader")
    return battle.id


def _store_reply(engine: Engine, battle_id: str, message: RunMessage) -> int:
    result = message.result
    error = result.error if result is not None else None
    if not message.content.strip() and not error:
        error = "empty reply"  # the database refuses empty text unless the reply is marked failed
    fields: dict[str, Any] = {}
    if result is not None:
        fields = {
            "ttft_ms": result.ttft_ms, "total_ms": result.total_ms, "finish_reason": result.finish_reason,
            "prompt_tokens": result.prompt_tokens, "completion_tokens": result.new_tokens,
        }
    elif message.scripted:
        fields = {"finish_reason": SCRIPTED}
    grade = message.grade
    view = append_message(
        engine, battle_id=battle_id, side="a", kind="reply", content=storable_text(message.content),
        max_chars=MAX_CHARS, error=storable_text(error) if error else None,
        grader_label=db_label(grade) if grade is not None else None,
        grader_mistakes=[str(m) for m in grade.mistakes] if grade is not None else None, **fields,
    )
    return view.id


def load_runs(engine: Engine, *, battle_ids: Sequence[str], scenario: Scenario) -> list[RunRecord]:
    """Rebuild run records from stored battles; replies are re-graded from their stored text, in their
    dialogue (``scenarios.dialogue``), as the runner graded them."""
    return [_record_from(get_battle(engine, battle_id=battle_id), scenario) for battle_id in battle_ids]


def _record_from(battle: BattleView, scenario: Scenario) -> RunRecord:
    conv = battle.sides["a"]
    params = dict(conv.params)
    meta = params.pop("auto")
    turns = iter(meta["reply_turns"])
    index_of: dict[int, int] = {}
    messages: list[RunMessage] = []
    dialogue = None
    if meta.get("dialogue"):
        dialogue = Dialogue.from_json({**meta["dialogue"], "system_prompt": conv.system_prompt}, scenario)
    grader = DialogueGrader(scenario, dialogue.turns if dialogue is not None else None)
    for stored in conv.messages:
        index_of[stored.id] = len(messages)
        context = grader.add(stored)
        if stored.kind != "reply":
            messages.append(RunMessage(kind=stored.kind, content=stored.content))  # type: ignore[arg-type]
            continue
        turn = next(turns)
        scripted = stored.finish_reason == SCRIPTED
        graded = stored.grader_label is not None and turn is not None and context is not None
        grade = context.grade if graded and context is not None else None
        result = None
        if not scripted:
            result = GenerationResult(text=stored.content, finish_reason=stored.finish_reason or "stop",  # type: ignore[arg-type]
                                      prompt_tokens=stored.prompt_tokens or 0,
                                      new_tokens=stored.completion_tokens or 0, ttft_ms=stored.ttft_ms,
                                      total_ms=stored.total_ms or 0.0, error=stored.error)
        messages.append(RunMessage(kind="reply", content=stored.content, target_turn=turn, grade=grade,
                                   result=result, scripted=scripted, context=context if graded else None))
    corrections = [
        RunCorrection(faulty=index_of[c.faulty_message_id], feedback=index_of[c.feedback_message_id],
                      followup=index_of[c.next_reply_message_id], outcome=c.outcome)  # type: ignore[arg-type]
        for c in conv.corrections
        if c.next_reply_message_id is not None
    ]
    return RunRecord(
        protocol=meta["protocol"], model=conv.contestant.slug, scenario=battle.scenario,
        attempt=int(meta["attempt"]), system_prompt=conv.system_prompt,
        params=GenerationParams(**params), case=meta["case"], style=str(meta.get("style", "")),
        run=str(meta.get("run", "")), dialogue=dialogue,
        messages=messages, corrections=corrections,
    )


# --- replay ------------------------------------------------------------------------------------------


def stored_replay_items(engine: Engine, *, closed_before: dt.datetime | None) -> list[ReplayItem]:
    """Every correction of a battle that counts (closed before ``closed_before``, the publication
    delay's cut-off), as replay items, oldest battle first."""
    from db import VoteFilters
    from db.export import replay_items

    filters = VoteFilters(modes=None, closed_before=closed_before)
    return [ReplayItem.from_record(record) for record in replay_items(engine, filters=filters)]


def answered_items(engine: Engine, *, model: str) -> frozenset[int]:
    """The items (correction ids) ``model`` has answered already."""
    return replayed_corrections(engine, contestant=model)


def store_answer(engine: Engine, answer: ReplayAnswer) -> bool:
    """Store a graded answer, linked to its correction; False when the model had answered it already.
    An answer the engine failed (no outcome) is not stored: a later replay asks again."""
    outcome = answer.outcome
    if outcome is None or answer.grade is None or answer.grade.grade is None:
        raise ValueError("only a graded answer is stored")
    grade, result = answer.grade.grade, answer.result
    return record_replay_result(
        engine, correction_id=answer.item.id, contestant=answer.model, outcome=outcome,
        content=storable_text(result.text) or "(empty reply)", grader_label=db_label(grade),
        grader_mistakes=[str(m) for m in grade.mistakes], prompt_tokens=result.prompt_tokens,
        completion_tokens=result.new_tokens, total_ms=result.total_ms, finish_reason=result.finish_reason)
