"""The dataset card (``README.md``) written next to every export: what is in it, how it was filtered,
how many rows, every field with its type, what was done for privacy, and the licence note.

The first line is a marker comment: the export overwrites a ``README.md`` only when it carries that
marker, so exporting into a folder that already holds someone's README never destroys it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from db.export.schema import SCHEMAS, TABLE_COLUMNS

MARKER = "<!-- fixit-arena dataset card: written by python -m db export -->"
DEFAULT_LICENCE = "CC-BY-4.0"

VIEW_SUMMARY = {
    "battles": "one record per battle with both conversations nested (sides -> messages, corrections) "
               "and its vote",
    "preferences": "preference pairs from counted decisive votes (a|b): prompt = shared start of both "
                   "conversations, chosen / rejected = the rest of the winner's / loser's conversation",
    "corrections": "one row per correction: context before the faulty reply, the faulty reply, the "
                   "person's feedback, the reply that followed, and the judged outcome",
}

FIELD_NOTES = {
    "visitor": "salted hash of the visitor's anonymous id (null when the battle had no visitor)",
    "vote.counted": "true when the leaderboard counts the vote (not revealed before voting, not flagged)",
    "params": "sampling parameters as JSON text",
    "superseded": "a reply that was retried; kept for completeness, left out of the training views",
    "outcome": "fixed | not_fixed | unknown, judged by `person` or `grader`",
    "choice": "a | b | tie | both_bad",
    "created_at": "UTC timestamps throughout (ISO 8601 in JSONL/CSV)",
}


def _schema_lines(view: str, flat_csv: bool) -> list[str]:
    if flat_csv:
        return [f"- `{name}.csv`: " + ", ".join(f"`{c}`" for c in cols)
                for name, cols in TABLE_COLUMNS.items()]
    return [f"- `{field.name}`: `{field.type}`" for field in SCHEMAS[view]]


def render_card(
    *,
    fmt: str,
    view: str,
    files: Mapping[str, int],
    counts: Mapping[str, int],
    filters: Mapping[str, Any],
    licence: str = DEFAULT_LICENCE,
    generated_at: dt.datetime | None = None,
) -> str:
    """The card's Markdown. ``files`` maps each output file name to its row count."""
    when = (generated_at or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%d %H:%M UTC")
    flat_csv = fmt == "csv" and view == "battles"
    chosen = {k: v for k, v in filters.items() if v not in (None, False)}
    lines = [
        MARKER,
        "# Fixit Arena dataset export",
        "",
        "Dialogues between visitors and two anonymous language models, the short English corrections the",
        "visitors sent, whether each correction fixed the mistake, and which model the visitor preferred.",
        "",
        f"- Generated: {when} by `python -m db export --format {fmt}"
        + ("" if view == "battles" else f" --view {view}") + "`",
        f"- Content: {'flat tables, one CSV per table' if flat_csv else VIEW_SUMMARY[view]}",
        "- Filters: " + (", ".join(f"{k}={v}" for k, v in chosen.items()) if chosen else "none (everything)"),
        "",
        "## Files",
        "",
        "| file | rows |",
        "|---|---:|",
        *[f"| `{name}` | {rows:,} |" for name, rows in files.items()],
        "",
        "## Counts",
        "",
        *[f"- {name}: {value:,}" for name, value in counts.items()],
        "",
        "## Schema",
        "",
        *_schema_lines(view, flat_csv),
        "",
        "Notes:",
        *[f"- `{name}`: {note}" for name, note in FIELD_NOTES.items()],
        "",
        "## Privacy",
        "",
        "Visitors appear only as a salted HMAC-SHA256 hash of their anonymous browser id: stable across",
        "exports made with the same salt, meaningless without it. Network addresses (and their hashes) are",
        "never exported. Free text was typed by members of the public and may still contain anything they",
        "chose to write; flagged battles keep `status = flagged`.",
        "",
        "## Licence",
        "",
        f"Visitor-written text, corrections, outcomes and votes: {licence}. Model replies are outputs of the",
        "listed contestants and remain subject to each model's own licence and terms of use (e.g. the Gemma",
        "Terms of Use for Gemma models, Apache-2.0 for SmolLM2).",
        "",
    ]
    return "\n".join(lines)


def is_ours(text: str) -> bool:
    """Whether an existing README.md was written by the export (and may be replaced)."""
    return text.startswith(MARKER)
