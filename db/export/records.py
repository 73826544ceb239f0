"""Shaping a page of rows into export records: nested battles, flat tables, and the two training views.

Pure functions over one :class:`~db.export.read.Chunk` of Arrow tables: no database access. The nested
battles are built column-wise in Arrow (list offsets, no Python object per message), which is what
keeps a million-message Parquet export within seconds; JSONL and the views go through Python records
(``to_pylist``) only after that.

Nested battle record (one per battle)::

    battle_id, created_at, updated_at, closed_at, mode, scenario, status, revealed_before_vote,
    revealed_at, visitor (salted hash | null), dialogue_id (the generated dialogue played | null),
    vote: {choice, created_at, visitor, revealed, flagged, with_corrections, counted} | null,
    sides: [{side, contestant, contestant_name, family, system_prompt, params (JSON text),
             messages: [{id, position, role, kind, content, created_at, first_try, superseded, ttft_ms,
                         total_ms, prompt_tokens, completion_tokens, finish_reason, error,
                         grader_label, grader_mistakes, grader_notes}],
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
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from db.boards.fixing import FIXED_LABEL
from db.boards.reply_stats import recurrence_flags
from db.export.read import Chunk
from db.export.schema import (
    CORRECTION_FIELDS,
    MESSAGE_FIELDS,
    SCHEMAS,
    SIDE_FIELDS,
    VOTE_FIELDS,
    VOTE_TYPE,
)

Record = dict[str, Any]


def _offsets(group_keys: pa.ChunkedArray | pa.Array, owner_keys: pa.ChunkedArray | pa.Array) -> pa.Array:
    """List offsets that give each owner (in order) its run of rows; rows are grouped in owner order.

    ``group_keys[i]`` names the owner of row ``i``; owners without rows get an empty list.
    """
    keys = group_keys.to_numpy() if isinstance(group_keys, pa.ChunkedArray) else group_keys.to_numpy(
        zero_copy_only=False)
    owners = owner_keys.to_numpy() if isinstance(owner_keys, pa.ChunkedArray) else owner_keys.to_numpy(
        zero_copy_only=False)
    if keys.dtype.kind in "iu":  # ascending integer ids: vectorised
        unique, counts = np.unique(keys, return_counts=True)
        at = np.clip(np.searchsorted(unique, owners), 0, max(len(unique) - 1, 0))
        sizes = np.where(unique[at] == owners, counts[at], 0) if len(unique) else np.zeros(len(owners), int)
    else:
        tally = Counter(keys.tolist())
        sizes = np.fromiter((tally.get(k, 0) for k in owners.tolist()), dtype=np.int64, count=len(owners))
    if int(sizes.sum()) != len(keys):
        raise RuntimeError("export page is not grouped consistently")  # a bug, never bad input
    return pa.array(np.concatenate(([0], np.cumsum(sizes))).astype(np.int32), pa.int32())


def _struct(table: pa.Table, fields: list[tuple[str, pa.DataType]]) -> pa.StructArray:
    names = [name for name, _ in fields]
    return pa.StructArray.from_arrays([table.column(n).combine_chunks() for n in names], fields=[
        pa.field(n, t) for n, t in fields])


def _counted(table: pa.Table) -> pa.Array:
    return pc.and_(pc.invert(table.column("revealed")), pc.invert(table.column("flagged"))).combine_chunks()


def _lists_per_conversation(rows: pa.Table, fields: list[tuple[str, pa.DataType]],
                            conversation_ids: pa.Array) -> pa.ListArray:
    """Rows grouped by ascending conversation id, as one list per conversation in page order."""
    ids = conversation_ids.to_numpy(zero_copy_only=False)
    by_id = np.argsort(ids, kind="stable")
    lists = pa.ListArray.from_arrays(
        _offsets(rows.column("conversation_id"), pa.array(ids[by_id])), _struct(rows, fields))
    back = np.empty_like(by_id)
    back[by_id] = np.arange(len(by_id))
    return lists.take(pa.array(back))


def battle_table(chunk: Chunk) -> pa.Table:
    """The page as nested battle records (schema ``SCHEMAS['battles']``), built column-wise in Arrow.

    Lists are made from offsets over the grouped flat tables, so no Python object is created per
    message: this is what keeps a million-message Parquet export within seconds.
    """
    convs = chunk.conversations
    conv_ids = convs.column("id").combine_chunks()
    messages = _lists_per_conversation(chunk.messages, MESSAGE_FIELDS, conv_ids)
    corrections = _lists_per_conversation(chunk.corrections, CORRECTION_FIELDS, conv_ids)
    side_arrays = [convs.column(n).combine_chunks() for n, _ in SIDE_FIELDS] + [messages, corrections]
    sides_type = SCHEMAS["dialogues"].field("sides").type
    sides = pa.ListArray.from_arrays(
        _offsets(convs.column("battle_id"), chunk.battles.column("id")),
        pa.StructArray.from_arrays(side_arrays, fields=list(sides_type.value_type)))
    votes = chunk.votes
    where = {bid: i for i, bid in enumerate(votes.column("battle_id").to_pylist())}
    picks = pa.array([where.get(bid) for bid in chunk.battles.column("id").to_pylist()], pa.int64())
    vote_columns = [votes.column(n).combine_chunks() for n, _ in VOTE_FIELDS] + [_counted(votes)]
    vote = pa.StructArray.from_arrays(
        [column.take(picks) for column in vote_columns], fields=list(VOTE_TYPE), mask=picks.is_null())
    battles = chunk.battles.rename_columns(["battle_id", *chunk.battles.column_names[1:]])
    return battles.append_column("vote", vote).append_column("sides", sides).cast(SCHEMAS["dialogues"])


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


def _correction_style(params: str | None) -> str | None:
    """The automatic arena's correction style (``params.auto.style``: fix | hint); None for people."""
    auto = (json.loads(params) if params else {}).get("auto")
    style = auto.get("style") if isinstance(auto, dict) else None
    return str(style) if style else None


def correction_records(battles: list[Record]) -> Iterator[Record]:
    """Correction triples (context, faulty reply, feedback, next reply, outcome), one per correction."""
    for battle in battles:
        for side in battle["sides"]:
            by_id = {m["id"]: m for m in side["messages"]}
            graded_replies = [m for m in side["messages"] if m["kind"] == "reply" and not m["superseded"]
                              and m["grader_label"] is not None]
            flags = recurrence_flags(m["grader_mistakes"] or () for m in graded_replies)
            recurring = {m["id"]: flag for m, flag in zip(graded_replies, flags, strict=True)}
            style = _correction_style(side["params"])
            for corr in side["corrections"]:
                faulty = by_id[corr["faulty_message_id"]]
                feedback = by_id[corr["feedback_message_id"]]
                following = by_id.get(corr["next_reply_message_id"] or -1)
                graded: Record = {} if following is None or following["grader_label"] is None else {
                    "id": following["id"], "label": following["grader_label"],
                    "mistakes": following["grader_mistakes"] or []}
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
                    "next_grader_label": graded.get("label"),
                    "grader_fixed": None if not graded else graded["label"] == FIXED_LABEL,
                    "regression": None if not graded else "regression" in graded["mistakes"],
                    "recurrence": None if not graded else recurring.get(graded["id"], False),
                    "correction_style": style,
                }


# --- flat tables (CSV) -----------------------------------------------------------------------------------


def flat_tables(chunk: Chunk) -> dict[str, pa.Table]:
    """The page as flat tables (``db.export.schema.TABLE_COLUMNS``); votes gain ``counted``."""
    tables = {name: getattr(chunk, name) for name in ("battles", "conversations", "messages", "corrections")}
    tables["votes"] = chunk.votes.append_column("counted", _counted(chunk.votes))
    return tables
