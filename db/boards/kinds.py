"""Fix rates per mistake kind: which mistakes a model fixes and which it does not.

A correction's kinds are the grader's mistakes of the reply it corrects (``messages.grader_mistakes``:
``wrong_year``, ``wrong_time``, ``chatty``, ``wrong_function``, …; a reply with no recognisable call is
labelled ``garbage`` and lists none: its kind is ``garbage``); a correction of a reply with two mistakes
counts once for each. One ``GROUP BY`` per source, the JSON list unnested by the database
(SQLite's ``json_each``, PostgreSQL's ``json_array_elements_text``):

- ``people``: corrections in human battles the visitor judged (✓ fixed / ✗ not fixed);
- ``grader``: corrections in human battles whose next reply was graded (fixed: labelled ``correct``);
- ``auto``: the automatic arena's corrections (its runs and suites), judged by the grader;
- ``replay``: replay's answers (``replay_results``), fixed when the answer was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Unpack

from sqlalchemy import ColumnElement, Engine, Select, and_, case, cast, func, literal, select, true
from sqlalchemy.dialects.postgresql import JSON as PG_JSON
from sqlalchemy.orm import aliased

from db.boards.fixing import FIXED_LABEL
from db.checks import retry_read
from db.engine import read_session
from db.models import Battle, Contestant, Conversation, Correction, Message, ReplayResult
from db.vote_filters import HUMAN_MODES, BattleFilterArgs, VoteFilters

__all__ = ["KIND_SOURCES", "KindCounts", "fix_counts_by_kind"]

KindSource = Literal["people", "grader", "auto", "replay"]
KIND_SOURCES: tuple[KindSource, ...] = ("people", "grader", "auto", "replay")
GARBAGE = "garbage"  # the kind of a reply with no recognisable call (its label; it lists no mistake)


@dataclass(frozen=True, slots=True)
class KindCounts:
    """One model's corrections of one mistake kind: how many were judged, and how many fixed."""

    model: str
    kind: str
    fixed: int
    judged: int


def _kinds(dialect: str, mistakes: Any) -> Any:
    """The faulty reply's mistakes as rows of a ``value`` column (nothing for a null or non-list)."""
    if dialect == "postgresql":
        as_json = cast(mistakes, PG_JSON)
        listed = case((func.json_typeof(as_json) == "array", as_json), else_=cast(literal("[]"), PG_JSON))
        return func.json_array_elements_text(listed).table_valued("value").alias("kinds")
    return func.json_each(mistakes).table_valued("value").alias("kinds")


def _query(source: KindSource, dialect: str, filters: VoteFilters, *, garbage: bool) -> Select[Any]:
    """The ``GROUP BY`` of one source: by the faulty reply's listed mistakes, or (``garbage``) over the
    faulty replies with no recognisable call, which list no mistake and count as the kind ``garbage``."""
    faulty, following = aliased(Message), aliased(Message)
    kinds = _kinds(dialect, faulty.grader_mistakes)
    kind: Any = literal(GARBAGE) if garbage else kinds.c.value
    if source == "replay":
        fixed: ColumnElement[bool] = ReplayResult.outcome == "fixed"
        who: Any = ReplayResult.contestant_id
        base = (select(who, kind, func.sum(case((fixed, 1), else_=0)), func.count())
                .select_from(ReplayResult)
                .join(Correction, Correction.id == ReplayResult.correction_id)
                .join(Battle, Battle.id == Correction.battle_id))
        if filters.scenario is not None:
            base = base.where(ReplayResult.scenario == filters.scenario)
    else:
        judged: ColumnElement[bool]
        if source == "grader":
            fixed, judged = following.grader_label == FIXED_LABEL, following.grader_label.is_not(None)
        elif source == "people":
            fixed = Correction.outcome == "fixed"
            judged = and_(Correction.judged_by == "person", Correction.outcome.in_(("fixed", "not_fixed")))
        else:
            fixed, judged = Correction.outcome == "fixed", Correction.outcome.in_(("fixed", "not_fixed"))
        who = Conversation.contestant_id
        base = (select(who, kind, func.sum(case((fixed, 1), else_=0)), func.count())
                .select_from(Correction)
                .join(Conversation, Conversation.id == Correction.conversation_id)
                .join(Battle, Battle.id == Correction.battle_id)
                .outerjoin(following, following.id == Correction.next_reply_message_id)
                .where(judged, *filters.battle_conditions()))
    base = base.join(faulty, faulty.id == Correction.faulty_message_id)
    if garbage:
        return base.where(faulty.grader_label == "garbage").group_by(who)
    return base.join(kinds, true()).where(kinds.c.value.is_not(None)).group_by(who, kinds.c.value)


@retry_read
def fix_counts_by_kind(engine: Engine, *, source: KindSource,
                       **filters: Unpack[BattleFilterArgs]) -> list[KindCounts]:
    """Per model and mistake kind, corrections judged and fixed by ``source`` (see the module docstring),
    sorted by model then kind. ``people`` and ``grader`` count every human mode, ``auto`` the automatic
    arena's battles, whatever ``modes`` says; ``replay`` reads only the scenario filter."""
    if source not in KIND_SOURCES:
        raise ValueError(f"unknown source {source!r}; expected one of {', '.join(KIND_SOURCES)}")
    modes = ("auto",) if source == "auto" else HUMAN_MODES
    chosen = VoteFilters.of({**filters, "modes": modes})
    with read_session(engine) as session:
        names = {cid: slug for cid, slug in session.execute(select(Contestant.id, Contestant.slug))}
        rows = [row for garbage in (False, True)
                for row in session.execute(_query(source, engine.dialect.name, chosen, garbage=garbage))]
    counts = [KindCounts(model=names[c], kind=str(kind), fixed=int(fixed or 0), judged=int(n))
              for c, kind, fixed, n in rows]
    return sorted(counts, key=lambda k: (k.model, k.kind))
