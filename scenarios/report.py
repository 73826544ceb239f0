"""The study's three emoji tables and a per-model summary, from run records (live or re-read from the DB)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from scenarios.base import Scenario
from scenarios.premade import PremadeCase
from scenarios.records import CHECK, FIRE, FIXED, MUSHROOM, RunRecord, run_symbols, tally

LEGEND = (
    "✓/✔︎ expected call · 🍄 a call with one or two mistakes · (🍄) a recurring mistake · "
    "🥦 fixed after a short English correction · 🔥 no recognisable call · 🔥🔥 three or more mistakes"
)


@dataclass
class Report:
    """Cells per model, in the order models first appear. Every cell is a string of emoji."""

    models: list[str] = field(default_factory=list)
    reliability: dict[str, str] = field(default_factory=dict)
    dialogue: dict[str, list[str]] = field(default_factory=dict)
    fixing: dict[str, dict[str, str]] = field(default_factory=dict)

    def summary(self) -> dict[str, dict[str, int]]:
        """Per model: counts of ✔︎ 🥦 🍄 🔥 over all its cells."""
        out = {}
        for model in self.models:
            cells = [self.reliability.get(model, "")]
            cells += self.dialogue.get(model, [])
            cells += list(self.fixing.get(model, {}).values())
            out[model] = tally(cells)
        return out


def build_report(records: Sequence[RunRecord], *, scenario: Scenario) -> Report:
    """Fold records into table cells; attempts are ordered by their ``attempt`` index."""
    report = Report(models=list(dict.fromkeys(r.model for r in records)))
    order = {m: i for i, m in enumerate(report.models)}
    for record in sorted(records, key=lambda r: (order[r.model], r.protocol, r.case, r.attempt)):
        symbols = run_symbols(record, scenario=scenario)
        if record.protocol == "reliability":
            report.reliability[record.model] = report.reliability.get(record.model, "") + symbols[0]
        elif record.protocol == "dialogue":
            report.dialogue[record.model] = symbols
        else:
            cases = report.fixing.setdefault(record.model, {})
            cases[record.case] = cases.get(record.case, "") + symbols[0]
    return report


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell or " " for cell in row) + " |" for row in rows]
    return lines


def render_markdown(report: Report, *, scenario: Scenario, cases: Sequence[PremadeCase] = (),
                    title: str = "Automatic arena") -> str:
    """The report as Markdown: only the tables whose protocol ran, then the summary."""
    lines = [f"# {title}: {scenario.title}", "", LEGEND, ""]
    if report.reliability:
        lines += ["## Reliability (first question, fresh attempts)", ""]
        lines += _table(["Model", "Attempts"], [[m, report.reliability.get(m, "")] for m in report.models])
        lines.append("")
    if report.dialogue:
        turns = [str(n) for n in range(1, len(scenario.turns) + 1)]
        lines += ["## Full dialogue with automatic corrections", ""]
        rows = [[m, *report.dialogue.get(m, [""] * len(turns))] for m in report.models]
        lines += _table(["Model", *turns], rows)
        lines.append("")
    if report.fixing:
        present = {k for cells in report.fixing.values() for k in cells}
        kinds = [c.kind for c in cases if c.kind in present] + sorted(present - {c.kind for c in cases})
        labels = {c.kind: c.label for c in cases}
        lines += ["## Fixing pre-made mistakes", ""]
        rows = [[m, *(report.fixing.get(m, {}).get(k, "") for k in kinds)] for m in report.models]
        lines += _table(["Model", *(labels.get(k, k) for k in kinds)], rows)
        lines.append("")
    lines += ["## Summary", ""]
    summary = report.summary()
    keys = (CHECK, FIXED, MUSHROOM, FIRE)
    lines += _table(["Model", *keys], [[m, *(str(summary[m][k]) for k in keys)] for m in report.models])
    return "\n".join(lines) + "\n"
