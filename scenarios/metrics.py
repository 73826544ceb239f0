"""Counts for the Fixing board from automatic runs (live or re-read with ``storage.load_runs``).

Plain counts per model (and per correction style), so the web app can hand them to ``ranking.fixing``
without ``scenarios`` importing ``ranking``. Which replies count, decided here:

* **corrections**: every correction of a run (dialogue and fixing protocols), judged by the grader;
  ``links`` are ``(faulty, followup, fixed)`` with ids unique over the records given, for turns-to-fix;
* **first tries**: the first model reply of a reliability or dialogue run (a fixing run starts from a
  scripted history); ``tasks`` groups a model's reliability attempts per arena run (attempt 0 starts a
  group), τ-bench's repeated trials of one task;
* **graded replies**: model replies (not scripted ones) graded in context, for the regression,
  recurrence and chatty rates.

With ``by_style`` the key is ``(model, style)``: a dialogue run's correction style, ``premade`` for the
fixing protocol's pre-made corrections; reliability runs (no corrections) count for every style's first
tries only when ``by_style`` is off.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from scenarios.grader import Mistake
from scenarios.records import RunRecord

PREMADE_STYLE = "premade"
_STRIDE = 1_000_000  # message ids in links: record number x stride + message index


@dataclass
class RunTotals:
    model: str
    style: str = ""
    fixed: int = 0
    judged: int = 0
    first_correct: int = 0
    first_attempts: int = 0
    tasks: list[tuple[int, int]] = field(default_factory=list)
    graded: int = 0
    regressions: int = 0
    recurrences: int = 0
    chatty: int = 0
    links: list[tuple[int, int, bool]] = field(default_factory=list)


def _style(record: RunRecord) -> str:
    return PREMADE_STYLE if record.protocol == "fixing" else record.style


def run_totals(records: Sequence[RunRecord], *, by_style: bool = False) -> list[RunTotals]:
    """Totals per model (or per model and style), in the order models first appear."""
    out: dict[tuple[str, str], RunTotals] = {}
    for number, record in enumerate(records):
        if by_style and record.protocol == "reliability":
            continue
        key = (record.model, _style(record) if by_style else "")
        totals = out.setdefault(key, RunTotals(model=key[0], style=key[1]))
        _add(totals, record, number)
    return list(out.values())


def _add(totals: RunTotals, record: RunRecord, number: int) -> None:
    for correction in record.corrections:
        fixed = correction.outcome == "fixed"
        totals.judged += 1
        totals.fixed += fixed
        totals.links.append((number * _STRIDE + correction.faulty, number * _STRIDE + correction.followup,
                             fixed))
    replies = [m for m in record.messages if m.kind == "reply" and not m.scripted]
    if record.protocol in ("reliability", "dialogue") and replies:
        first = replies[0].grade
        correct = first is not None and first.is_correct
        totals.first_attempts += 1
        totals.first_correct += correct
        if record.protocol == "reliability":
            if record.attempt == 0 or not totals.tasks:
                totals.tasks.append((0, 0))
            c, n = totals.tasks[-1]
            totals.tasks[-1] = (c + correct, n + 1)
    for reply in replies:
        context = reply.context
        if context is None or context.grade is None:
            continue
        totals.graded += 1
        totals.regressions += context.regression
        totals.recurrences += context.recurrence
        totals.chatty += Mistake.CHATTY in context.grade.mistakes
