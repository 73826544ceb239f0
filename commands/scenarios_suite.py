"""``python -m scenarios run S --dialogues N``: a fixing suite per model, its figures with intervals.

The runner is :mod:`scenarios.suite`; each finished run is stored as an ``auto`` battle (unless
``--no-store``) as soon as it ends, so a model that fails mid-suite leaves its finished dialogues stored.
The figures come from :mod:`scenarios.suite_counts` (per dialogue) and :mod:`ranking.suites` (intervals over
dialogues). ``--json`` prints one line per model: ``{"model", "scenario", "dialogues", "seed",
"dialogues_per_minute", "failed", "metrics": {NAME: {"value", "low", "high", "n"}}}``; ``pass_hat_k`` also
carries ``"k"``.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from commands.run_models import RunInputError, progress_bar, sampling_params, select_entries, wait_ready
from ranking.suites import SuiteEstimate, suite_figures
from scenarios import Scenario
from scenarios.corrections import Style
from scenarios.generate import generate_dialogues
from scenarios.records import RunRecord
from scenarios.runner import Progress
from scenarios.suite import SuiteConfig, SuiteOutcome, run_suite
from scenarios.suite_counts import MEANS, METRICS, SuiteKey, split_suites, stored_suite_figures, suite_units
from settings import Settings
from wiring import database, database_url, enable_compilation_cache, model_pool


@dataclass(frozen=True, slots=True)
class SuiteRequest:
    """What ``run --dialogues`` was asked for."""

    scenario: Scenario
    slugs: Sequence[str]
    dialogues: int
    seed: int
    concurrency: int
    k: int
    max_fix_attempts: int
    style: Style
    false_share: float
    overrides: dict[str, Any]
    store: bool


def figures(records: Sequence[RunRecord], *, k: int) -> dict[str, dict[str, SuiteEstimate]]:
    """Per model, every suite figure with its interval over dialogues: the runs of one invocation, which
    plays one suite a model (stored runs may hold several: :func:`stored_suites`)."""
    return {key.model: suite_figures(units, means=MEANS) for key, units in suite_units(records, k=k).items()}


def suite_line(outcome: SuiteOutcome, request: SuiteRequest,
               estimates: dict[str, SuiteEstimate]) -> dict[str, Any]:
    """The ``--json`` record of one model."""
    metrics: dict[str, Any] = {name: estimates[name].as_json() for name in METRICS}
    metrics["pass_hat_k"]["k"] = request.k
    return {"model": outcome.model, "scenario": request.scenario.slug, "dialogues": outcome.dialogues,
            "seed": request.seed, "dialogues_per_minute": round(outcome.dialogues_per_minute, 2),
            "failed": outcome.failed, "metrics": metrics}


def _text(line: dict[str, Any]) -> str:
    failed = f", {line['failed']} with errors" if line["failed"] else ""
    rows = [f"{line['model']} on {line['scenario']}: {line['dialogues']} dialogues (seed {line['seed']}), "
            f"{line['dialogues_per_minute']} a minute{failed}"]
    for name, m in line["metrics"].items():
        if m["value"] is None:
            rows.append(f"  {name:<17} –  (n=0)")
            continue
        percent = name != "turns_to_fix"
        show = (lambda x: f"{100 * x:.0f}%") if percent else (lambda x: f"{x:.2f}")
        rows.append(f"  {name:<17} {show(m['value'])}  ({show(m['low'])}–{show(m['high'])}, n={m['n']})")
    return "\n".join(rows)


def run_suite_command(*, settings: Settings, request: SuiteRequest, as_json: bool,
                      show_progress: bool = True) -> int:
    """Run the suite for each model; print its figures; 1 if no model could run."""
    from inference.catalogue import CatalogueError, load_catalogue
    from inference.pool import ModelNotReadyError

    try:
        entries = select_entries(load_catalogue(settings.catalogue_path), request.slugs)
    except CatalogueError as exc:
        raise RunInputError(str(exc)) from exc
    dialogues = generate_dialogues(request.scenario, count=request.dialogues, seed=request.seed,
                                   false_share=request.false_share)
    run_id = uuid.uuid4().hex
    engine = database(database_url(settings)) if request.store else None
    if engine is not None:
        from scenarios.storage import ensure_contestant

        for entry in entries:
            ensure_contestant(engine, slug=entry.slug, name=entry.name, family=entry.family,
                              source=entry.source)
    enable_compilation_cache(settings)
    per_model = len(dialogues) * request.k
    bar = progress_bar(total=per_model * len(entries), enabled=show_progress)
    pool = model_pool(settings, entries,
                      on_progress=lambda s: bar.set_description(f"{s.slug}: {s.state} {s.message}".strip()))
    ran = stored = 0
    try:
        for entry in entries:
            problem = wait_ready(pool, entry.slug)
            try:
                model = pool.get(entry.slug) if problem is None else None
            except ModelNotReadyError as exc:
                problem, model = str(exc), None
            if model is None:
                print(f"warning: {entry.slug} skipped: {problem}", file=sys.stderr)
                bar.update(per_model)
                continue
            config = SuiteConfig(params=sampling_params(entry.sampling, request.overrides), k=request.k,
                                 concurrency=request.concurrency, max_fix_attempts=request.max_fix_attempts,
                                 style=request.style)

            def sink(record: RunRecord) -> None:
                nonlocal stored
                if engine is not None:
                    from scenarios.storage import store_run

                    store_run(engine, replace(record, run=run_id))
                    stored += 1

            def progress(event: Progress) -> None:
                bar.update(1)

            outcome = run_suite(scenario=request.scenario, model=model, dialogues=dialogues, config=config,
                                sink=sink, progress=progress)
            ran += 1
            line = suite_line(outcome, request, figures(outcome.records, k=request.k)[outcome.model])
            bar.clear()
            print(json.dumps(line, ensure_ascii=False) if as_json else _text(line), flush=True)
            if outcome.failed:
                print(f"warning: {entry.slug}: {outcome.failed} of {outcome.dialogues} dialogues had an "
                      "engine error (stored as errored replies)", file=sys.stderr)
    finally:
        bar.close()
        pool.close()
    if engine is not None:
        print(f"stored {stored} runs as auto battles", file=sys.stderr)
    return 0 if ran else 1


def stored_suites(records: Sequence[RunRecord], *, scenario: Scenario) -> tuple[list[dict[str, Any]], str]:
    """The suite lines of stored runs (as ``run --dialogues --json`` prints them, with the time figure
    left out: a stored run has no wall clock, and with ``temperature`` and ``style`` added: one line per
    model and setting, so a greedy suite and a sampled one are never pooled) and their Markdown table;
    empty when none is stored."""
    lines = []
    suites = split_suites(records)
    for key, (k, estimates) in stored_suite_figures(records).items():
        played = [r for r in suites[key] if r.protocol == "suite" and r.dialogue is not None]
        seeds = sorted({r.dialogue.seed for r in played
                        if r.dialogue is not None and r.dialogue.seed is not None})
        metrics: dict[str, Any] = {name: estimates[name].as_json() for name in METRICS}
        metrics["pass_hat_k"]["k"] = k
        lines.append({"model": key.model, "scenario": scenario.slug, "temperature": key.temperature,
                      "style": key.style, "dialogues": len(played),
                      "seed": seeds[0] if len(seeds) == 1 else seeds, "metrics": metrics})
    return lines, _markdown(lines) if lines else ""


def _markdown(lines: list[dict[str, Any]]) -> str:
    header = ["Model", "Sampling", "Dialogues", *METRICS]
    rows = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for line in lines:
        setting = SuiteKey(line["model"], line["temperature"], line["style"]).sampling
        cells = [line["model"], setting, str(line["dialogues"])]
        for name in METRICS:
            m = line["metrics"][name]
            if m["value"] is None:
                cells.append("–")
            elif name == "turns_to_fix":
                cells.append(f"{m['value']:.2f} ({m['low']:.2f}–{m['high']:.2f}, n={m['n']})")
            else:
                value, low, high = (f"{100 * m[key]:.0f}" for key in ("value", "low", "high"))
                cells.append(f"{value}% ({low}–{high}, n={m['n']})")
        rows.append("| " + " | ".join(cells) + " |")
    title = "\n## Fixing suites (generated dialogues, 95% intervals over dialogues)\n\n"
    return title + "\n".join(rows) + "\n"
