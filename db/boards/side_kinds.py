"""Each side's corrections per mistake kind, rolled up into ``side_kinds`` rows beside its ``side_stats``
row, so the per-kind Fixing table is one ``GROUP BY`` over a narrow table joined on its key, never an
unnesting of every faulty reply's JSON list at read time.

A correction's kinds are the grader's mistakes of the reply it corrects (``wrong_year``, ``chatty``, …;
a reply labelled ``garbage`` has no recognisable call: it counts under ``garbage`` too); a correction of
a reply with two mistakes counts once for each. Per kind, as ``side_stats`` counts per
judge: corrections with a stored outcome (``judged``; the automatic arena's), those the person judged,
and those whose next reply the grader labelled (fixed: ``correct``).

:func:`kind_rows` is the fold; ``db.boards.reply_stats`` calls :func:`write_side_kinds` wherever it
rewrites a side, so both roll-ups change in one transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from sqlalchemy import Connection, delete, insert
from sqlalchemy.orm import Session

from db.models import KIND_CHARS, KIND_COUNTS, SideKind

__all__ = ["GARBAGE", "kind_rows", "kinds_of", "write_side_kinds"]

GARBAGE = "garbage"  # the kind of a reply with no recognisable call (its label; it lists no mistake)


class Reply(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def label(self) -> str | None: ...
    @property
    def mistakes(self) -> tuple[str, ...]: ...


class Fix(Protocol):
    @property
    def faulty(self) -> int: ...
    @property
    def following(self) -> int | None: ...
    @property
    def outcome(self) -> str: ...
    @property
    def judged_by(self) -> str | None: ...


def kinds_of(label: str | None, mistakes: Iterable[str] | None) -> tuple[str, ...]:
    """The mistake kinds a correction of a reply with this grader label and mistake list counts under:
    each listed mistake once (cut to the column), and ``garbage`` for a reply with no recognisable call."""
    listed = [str(kind)[:KIND_CHARS] for kind in (mistakes or ()) if kind is not None]
    if label == GARBAGE:
        listed.append(GARBAGE)
    return tuple(dict.fromkeys(listed))


def _verdicts(fix: Fix, labels: Mapping[int, str | None]) -> dict[str, bool | None]:
    """Per judge of ``KIND_COUNTS``, whether the correction fixed its reply (None: not judged)."""
    stored = fix.outcome in ("fixed", "not_fixed")
    following = labels.get(fix.following) if fix.following is not None else None
    return {
        "judged": fix.outcome == "fixed" if stored else None,
        "person": fix.outcome == "fixed" if stored and fix.judged_by == "person" else None,
        "grader": None if following is None else following == "correct",
    }


def kind_rows(replies: Sequence[Reply], corrections: Sequence[Fix]) -> dict[str, dict[str, int]]:
    """One side's counts per mistake kind (kinds with no judged correction are left out)."""
    by_id = {reply.id: reply for reply in replies}
    labels = {reply.id: reply.label for reply in replies}
    rows: dict[str, dict[str, int]] = {}
    for fix in corrections:
        faulty = by_id.get(fix.faulty)
        if faulty is None:
            continue
        verdicts = _verdicts(fix, labels)
        if all(v is None for v in verdicts.values()):
            continue
        for kind in kinds_of(faulty.label, faulty.mistakes):
            row = rows.setdefault(kind, dict.fromkeys(KIND_COUNTS, 0))
            for judge, verdict in verdicts.items():
                if verdict is not None:
                    row["judged" if judge == "judged" else f"{judge}_judged"] += 1
                    row["judged_fixed" if judge == "judged" else f"{judge}_fixed"] += verdict
    return rows


def side_kind_records(conversation_id: int, rows: Mapping[str, Mapping[str, int]]) -> list[dict[str, Any]]:
    """``side_kinds`` rows of one side, ready for a bulk insert."""
    return [{"conversation_id": conversation_id, "kind": kind, **counts} for kind, counts in rows.items()]


def write_side_kinds(session: Session, conversation_id: int, rows: Mapping[str, Mapping[str, int]]) -> None:
    """Replace one side's ``side_kinds`` rows, in the caller's transaction."""
    session.execute(delete(SideKind).where(SideKind.conversation_id == conversation_id))
    records = side_kind_records(conversation_id, rows)
    if records:
        session.execute(insert(SideKind), records)


def clear_side_kinds(conn: Connection) -> None:
    """Empty the table (a full refill follows)."""
    conn.execute(delete(SideKind))
