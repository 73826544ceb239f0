"""``python -m scenarios run`` and ``report``: the runner wired to the catalogue, the pool and the database.

The pool and the database engine come from :mod:`wiring`; runs are stored through ``scenarios.storage``
and the report is printed. Models are run one after another in
the order given; the pool loads the next one in the background meanwhile. A model that cannot load is
reported on stderr and left out of the tables; the others still run.
"""

from __future__ import annotations

import dataclasses
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from commands.run_models import RunInputError, progress_bar, sampling_params, select_entries, wait_ready
from scenarios import Scenario
from scenarios.corrections import Style
from scenarios.records import ProtocolName, RunRecord
from scenarios.report import Report, build_report, latest_runs, render_markdown
from scenarios.runner import Progress, RunnerConfig, planned_runs, run_arena
from settings import Settings
from wiring import database, database_url, enable_compilation_cache, model_pool


@dataclass
class ArenaOutcome:
    records: list[RunRecord] = field(default_factory=list)
    battle_ids: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # slug -> why it did not run
    markdown: str = ""


def run_and_store(
    *,
    settings: Settings,
    scenario: Scenario,
    slugs: Sequence[str],
    protocols: Sequence[ProtocolName],
    repeats: int,
    max_fix_attempts: int,
    fixing_attempts: int = 3,
    styles: Sequence[Style] = ("fix",),
    overrides: dict[str, Any] | None = None,
    store: bool = True,
    show_progress: bool = True,
) -> ArenaOutcome:
    """Run the arena for catalogue models; store every run as an ``auto`` battle unless ``store`` is off."""
    from inference.catalogue import CatalogueError, load_catalogue
    from inference.pool import ModelNotReadyError

    try:
        entries = select_entries(load_catalogue(settings.catalogue_path), slugs)
    except CatalogueError as exc:
        raise RunInputError(str(exc)) from exc
    cases = scenario.premade
    run_id = uuid.uuid4().hex  # every record of this invocation: `scenarios report` shows the latest run
    engine = database(database_url(settings)) if store else None
    outcome = ArenaOutcome()
    if engine is not None:
        from scenarios.storage import ensure_contestant

        for entry in entries:
            ensure_contestant(engine, slug=entry.slug, name=entry.name, family=entry.family,
                              source=entry.source)
    enable_compilation_cache(settings)
    sizes = RunnerConfig(repeats=repeats, fixing_attempts=fixing_attempts, correction_styles=tuple(styles))
    per_model = planned_runs(protocols=protocols, config=sizes, n_cases=len(cases))
    bar = progress_bar(total=per_model * len(entries), enabled=show_progress)
    pool = model_pool(settings, entries,
                      on_progress=lambda s: bar.set_description(f"{s.slug}: {s.state} {s.message}".strip()))
    try:
        for entry in entries:
            bar.set_description(f"loading {entry.slug}")
            problem = wait_ready(pool, entry.slug)
            if problem:
                outcome.skipped[entry.slug] = problem
                print(f"warning: {entry.slug} skipped: {problem}", file=sys.stderr)
                bar.update(per_model)
                continue
            try:
                model = pool.get(entry.slug)
            except ModelNotReadyError as exc:
                outcome.skipped[entry.slug] = str(exc)
                continue
            config = RunnerConfig(repeats=repeats, max_fix_attempts=max_fix_attempts,
                                  fixing_attempts=fixing_attempts, correction_styles=tuple(styles),
                                  params=sampling_params(entry.sampling, overrides or {}))

            def sink(record: RunRecord) -> None:
                if engine is not None:
                    from scenarios.storage import store_run

                    outcome.battle_ids.append(store_run(engine, dataclasses.replace(record, run=run_id)))

            def progress(event: Progress) -> None:
                bar.set_description(f"{event.model} {event.protocol}")
                bar.update(1)

            outcome.records += run_arena(scenario=scenario, models=[model], protocols=protocols,
                                         config=config, cases=cases, sink=sink, progress=progress)
    finally:
        bar.close()
        pool.close()
    report = build_report(outcome.records, scenario=scenario)
    outcome.markdown = render_markdown(report, scenario=scenario, cases=cases)
    return outcome


def run_command(
    *,
    settings: Settings,
    scenario: Scenario,
    slugs: Sequence[str],
    protocols: Sequence[ProtocolName],
    repeats: int,
    max_fix_attempts: int,
    fixing_attempts: int,
    styles: Sequence[Style],
    overrides: dict[str, Any],
    out: Path | None,
    store: bool,
) -> int:
    """The ``run`` command: report on stdout (and in ``out``); 1 if no model could run at all."""
    outcome = run_and_store(settings=settings, scenario=scenario, slugs=slugs, protocols=protocols,
                            repeats=repeats, max_fix_attempts=max_fix_attempts,
                            fixing_attempts=fixing_attempts, styles=styles, overrides=overrides, store=store)
    print(outcome.markdown, end="")
    if out is not None:
        out.write_text(outcome.markdown, encoding="utf-8")
    if store:
        print(f"stored {len(outcome.battle_ids)} runs as auto battles", file=sys.stderr)
    return 0 if outcome.records else 1


def stored_report(*, url: str, scenario: Scenario,
                  all_runs: bool = False) -> tuple[Report, str, list[RunRecord]]:
    """The study's tables from the ``auto`` battles stored at ``url`` (what the Leaderboard's Automatic
    arena tab shows): each model's latest run per protocol, or every stored run with ``all_runs``; the
    report, its Markdown and the records (suite runs included)."""
    from db.boards import auto_battle_ids
    from scenarios.storage import load_runs

    engine = database(url)
    try:
        records = load_runs(engine, battle_ids=auto_battle_ids(engine, scenario=scenario.slug),
                            scenario=scenario)
    finally:
        engine.dispose()
    chosen = records if all_runs else latest_runs(records)
    report = build_report(chosen, scenario=scenario)
    return report, render_markdown(report, scenario=scenario, cases=scenario.premade), chosen
