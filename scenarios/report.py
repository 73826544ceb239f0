"""The study's three emoji tables and a per-model summary, from run records (live or re-read from the DB)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from scenarios.base import Scenario
from scenarios.premade import PremadeCase
from scenarios.records import CHECK, FIRE, FIXED, MUSHROOM, PROTOCOLS, Cell, RunRecord, run_cells, tally

LEGEND = (
    "✓/✔︎ expected call · 🍄 a call with one or two mistakes · (🍄) a recurring mistake · "
    "🥦 fixed after a short English correction · 🔥 no recognisable call · 🔥🔥 three or more mistakes"
)


@dataclass
class Report:
    """Cells per model, in the order models first appear. A cell is a list of single symbols.

    ``dialogue`` rows are keyed by model, or by "model (style)" when the runs used several correction
    styles (``dialogue_model`` maps each row back to its model).
    """

    models: list[str] = field(default_factory=list)
    reliability: dict[str, Cell] = field(default_factory=dict)
    dialogue: dict[str, list[Cell]] = field(default_factory=dict)
    fixing: dict[str, dict[str, Cell]] = field(default_factory=dict)
    dialogue_model: dict[str, str] = field(default_factory=dict)

    def dialogue_rows(self, model: str) -> list[str]:
        return [row for row, owner in self.dialogue_model.items() if owner == model]

    def summary(self) -> dict[str, dict[str, int]]:
        """Per model: counts of ✔︎ 🥦 🍄 🔥 over all its cells."""
        out = {}
        for model in self.models:
            symbols = list(self.reliability.get(model, []))
            for row in self.dialogue_rows(model):
                for cell in self.dialogue[row]:
                    symbols += cell
            for cell in self.fixing.get(model, {}).values():
                symbols += cell
            out[model] = tally(symbols)
        return out

    def text(self) -> dict[str, dict[str, str]]:
        """Every cell as display text, keyed by model then column (for tests and JSON)."""
        out: dict[str, dict[str, str]] = {}
        for model in self.models:
            row = {"reliability": "".join(self.reliability.get(model, []))}
            for key in self.dialogue_rows(model):
                prefix = "turn" if key == model else f"{key[len(model):].strip(' ()')}:turn"
                row |= {f"{prefix}{n}": "".join(c) for n, c in enumerate(self.dialogue[key], start=1)}
            row |= {kind: "".join(c) for kind, c in self.fixing.get(model, {}).items()}
            out[model] = row
        return out


def latest_runs(records: Sequence[RunRecord]) -> list[RunRecord]:
    """Each model's latest run of each protocol: the records of the run (one ``scenarios run``) that
    wrote that (model, protocol)'s last record, in their order. Records stored before runs had ids share
    the id "" and count as one run."""
    latest: dict[tuple[str, str], str] = {}
    for record in records:  # oldest first: a later record's run wins
        latest[(record.model, record.protocol)] = record.run
    return [r for r in records if latest[(r.model, r.protocol)] == r.run]


def build_report(records: Sequence[RunRecord], *, scenario: Scenario) -> Report:
    """Fold records into table cells; attempts are ordered by their ``attempt`` index."""
    records = [r for r in records if r.protocol in PROTOCOLS]  # suites have their own figures
    report = Report(models=list(dict.fromkeys(r.model for r in records)))
    order = {m: i for i, m in enumerate(report.models)}
    styles = {r.style for r in records if r.protocol == "dialogue"}
    for record in sorted(records, key=lambda r: (order[r.model], r.protocol, r.case, r.attempt)):
        cells = run_cells(record, scenario=scenario)
        if record.protocol == "reliability":
            report.reliability.setdefault(record.model, []).extend(cells[0])
        elif record.protocol == "dialogue":
            row = record.model if len(styles) <= 1 else f"{record.model} ({record.style or 'unknown'})"
            report.dialogue[row] = cells
            report.dialogue_model[row] = record.model
        else:
            report.fixing.setdefault(record.model, {}).setdefault(record.case, []).extend(cells[0])
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
        rows = [[m, "".join(report.reliability.get(m, []))] for m in report.models]
        lines += _table(["Model", "Attempts"], rows)
        lines.append("")
    if report.dialogue:
        turns = [str(n) for n in range(1, len(scenario.turns) + 1)]
        lines += ["## Full dialogue with automatic corrections", ""]
        rows = [[row, *("".join(c) for c in report.dialogue[row])]
                for m in report.models for row in report.dialogue_rows(m)]
        lines += _table(["Model", *turns], rows)
        lines.append("")
    if report.fixing:
        present = {k for cells in report.fixing.values() for k in cells}
        kinds = [c.kind for c in cases if c.kind in present] + sorted(present - {c.kind for c in cases})
        labels = {c.kind: c.label for c in cases}
        lines += ["## Fixing pre-made mistakes", ""]
        rows = [[m, *("".join(report.fixing.get(m, {}).get(k, [])) for k in kinds)] for m in report.models]
        lines += _table(["Model", *(labels.get(k, k) for k in kinds)], rows)
        lines.append("")
    lines += ["## Summary", ""]
    summary = report.summary()
    keys = (CHECK, FIXED, MUSHROOM, FIRE)
    lines += _table(["Model", *keys], [[m, *(str(summary[m][k]) for k in keys)] for m in report.models])
    return "\n".join(lines) + "\n"
