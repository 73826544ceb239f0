"""Arrow schemas of the export: the flat rows read per page, and the records written (nested, views).

Explicit schemas keep every output's types fixed: an empty export still has the right columns, and
a Parquet file's types never depend on which values the first page happened to hold.
"""

from __future__ import annotations

import pyarrow as pa

from db.boards.vote_features import STYLE_COLUMNS

TS = pa.timestamp("us", tz="UTC")
TURN = pa.struct([("role", pa.string()), ("content", pa.string())])
KIND_TURN = pa.struct([("role", pa.string()), ("kind", pa.string()), ("content", pa.string())])

MESSAGE_FIELDS: list[tuple[str, pa.DataType]] = [
    ("id", pa.int64()), ("position", pa.int32()), ("role", pa.string()), ("kind", pa.string()),
    ("content", pa.string()), ("created_at", TS), ("first_try", pa.bool_()), ("superseded", pa.bool_()),
    ("ttft_ms", pa.float64()), ("total_ms", pa.float64()), ("prompt_tokens", pa.int32()),
    ("completion_tokens", pa.int32()), ("finish_reason", pa.string()), ("error", pa.string()),
    ("grader_label", pa.string()), ("grader_mistakes", pa.list_(pa.string())),
    ("grader_notes", pa.list_(pa.string())),
]
CORRECTION_FIELDS: list[tuple[str, pa.DataType]] = [
    ("id", pa.int64()), ("faulty_message_id", pa.int64()), ("feedback_message_id", pa.int64()),
    ("next_reply_message_id", pa.int64()), ("outcome", pa.string()), ("judged_by", pa.string()),
    ("created_at", TS), ("judged_at", TS),
]
SIDE_FIELDS: list[tuple[str, pa.DataType]] = [
    ("side", pa.string()), ("contestant", pa.string()), ("contestant_name", pa.string()),
    ("family", pa.string()), ("system_prompt", pa.string()), ("params", pa.string()),
]
VOTE_FIELDS: list[tuple[str, pa.DataType]] = [
    ("choice", pa.string()), ("created_at", TS), ("visitor", pa.string()), ("revealed", pa.bool_()),
    ("flagged", pa.bool_()), ("with_corrections", pa.bool_()),
]
BATTLE_FIELDS: list[tuple[str, pa.DataType]] = [
    ("created_at", TS), ("updated_at", TS), ("closed_at", TS), ("mode", pa.string()),
    ("scenario", pa.string()), ("status", pa.string()), ("revealed_before_vote", pa.bool_()),
    ("revealed_at", TS), ("visitor", pa.string()), ("dialogue_id", pa.string()),
]

# Flat rows as read per page (and as written to the CSV tables; votes.csv adds ``counted``).
ROWS: dict[str, pa.Schema] = {
    "battles": pa.schema([("id", pa.string()), *BATTLE_FIELDS]),
    "conversations": pa.schema([("id", pa.int64()), ("battle_id", pa.string()), *SIDE_FIELDS]),
    "messages": pa.schema([("conversation_id", pa.int64()), *MESSAGE_FIELDS]),
    "corrections": pa.schema([
        CORRECTION_FIELDS[0], ("battle_id", pa.string()), ("conversation_id", pa.int64()),
        *CORRECTION_FIELDS[1:],
    ]),
    "votes": pa.schema([("battle_id", pa.string()), *VOTE_FIELDS]),
}
TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    name: (*schema.names, *(("counted",) if name == "votes" else ())) for name, schema in ROWS.items()
}

MESSAGE_TYPE = pa.struct(MESSAGE_FIELDS)
CORRECTION_TYPE = pa.struct(CORRECTION_FIELDS)
SIDE_TYPE = pa.struct([
    *SIDE_FIELDS, ("messages", pa.list_(MESSAGE_TYPE)), ("corrections", pa.list_(CORRECTION_TYPE)),
])
VOTE_TYPE = pa.struct([*VOTE_FIELDS, ("counted", pa.bool_())])

STYLE_FIELDS: list[tuple[str, pa.DataType]] = [
    (f"{name}_{side}", pa.float64()) for name in STYLE_COLUMNS for side in ("a", "b")
]

SCHEMAS: dict[str, pa.Schema] = {
    # One row per counted vote, as ``python -m ranking fit --battles`` reads it (see db.export.pairwise).
    "battles": pa.schema([
        ("model_a", pa.string()), ("model_b", pa.string()), ("winner", pa.string()), ("mode", pa.string()),
        ("scenario", pa.string()), ("tstamp", TS), *STYLE_FIELDS, ("battle_id", pa.string()),
        ("visitor", pa.string()), ("with_corrections", pa.bool_()),
    ]),
    "dialogues": pa.schema([
        ("battle_id", pa.string()), *BATTLE_FIELDS, ("vote", VOTE_TYPE), ("sides", pa.list_(SIDE_TYPE)),
    ]),
    "preferences": pa.schema([
        ("battle_id", pa.string()), ("scenario", pa.string()), ("mode", pa.string()), ("created_at", TS),
        ("visitor", pa.string()), ("prompt", pa.list_(TURN)), ("chosen", pa.list_(TURN)),
        ("rejected", pa.list_(TURN)), ("chosen_model", pa.string()), ("rejected_model", pa.string()),
        ("with_corrections", pa.bool_()),
    ]),
    "corrections": pa.schema([
        ("battle_id", pa.string()), ("correction_id", pa.int64()), ("scenario", pa.string()),
        ("mode", pa.string()), ("side", pa.string()), ("model", pa.string()), ("created_at", TS),
        ("context", pa.list_(TURN)), ("faulty_reply", pa.string()), ("feedback", pa.string()),
        ("next_reply", pa.string()), ("outcome", pa.string()), ("judged_by", pa.string()),
        ("faulty_grader_label", pa.string()), ("next_grader_label", pa.string()),
        ("grader_fixed", pa.bool_()), ("regression", pa.bool_()), ("recurrence", pa.bool_()),
        ("correction_style", pa.string()),
    ]),
    # One row per correction event of a battle that counts: a test for any model (db.export.replay).
    "replay": pa.schema([
        ("version", pa.int32()), ("id", pa.int64()), ("battle_id", pa.string()), ("scenario", pa.string()),
        ("mode", pa.string()), ("created_at", TS), ("closed_at", TS), ("dialogue", pa.string()),
        ("system_prompt", pa.string()), ("history", pa.list_(KIND_TURN)), ("faulty_reply", pa.string()),
        ("correction", pa.string()), ("model", pa.string()), ("person_verdict", pa.string()),
        ("grader_fixed", pa.bool_()),
    ]),
    # Two models' answers to one correction as a battle row (db.export.replay_pairs).
    "replay_pairs": pa.schema([
        ("model_a", pa.string()), ("model_b", pa.string()), ("winner", pa.string()), ("source", pa.string()),
        ("scenario", pa.string()), ("tstamp", TS), ("item", pa.int64()),
    ]),
}
