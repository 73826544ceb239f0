"""Fix rates per mistake kind: which mistakes a model fixes and which it does not.

A correction's kinds are the grader's mistakes of the reply it corrects (``wrong_year``, ``wrong_time``,
``chatty``, ``wrong_function``, …; a reply with no recognisable call is labelled ``garbage`` and counts
under the kind ``garbage`` too); a correction of a reply with two mistakes counts once for each. Every
source reads a roll-up kept on write, never the replies' JSON lists:

- ``people``: corrections in human battles the visitor judged (✓ fixed / ✗ not fixed);
- ``grader``: corrections in human battles whose next reply was graded (fixed: labelled ``correct``);
- ``auto``: the automatic arena's corrections (its runs and suites), judged by the grader;

  these three are one ``GROUP BY`` over ``side_kinds`` (:mod:`db.boards.side_kinds`) joined on its key to
  ``side_stats`` for the battle facts the filters read;
- ``replay``: replay's answers, fixed when the answer was: a read of ``replay_tallies``, which
  :func:`db.actions.replay.record_replay_result` adds to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Unpack

from sqlalchemy import Engine, Select, func, select

from db.checks import retry_read
from db.engine import read_session
from db.models import Contestant, ReplayTally, SideKind, SideStats
from db.vote_filters import HUMAN_MODES, BattleFilterArgs, VoteFilters

__all__ = ["KIND_SOURCES", "KindCounts", "fix_counts_by_kind"]

KindSource = Literal["people", "grader", "auto", "replay"]
KIND_SOURCES: tuple[KindSource, ...] = ("people", "grader", "auto", "replay")
_COLUMNS = {"people": ("person_fixed", "person_judged"), "grader": ("grader_fixed", "grader_judged"),
            "auto": ("judged_fixed", "judged")}  # source -> side_kinds' (fixed, judged) columns


@dataclass(frozen=True, slots=True)
class KindCounts:
    """One model's corrections of one mistake kind: how many were judged, and how many fixed."""

    model: str
    kind: str
    fixed: int
    judged: int


def _sides_query(source: KindSource, filters: VoteFilters) -> Select[int, str, int, int]:
    fixed, judged = (getattr(SideKind, name) for name in _COLUMNS[source])
    return (select(SideStats.contestant_id, SideKind.kind, func.sum(fixed), func.sum(judged))
            .join(SideStats, SideStats.conversation_id == SideKind.conversation_id)
            .where(judged > 0, *filters.side_conditions())
            .group_by(SideStats.contestant_id, SideKind.kind))


def _replay_query(scenario: str | None) -> Select[int, str, int, int]:
    query = (select(ReplayTally.contestant_id, ReplayTally.kind, func.sum(ReplayTally.fixed),
                    func.sum(ReplayTally.answered))
             .where(ReplayTally.answered > 0)
             .group_by(ReplayTally.contestant_id, ReplayTally.kind))
    return query if scenario is None else query.where(ReplayTally.scenario == scenario)


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
    query = _replay_query(chosen.scenario) if source == "replay" else _sides_query(source, chosen)
    with read_session(engine) as session:
        names = {cid: slug for cid, slug in session.execute(select(Contestant.id, Contestant.slug))}
        rows = session.execute(query).all()
    counts = [KindCounts(model=names[c], kind=str(kind), fixed=int(fixed or 0), judged=int(n))
              for c, kind, fixed, n in rows]
    return sorted(counts, key=lambda k: (k.model, k.kind))
