"""What every exported column means: the dataset card's column reference, one entry per column path.

Paths are dotted through nested fields (``sides.messages.grader_label``); a flat CSV table's columns
are ``<table>.csv:<column>``. :func:`column_docs` resolves a path against the view's own entries,
then the shared ones by full path, then by the last name; ``tests/db/test_export_card.py`` fails
when any column of any view or table has no entry.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from db.boards.vote_features import STYLE_COLUMNS, STYLE_NOTES
from db.export.categories import ERROR_CATEGORIES
from db.export.schema import SCHEMAS, TABLE_COLUMNS
from db.models import GRADER_LABELS, MODES

_LABELS = " | ".join(GRADER_LABELS)
_STYLE = {f"{name}_{side}": f"style feature of side {side}: {note}; null when the side has no current reply"
          for name in STYLE_COLUMNS for side in ("a", "b") for note in (STYLE_NOTES[name],)}

SHARED: dict[str, str] = {
    "battle_id": "the battle's UUID (joins every view and table)",
    "id": "row id in its table",
    "created_at": "when the row was written (UTC; ISO 8601 in JSONL/CSV)",
    "updated_at": "last change of the battle (UTC)",
    "closed_at": "when the battle was closed by a vote, a skip or expiry (UTC; null while open)",
    "mode": " | ".join(MODES) + " (anonymous: identities hidden until the vote; named: shown; direct: "
            "one model; auto: the automatic arena replaying the scenario)",
    "scenario": "scenario slug (e.g. `calendar`, the founding study's calendar API task)",
    "status": "open | voted | abandoned | flagged (flagged: only in the operator's export, never in the "
              "public download)",
    "revealed_before_vote": "identities were shown before the vote (such a vote is stored, not counted)",
    "revealed_at": "when identities were shown (UTC)",
    "visitor": "salted hash of the visitor's anonymous id (null when none)",
    "dialogue_id": "the generated dialogue both sides played (`python -m scenarios generate` prints it: "
                   "`<scenario>-<seed>-<index>`; its turns are regenerated from that id); null for free chat "
                   "and older battles (graded against the scenario's reference dialogue)",
    "with_corrections": "at least one correction was sent in the battle before its vote",
    "side": "a | b",
    "contestant": "model slug", "contestant_name": "model display name", "family": "model family",
    "model": "model slug",
    "system_prompt": "the system prompt the side ran with",
    "params": "sampling parameters as JSON text; automatic arena runs add `auto` (protocol, attempt, "
              "case, correction style, reply turns, and a suite's `dialogue`: id, seed and turns)",
    "conversation_id": "the side (conversation) the row belongs to",
    "position": "0-based order within the conversation",
    "role": "user | assistant", "content": "the message text",
    "kind": "request | correction | reply",
    "first_try": "the side's first reply to the first request (first-try accuracy counts these)",
    "superseded": "a reply that was retried; kept for completeness, left out of the training views",
    "ttft_ms": "time to first token (ms)", "total_ms": "total generation time (ms)",
    "prompt_tokens": "prompt length in tokens", "completion_tokens": "reply length in tokens",
    "finish_reason": "why generation stopped (stop | length | error ...)",
    "error": "why the reply failed, as a category only (null when it did not): "
             + " | ".join(ERROR_CATEGORIES) + "; the engine's own error text is never exported",
    "grader_label": f"{_LABELS}: the grader's label, graded in the dialogue's context (a fact the dialogue "
                    "had not given yet, e.g. turn 1's year, is an assumption, not a mistake)",
    "grader_mistakes": "the typed mistakes found (e.g. wrong_year, missing_argument, chatty; `regression`: "
                       "an earlier right entry broken or removed; `double_booking`)",
    "grader_notes": "the same mistakes in words, as the visitor read them under the reply (\"missing "
                    "duration: the default is 30 minutes\"; an assumed value is said as such); null for "
                    "replies graded before 2026-12-06 and for ungraded ones",
    "faulty_message_id": "the reply the correction points at",
    "feedback_message_id": "the correction message itself",
    "next_reply_message_id": "the reply that followed the correction (null if none yet)",
    "outcome": "fixed | not_fixed | unknown, as judged by `judged_by`",
    "judged_by": "person | grader (null while unjudged)",
    "judged_at": "when the outcome was judged (UTC)",
    "choice": "a | b | tie | both_bad",
    "revealed": "the vote was cast after identities were shown (not counted)",
    "flagged": "the battle was flagged by moderation (not counted)",
    "counted": "the leaderboard counts the vote (not revealed before it, not flagged)",
    "vote": "the battle's vote (null when none)",
    "sides": "both conversations of the battle (one for direct and auto battles)",
    "messages": "the side's messages in order", "corrections": "the side's corrections in order",
}

VIEW_DOCS: dict[str, dict[str, str]] = {
    "battles.csv": {"id": "the battle's UUID"},
    "battles": {
        "model_a": "side a's model slug", "model_b": "side b's model slug",
        "winner": "a | b | tie | both_bad (the vote; `ranking fit` also reads Chatbot Arena's spellings)",
        "tstamp": "when the vote was cast (UTC)",
        **_STYLE,
    },
    "preferences": {
        "created_at": "when the vote was cast (UTC)",
        "prompt": "shared start of both conversations (system prompt included) as turns",
        "prompt.role": "system | user | assistant", "prompt.content": "turn text",
        "chosen": "the rest of the winner's conversation", "chosen.role": "user | assistant",
        "chosen.content": "turn text",
        "rejected": "the rest of the loser's conversation", "rejected.role": "user | assistant",
        "rejected.content": "turn text",
        "chosen_model": "the winner's model slug", "rejected_model": "the loser's model slug",
    },
    "corrections": {
        "correction_id": "the correction's id",
        "context": "system prompt and the standing messages before the faulty reply",
        "context.role": "system | user | assistant", "context.content": "turn text",
        "faulty_reply": "the reply that was corrected", "feedback": "the correction's text",
        "next_reply": "the reply that followed (null if the model never answered)",
        "faulty_grader_label": f"grader's label of the faulty reply ({_LABELS})",
        "next_grader_label": f"grader's label of the reply that followed ({_LABELS})",
        "grader_fixed": "the grader's verdict: the reply that followed is labelled `correct` "
                        "(null: not graded)",
        "regression": "the reply that followed broke or removed an earlier right entry (null: not graded)",
        "recurrence": "the reply that followed repeats a mistake kind the side had made and since cleared "
                      "(the study's recurring mistake; null: not graded)",
        "correction_style": "automatic arena: how the correction was written (fix: names the fix, as a "
                            "person would; hint: the terse hint); null for people's corrections",
    },
    "replay_pairs": {
        "model_a": "one model that answered the correction (replay)",
        "model_b": "the other model that answered it",
        "winner": "a: model_a fixed it and model_b did not; b: the reverse; tie: both fixed it, or neither",
        "source": "replay (the `source` column `python -m ranking fit --composite` weighs)",
        "tstamp": "when the person sent the correction (UTC)",
        "item": "the correction's id (the replay view's `id`)",
    },
    "replay": {
        "version": "the replay file's format version (`python -m scenarios replay --from` refuses another)",
        "id": "the correction's id: the item's id, and what replay results link to",
        "created_at": "when the correction was sent (UTC)",
        "dialogue": "the generated dialogue the battle played, as JSON text (`id`, `scenario`, `seed`, "
                    "`turns`: what the grader needs to follow it); null: the scenario's reference dialogue",
        "system_prompt": "the system prompt the side's model received",
        "history": "the standing messages up to and including the faulty reply, then the correction: "
                   "what a model is asked to answer",
        "history.role": "user | assistant", "history.kind": "request | correction | reply",
        "history.content": "message text",
        "faulty_reply": "the reply that was corrected (the history's second-last message)",
        "correction": "the person's correction (the history's last message)",
        "model": "slug of the model that made the mistake",
        "person_verdict": "fixed | not_fixed: the person's verdict on the reply that followed; null when "
                          "the person did not judge it",
        "grader_fixed": "the grader's verdict on the reply that followed: labelled `correct` (null: not "
                        "graded, or no reply followed)",
    },
}


def paths(fields: pa.Schema | list[pa.Field], prefix: str = "") -> Iterator[tuple[str, pa.DataType]]:
    """Every column path of a schema, nested fields included (lists of structs are walked into)."""
    for field in fields:
        path = f"{prefix}{field.name}"
        yield path, field.type
        inner = field.type.value_type if pa.types.is_list(field.type) else field.type
        if pa.types.is_struct(inner):
            yield from paths(list(inner), prefix=f"{path}.")


def describe(view: str, path: str) -> str | None:
    """The entry for a column path of ``view`` (a view name or ``<table>.csv``), or None."""
    own = VIEW_DOCS.get(view, {})
    leaf = path.rsplit(".", 1)[-1]
    return own.get(path) or SHARED.get(path) or own.get(leaf) or SHARED.get(leaf)


def column_docs(view: str, *, flat_csv: bool = False) -> list[tuple[str, str, str | None]]:
    """``(column, type, meaning)`` for every column the export of ``view`` writes."""
    if flat_csv:
        return [(f"{table}.csv:{column}", "", describe(f"{table}.csv", column))
                for table, columns in TABLE_COLUMNS.items() for column in columns]
    return [(path, str(typ), describe(view, path)) for path, typ in paths(SCHEMAS[view])]
