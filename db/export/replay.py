"""The ``replay`` view: every correction a person wrote, as a test any model can take.

One record per correction event of a battle that counts (closed, not flagged, a human mode: anonymous,
named or direct), whatever the filters say about modes and flags. A record holds what a model needs to
be asked again and what a grader needs to judge its answer:

``version`` (:data:`REPLAY_VERSION`), ``id`` (the correction's id), ``battle_id``, ``scenario``,
``mode``, ``created_at`` (the correction's), ``closed_at`` (the battle's), ``dialogue`` (the generated
dialogue the battle played, as JSON text as ``python -m scenarios generate`` prints it less the system
prompt; null: the scenario's reference dialogue), ``system_prompt``, ``history`` (every standing message
up to and including the faulty reply, then the correction, as ``{role, kind, content}``), ``faulty_reply``
and ``correction`` (the last two of ``history``, for reading), ``model`` (the contestant that made the
mistake), ``person_verdict`` (``fixed`` / ``not_fixed`` when the person judged it, else null) and
``grader_fixed`` (whether the grader labelled the original next reply correct; null when ungraded).

``python -m scenarios replay --from FILE`` reads this file back; nothing else of the project is needed
to take the test but the grader and an endpoint.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
from sqlalchemy import Engine, Text, cast, select

from db.boards.fixing import FIXED_LABEL
from db.export.filters import ExportError
from db.export.read import DEFAULT_CHUNK_SIZE, Chunk, iter_chunks, listed, snapshot
from db.export.records import Record, battle_table
from db.export.schema import SCHEMAS
from db.export.source import Source
from db.models import Battle
from db.vote_filters import HUMAN_MODES, VoteFilters

REPLAY_VERSION = 1
REPLAY_SCHEMA = SCHEMAS["replay"]
REPLAY_FIELDS = tuple(REPLAY_SCHEMA.names)


def replay_filters(filters: VoteFilters) -> VoteFilters:
    """``filters`` narrowed to the battles that count: human modes only, never open, never flagged.
    :class:`ExportError` when the modes asked for leave none (``--mode auto``)."""
    modes = tuple(m for m in (filters.modes or HUMAN_MODES) if m in HUMAN_MODES)
    if not modes:
        raise ExportError(f"the replay view holds human battles only ({', '.join(HUMAN_MODES)})")
    return dataclasses.replace(filters, modes=modes, include_open=False, exclude_flagged=True)


def replay_pages(src: Source, *, filters: VoteFilters, salt: str,
                 chunk_size: int = DEFAULT_CHUNK_SIZE) -> Iterator[pa.Table]:
    """The replay records of the battles ``filters`` select (narrowed by :func:`replay_filters`), one
    table of :data:`REPLAY_SCHEMA` per page of battles."""
    for chunk in iter_chunks(src, filters=replay_filters(filters), salt=salt, chunk_size=chunk_size):
        dialogues = _dialogues(src, chunk)
        records = list(replay_records(battle_table(chunk).to_pylist(), dialogues))
        yield pa.Table.from_pylist(records, schema=REPLAY_SCHEMA)


def _dialogues(src: Source, chunk: Chunk) -> dict[str, str | None]:
    """Each battle's stored dialogue as JSON text (None: none stored)."""
    ids = chunk.battles.column("id").to_pylist()
    if not ids:
        return {}
    query: Any = select(Battle.id, cast(Battle.dialogue, Text)).where(Battle.id.in_(listed(src, ids)))
    rows = src.rows(query)
    return {str(bid): (None if text in (None, "null") else str(text)) for bid, text in rows}


def replay_records(battles: list[Record], dialogues: dict[str, str | None]) -> Iterator[Record]:
    """One replay record per correction of the battles that count (see the module docstring)."""
    for battle in battles:
        if battle["mode"] not in HUMAN_MODES or battle["status"] in ("open", "flagged"):
            continue
        for side in battle["sides"]:
            yield from _side_records(battle, side, dialogues.get(battle["battle_id"]))


def _side_records(battle: Record, side: Record, dialogue: str | None) -> Iterator[Record]:
    by_id = {m["id"]: m for m in side["messages"]}
    for corr in side["corrections"]:
        faulty, feedback = by_id[corr["faulty_message_id"]], by_id[corr["feedback_message_id"]]
        following = by_id.get(corr["next_reply_message_id"] or -1)
        history = [_turn(m) for m in side["messages"]
                   if m["position"] < faulty["position"] and not m["superseded"]]
        history += [_turn(faulty), _turn(feedback)]
        judged = corr["judged_by"] == "person" and corr["outcome"] in ("fixed", "not_fixed")
        label = following["grader_label"] if following is not None else None
        yield {
            "version": REPLAY_VERSION, "id": corr["id"], "battle_id": battle["battle_id"],
            "scenario": battle["scenario"], "mode": battle["mode"], "created_at": corr["created_at"],
            "closed_at": battle["closed_at"], "dialogue": dialogue, "system_prompt": side["system_prompt"],
            "history": history, "faulty_reply": faulty["content"], "correction": feedback["content"],
            "model": side["contestant"], "person_verdict": corr["outcome"] if judged else None,
            "grader_fixed": None if label is None else label == FIXED_LABEL,
        }


def _turn(message: Record) -> dict[str, str]:
    return {"role": message["role"], "kind": message["kind"], "content": message["content"]}


def pages_reader(*, filters: VoteFilters, salt: str, chunk_size: int = DEFAULT_CHUNK_SIZE
                 ) -> Callable[[Source], Iterator[pa.Table]]:
    """What :func:`db.export.read.read_ahead` runs for the replay view."""
    return lambda src: replay_pages(src, filters=filters, salt=salt, chunk_size=chunk_size)


def replay_items(engine: Engine, *, filters: VoteFilters,
                 chunk_size: int = DEFAULT_CHUNK_SIZE) -> list[Record]:
    """Every replay record ``filters`` select (narrowed by :func:`replay_filters`), oldest battle first,
    read in one snapshot: what ``python -m scenarios replay`` replays from the database."""
    salt = secrets.token_hex(16)  # a replay record names no visitor; the page reader wants a salt anyway
    with snapshot(engine) as src:
        return [record for page in replay_pages(src, filters=filters, salt=salt, chunk_size=chunk_size)
                for record in page.to_pylist()]
