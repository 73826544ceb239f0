"""Each side's Fixing figures rolled up into one ``side_stats`` row, so the Fixing board (and first-try
accuracy) is one scan of a narrow table whose rows grow with conversations, never a read of every reply
or correction with Python work per row.

A side's figures: current (not superseded) graded replies and those whose mistakes include
``regression`` or ``chatty``; recurrences (a reply repeating a mistake kind an earlier reply made and a
later one had cleared: the study's "20 24" back after its fix); the label of its first try; corrections
judged by the person and by the grader (the label of the reply that followed) and how many each found
fixed, and the 2x2 table where both judged; chains of corrections (a correction of the reply that
answered a correction continues that chain) by the turn that fixed them, per judge.

The two folds that follow a conversation live here and nowhere else: :func:`recurrence_flags` (the
export's ``recurrence`` column uses it too) and :func:`fix_chains` / :func:`turns_to_fix` (the web app
counts the automatic arena's chains with them; ``ranking.fixing`` takes the counts only).

:func:`refresh_side_stats` recomputes a side from its few rows in the transaction of every write that
changes them (``db.actions.battles``), with its per-kind rows (``side_kinds``, :mod:`db.boards.side_kinds`);
moderation updates the ``flagged`` copy; :func:`refill_side_stats` recomputes every side (migrations 0005
and 0010, bulk loaders).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, insert, inspect, select
from sqlalchemy.orm import Session

from db.boards.side_kinds import clear_side_kinds, kind_rows, side_kind_records, write_side_kinds
from db.models import SIDE_COUNTS, Battle, Conversation, Correction, Message, SideKind, SideStats


@dataclass(frozen=True, slots=True)
class ReplyRow:
    """What the roll-up reads of one reply, in conversation order."""

    id: int
    label: str | None
    mistakes: tuple[str, ...]
    superseded: bool
    first_try: bool


@dataclass(frozen=True, slots=True)
class CorrectionRow:
    """What the roll-up reads of one correction, oldest first."""

    faulty: int
    following: int | None
    outcome: str
    judged_by: str | None


def recurrence_flags(graded: Iterable[Sequence[str]]) -> list[bool]:
    """Per graded reply (in order), whether its mistake kinds meet one that was made before and cleared
    since (the export's ``recurrence`` column uses this too)."""
    seen: set[str] = set()
    gone: set[str] = set()
    flags: list[bool] = []
    for mistakes in graded:
        now = set(mistakes)
        flags.append(bool(now & gone))
        gone = (gone | (seen - now)) - now
        seen.update(now)
    return flags


def _recurring(graded: Iterable[Sequence[str]]) -> int:
    """Replies whose mistake kinds meet one that was made before and cleared since."""
    return sum(recurrence_flags(graded))


TURN_BUCKETS: tuple[str, ...] = ("1", "2", "3+", "never")  # corrections a mistake needed, or never fixed
Link = tuple[int, int, bool | None]  # (faulty reply, the reply that followed, fixed? None: unjudged)


def fix_chains(links: Sequence[Link]) -> list[int | None]:
    """Turns to fix per chain of corrections, from links ``(faulty reply, next reply, fixed)``.

    Links chain when a correction's faulty reply is the previous correction's next reply (the person
    corrected again). A chain ends at its first fixed link (its position, from 1) or, never fixed, at
    its end (None); an unjudged link ends it too, and a chain whose first link is unjudged is left out.
    """
    after = {faulty: (following, fixed) for faulty, following, fixed in links}
    continued = {following for _, following, _ in links}
    out: list[int | None] = []
    for start, _, _ in links:
        if start in continued:
            continue  # not the start of a chain
        position, reply, fixed_at, visited = 0, start, None, set()
        while reply in after and reply not in visited:
            visited.add(reply)
            reply, verdict = after[reply]
            if verdict is None:
                break
            position += 1
            if verdict:
                fixed_at = position
                break
        if position:
            out.append(fixed_at)
    return out


def turns_to_fix(links: Sequence[Link]) -> dict[str, int]:
    """The chains of :func:`fix_chains` by the turn that fixed them: ``TURN_BUCKETS`` → count."""
    counts = dict.fromkeys(TURN_BUCKETS, 0)
    for turns in fix_chains(links):
        counts["never" if turns is None else TURN_BUCKETS[min(turns, 3) - 1]] += 1
    return counts


_COLUMN_OF = {"1": "turns_1", "2": "turns_2", "3+": "turns_3", "never": "never"}  # bucket -> SideStats


def _buckets(prefix: str, links: Sequence[Link]) -> dict[str, int]:
    return {f"{prefix}_{_COLUMN_OF[bucket]}": n for bucket, n in turns_to_fix(links).items()}


def summarise(replies: Sequence[ReplyRow], corrections: Sequence[CorrectionRow]) -> dict[str, Any]:
    """One side's ``SIDE_COUNTS`` and ``first_try_label`` from its replies (position order) and its
    corrections (oldest first)."""
    graded = [r.mistakes for r in replies if r.label is not None and not r.superseded]
    label_of = {r.id: r.label for r in replies}
    person_links: list[Link] = []
    grader_links: list[Link] = []
    counts = dict.fromkeys(SIDE_COUNTS, 0)
    for c in corrections:
        person = c.outcome == "fixed" if c.judged_by == "person" and c.outcome != "unknown" else None
        next_label = label_of.get(c.following) if c.following is not None else None
        grader = None if next_label is None else next_label == "correct"
        if c.outcome != "unknown":
            counts["judged"] += 1
            counts["judged_fixed"] += c.outcome == "fixed"
        if person is not None:
            counts["person_judged"] += 1
            counts["person_fixed"] += person
        if grader is not None:
            counts["grader_judged"] += 1
            counts["grader_fixed"] += grader
        if person is not None and grader is not None:
            cell = ("both_fixed" if grader else "person_only_fixed") if person else (
                "grader_only_fixed" if grader else "neither_fixed")
            counts[cell] += 1
        if c.following is not None:
            person_links.append((c.faulty, c.following, person))
            grader_links.append((c.faulty, c.following, grader))
    counts.update(
        graded_replies=len(graded),
        regression_replies=sum("regression" in m for m in graded),
        recurrence_replies=_recurring(graded),
        chatty_replies=sum("chatty" in m for m in graded),
        **_buckets("person", person_links),
        **_buckets("grader", grader_links),
    )
    return {**counts, "first_try_label": next((r.label for r in replies if r.first_try), None)}


_REPLY_COLUMNS = (Message.conversation_id, Message.id, Message.grader_label, Message.grader_mistakes,
                  Message.superseded, Message.first_try)
_CORRECTION_COLUMNS = (Correction.conversation_id, Correction.faulty_message_id,
                       Correction.next_reply_message_id, Correction.outcome, Correction.judged_by)
_SIDE_COLUMNS = (Conversation.id, Conversation.battle_id, Conversation.contestant_id, Battle.mode,
                 Battle.scenario, Battle.created_at, Battle.status, Battle.closed_at)


def _reply(row: Any) -> ReplyRow:
    _, message_id, label, mistakes, superseded, first_try = row
    return ReplyRow(message_id, label, tuple(mistakes or ()), bool(superseded), bool(first_try))


def _correction(row: Any) -> CorrectionRow:
    _, faulty, following, outcome, judged_by = row
    return CorrectionRow(faulty, following, outcome, judged_by)


def _row(side: Any, replies: Sequence[ReplyRow], corrections: Sequence[CorrectionRow]) -> dict[str, Any]:
    conversation_id, battle_id, contestant_id, mode, scenario, started_at, status, closed_at = side
    return {"conversation_id": conversation_id, "battle_id": battle_id, "contestant_id": contestant_id,
            "mode": mode, "scenario": scenario, "started_at": started_at, "flagged": status == "flagged",
            "closed_at": closed_at,
            **summarise(replies, corrections)}


def refresh_side_stats(session: Session, conversation_id: int) -> None:
    """Recompute one side's row from its replies and corrections, in the caller's transaction."""
    session.flush()
    side = session.execute(
        select(*_SIDE_COLUMNS).join(Battle, Battle.id == Conversation.battle_id)
        .where(Conversation.id == conversation_id)
    ).one()
    replies = [_reply(r) for r in session.execute(
        select(*_REPLY_COLUMNS).where(Message.conversation_id == conversation_id, Message.kind == "reply")
        .order_by(Message.position))]
    corrections = [_correction(r) for r in session.execute(
        select(*_CORRECTION_COLUMNS).where(Correction.conversation_id == conversation_id)
        .order_by(Correction.id))]
    values = _row(side, replies, corrections)
    existing = session.get(SideStats, conversation_id)
    if existing is None:
        session.add(SideStats(**values))
    else:
        for name, value in values.items():
            setattr(existing, name, value)
    session.flush()
    write_side_kinds(session, conversation_id, kind_rows(replies, corrections))


def refill_side_stats(conn: Connection, *, chunk: int = 5_000) -> int:
    """Recompute every side's row and its per-kind rows (both tables are emptied first), ``chunk``
    conversations at a time. Returns the ``side_stats`` rows written."""
    # What the schema has now: migration 0005 runs this before 0006 adds ``closed_at`` (0006 fills it)
    # and before 0010 adds ``side_kinds`` (0010 runs it again).
    with_kinds = inspect(conn).has_table(SideKind.__tablename__)
    if with_kinds:
        clear_side_kinds(conn)
    conn.execute(delete(SideStats))
    table = SideStats.__table__
    present = {column["name"] for column in inspect(conn).get_columns(SideStats.__tablename__)}
    last = -1
    written = 0
    while True:
        sides = conn.execute(
            select(*_SIDE_COLUMNS).join(Battle, Battle.id == Conversation.battle_id)
            .where(Conversation.id > last).order_by(Conversation.id).limit(chunk)
        ).all()
        if not sides:
            return written
        low, high = sides[0][0], sides[-1][0]
        replies: dict[int, list[ReplyRow]] = {}
        for r in conn.execute(select(*_REPLY_COLUMNS).where(
                Message.conversation_id.between(low, high), Message.kind == "reply")
                .order_by(Message.conversation_id, Message.position)):
            replies.setdefault(r[0], []).append(_reply(r))
        corrections: dict[int, list[CorrectionRow]] = {}
        in_chunk = Correction.conversation_id.between(low, high)
        for c in conn.execute(select(*_CORRECTION_COLUMNS).where(in_chunk).order_by(Correction.id)):
            corrections.setdefault(c[0], []).append(_correction(c))
        built = [_row(side, replies.get(side[0], []), corrections.get(side[0], []))
                 for side in sides if side[0] in replies or side[0] in corrections]
        rows = [{name: value for name, value in row.items() if name in present} for row in built]
        if rows:
            conn.execute(insert(table), rows)  # type: ignore[arg-type]
            written += len(rows)
        if with_kinds:
            _insert_kinds(conn, [side[0] for side in sides], replies, corrections)
        last = high


def _insert_kinds(conn: Connection, sides: Sequence[int], replies: dict[int, list[ReplyRow]],
                  corrections: dict[int, list[CorrectionRow]]) -> None:
    """The ``side_kinds`` rows of a chunk of sides (those with corrections)."""
    records = [record for side in sides if side in corrections
               for record in side_kind_records(side, kind_rows(replies.get(side, []), corrections[side]))]
    if records:
        conn.execute(insert(SideKind), records)
