"""Shaping a page of rows into export records: nested battles, flat tables, and the two training views.

Pure functions over one :class:`~db.export_read.Chunk`: no database access, so the shapes are easy to
test and the same records feed JSONL, Parquet and the in-memory downloads.

Nested battle record (one per battle)::

    battle_id, created_at, updated_at, closed_at, mode, scenario, status, revealed_before_vote,
    revealed_at, visitor (salted hash | null),
    vote: {choice, created_at, visitor, revealed, flagged, with_corrections, counted} | null,
    sides: [{side, contestant, contestant_name, family, system_prompt, params (JSON text),
             messages: [{id, position, role, kind, content, created_at, first_try, superseded, ttft_ms,
                         total_ms, prompt_tokens, completion_tokens, finish_reason, error,
                         grader_label, grader_mistakes}],
             corrections: [{id, faulty_message_id, feedback_message_id, next_reply_message_id,
                            outcome, judged_by, created_at, judged_at}]}]

Training views use only *standing* messages (a reply that was retried is ``superseded`` and left out):

- preferences: battles whose vote is decisive (``a`` or ``b``) and counted (not revealed before the
  vote, not flagged). ``prompt`` is the longest common prefix of both conversations (system prompt
  included); ``chosen`` / ``rejected`` are the rest of the winner's / loser's conversation — the
  conversational preference format of DPO-style trainers.
- corrections: one row per correction event: ``context`` (system prompt and everything before the
  faulty reply), ``faulty_reply``, ``feedback``, ``next_reply`` (null if the model never answered),
  ``outcome`` and who judged it, with the grader's labels of both replies.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from db.export_read import Chunk

Record = dict[str, Any]

MESSAGE_FIELDS = (
    "id", "position", "role", "kind", "content", "created_at", "first_try", "superseded", "ttft_ms",
    "total_ms", "prompt_tokens", "completion_tokens", "finish_reason", "error", "grader_label",
    "grader_mistakes",
)
CORRECTION_FIELDS = (
    "id", "faulty_message_id", "feedback_message_id", "next_reply_message_id", "outcome", "judged_by",
    "created_at", "judged_at",
)
BATTLE_FIELDS = (
    "battle_id", "created_at", "updated_at", "closed_at", "mode", "scenario", "status",
    "revealed_before_vote", "revealed_at", "visitor",
)


def params_json(params: Any) -> str:
    """Sampling params as canonical JSON text: their shape is free-form, so columnar formats keep text."""
    return json.dumps(params or {}, sort_keys=True, ensure_ascii=False)


def _vote_record(vote: Any) -> Record:
    return {
        "choice": vote.choice,
        "created_at": vote.created_at,
        "visitor": vote.visitor,
        "revealed": bool(vote.revealed),
        "flagged": bool(vote.flagged),
        "with_corrections": bool(vote.with_corrections),
        "counted": not vote.revealed and not vote.flagged,
    }


def battle_records(chunk: Chunk) -> list[Record]:
    """One nested record per battle of the page, in page order."""
    messages: defaultdict[int, list[Record]] = defaultdict(list)
    for m in chunk.messages:
        mistakes = m.grader_mistakes
        messages[m.conversation_id].append({
            "id": m.id, "position": m.position, "role": m.role, "kind": m.kind, "content": m.content,
            "created_at": m.created_at, "first_try": bool(m.first_try), "superseded": bool(m.superseded),
            "ttft_ms": m.ttft_ms, "total_ms": m.total_ms, "prompt_tokens": m.prompt_tokens,
            "completion_tokens": m.completion_tokens, "finish_reason": m.finish_reason, "error": m.error,
            "grader_label": m.grader_label,
            "grader_mistakes": list(mistakes) if mistakes is not None else None,
        })
    corrections: defaultdict[int, list[Record]] = defaultdict(list)
    for c in chunk.corrections:
        corrections[c.conversation_id].append({name: getattr(c, name) for name in CORRECTION_FIELDS})
    sides: defaultdict[str, list[Record]] = defaultdict(list)
    for conv in chunk.conversations:
        sides[conv.battle_id].append({
            "side": conv.side, "contestant": conv.contestant, "contestant_name": conv.contestant_name,
            "family": conv.family, "system_prompt": conv.system_prompt, "params": params_json(conv.params),
            "messages": messages.get(conv.id, []), "corrections": corrections.get(conv.id, []),
        })
    votes = {v.battle_id: _vote_record(v) for v in chunk.votes}
    records = []
    for b in chunk.battles:
        record: Record = {
            "battle_id": b.id, "created_at": b.created_at, "updated_at": b.updated_at,
            "closed_at": b.closed_at, "mode": b.mode, "scenario": b.scenario, "status": b.status,
            "revealed_before_vote": bool(b.revealed_before_vote), "revealed_at": b.revealed_at,
            "visitor": b.visitor, "vote": votes.get(b.id), "sides": sides.get(b.id, []),
        }
        records.append(record)
    return records


def _turns(side: Record) -> list[dict[str, str]]:
    """The standing conversation of one side as chat turns, system prompt first when there is one."""
    turns = [{"role": "system", "content": side["system_prompt"]}] if side["system_prompt"] else []
    turns += [{"role": m["role"], "content": m["content"]} for m in side["messages"] if not m["superseded"]]
    return turns


def preference_records(battles: list[Record]) -> Iterator[Record]:
    """Preference pairs from battles with a counted decisive vote (see module docstring)."""
    for battle in battles:
        vote = battle["vote"]
        if vote is None or vote["choice"] not in ("a", "b") or not vote["counted"]:
            continue
        by_side = {s["side"]: s for s in battle["sides"]}
        if set(by_side) != {"a", "b"}:
            continue
        winner, loser = by_side[vote["choice"]], by_side["b" if vote["choice"] == "a" else "a"]
        chosen, rejected = _turns(winner), _turns(loser)
        shared = 0
        while shared < min(len(chosen), len(rejected)) and chosen[shared] == rejected[shared]:
            shared += 1
        yield {
            "battle_id": battle["battle_id"], "scenario": battle["scenario"], "mode": battle["mode"],
            "created_at": vote["created_at"], "visitor": vote["visitor"],
            "prompt": chosen[:shared], "chosen": chosen[shared:], "rejected": rejected[shared:],
            "chosen_model": winner["contestant"], "rejected_model": loser["contestant"],
            "with_corrections": vote["with_corrections"],
        }


def correction_records(battles: list[Record]) -> Iterator[Record]:
    """Correction triples (context, faulty reply, feedback, next reply, outcome), one per correction."""
    for battle in battles:
        for side in battle["sides"]:
            by_id = {m["id"]: m for m in side["messages"]}
            for corr in side["corrections"]:
                faulty = by_id[corr["faulty_message_id"]]
                feedback = by_id[corr["feedback_message_id"]]
                following = by_id.get(corr["next_reply_message_id"] or -1)
                context = [t for t in _turns(side) if t["role"] == "system"]
                context += [
                    {"role": m["role"], "content": m["content"]}
                    for m in side["messages"]
                    if m["position"] < faulty["position"] and not m["superseded"]
                ]
                yield {
                    "battle_id": battle["battle_id"], "correction_id": corr["id"],
                    "scenario": battle["scenario"], "mode": battle["mode"], "side": side["side"],
                    "model": side["contestant"], "created_at": corr["created_at"],
                    "context": context, "faulty_reply": faulty["content"], "feedback": feedback["content"],
                    "next_reply": following["content"] if following is not None else None,
                    "outcome": corr["outcome"], "judged_by": corr["judged_by"],
                    "faulty_grader_label": faulty["grader_label"],
                    "next_grader_label": following["grader_label"] if following is not None else None,
                }


# --- flat tables (CSV) -----------------------------------------------------------------------------------

TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "battles": BATTLE_FIELDS,
    "conversations": (
        "id", "battle_id", "side", "contestant", "contestant_name", "family", "system_prompt", "params",
    ),
    "messages": ("conversation_id", *MESSAGE_FIELDS),
    "corrections": (
        "id", "battle_id", "conversation_id", "faulty_message_id", "feedback_message_id",
        "next_reply_message_id", "outcome", "judged_by", "created_at", "judged_at",
    ),
    "votes": (
        "battle_id", "choice", "created_at", "visitor", "revealed", "flagged", "with_corrections", "counted",
    ),
}


def table_rows(chunk: Chunk) -> dict[str, list[tuple[Any, ...]]]:
    """The page as flat rows per table, columns as in :data:`TABLE_COLUMNS` (visitors already hashed)."""
    return {
        "battles": [
            (b.id, b.created_at, b.updated_at, b.closed_at, b.mode, b.scenario, b.status,
             bool(b.revealed_before_vote), b.revealed_at, b.visitor)
            for b in chunk.battles
        ],
        "conversations": [
            (c.id, c.battle_id, c.side, c.contestant, c.contestant_name, c.family, c.system_prompt,
             params_json(c.params))
            for c in chunk.conversations
        ],
        "messages": [
            (m.conversation_id, m.id, m.position, m.role, m.kind, m.content, m.created_at,
             bool(m.first_try), bool(m.superseded), m.ttft_ms, m.total_ms, m.prompt_tokens,
             m.completion_tokens, m.finish_reason, m.error, m.grader_label,
             json.dumps(list(m.grader_mistakes)) if m.grader_mistakes is not None else None)
            for m in chunk.messages
        ],
        "corrections": [tuple(c) for c in chunk.corrections],
        "votes": [
            (v.battle_id, v.choice, v.created_at, v.visitor, bool(v.revealed), bool(v.flagged),
             bool(v.with_corrections), not v.revealed and not v.flagged)
            for v in chunk.votes
        ],
    }
