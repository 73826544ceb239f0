"""``python -m scenarios replay``: every correction a person wrote, answered by every model.

``--models M1,M2|all`` (catalogue slugs; ``all``: the enabled ones). Items come from the database (every
correction of a closed, unflagged human battle that is public: closed more than
``ARENA_PUBLIC_EXPORT_DELAY_HOURS`` ago) or, with
``--from FILE``, from a replay file (``python -m db export --view replay``, JSONL or Parquet); ``--since
DATE`` keeps the corrections sent on or after DATE. Items whose
dialogue the grader cannot follow are skipped and counted. From the database, a model answers only the
items it has not answered yet (``--limit N``: at most N of them, oldest first) and each graded answer is
stored as it ends, linked to its correction; from a file, nothing is stored. ``--concurrency C`` requests
are in flight at once.

Output: per model, its answers' outcomes (its own mistakes apart from other models') and a fix rate with
a 95% Wilson interval; ``--json`` prints one line per model::

    {"model", "source", "items", "skipped", "already_answered", "asked", "errors", "stored",
     "items_per_minute", "own": {"fixed", "not_fixed", "regression"}, "other": {...},
     "fix_rate": {"value", "low", "high", "n"}, "answers": {"<item id>": "fixed" | "not_fixed" |
     "regression" | null}}

Bad input (an unknown model, a file of another version or with missing fields, an item whose scenario no
longer exists or whose dialogue does not fit it) exits 2 with one line, before anything is stored.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from commands.run_models import RunInputError, progress_bar, sampling_params, select_entries, wait_ready
from scenarios import Scenario, ScenarioError
from scenarios.replay import (
    ReplayAnswer,
    ReplayFileError,
    ReplayItem,
    follows,
    read_replay_file,
    run_replay,
)
from settings import Settings
from wiring import database, database_url, enable_compilation_cache, model_pool, scenario_registry

OUTCOMES = ("fixed", "not_fixed", "regression")


@dataclass(frozen=True, slots=True)
class ReplayRequest:
    """What ``replay`` was asked for."""

    slugs: Sequence[str]
    source: Path | None  # None: the database
    since: dt.datetime | None
    limit: int | None
    concurrency: int
    overrides: dict[str, Any]


def checked_items(items: Sequence[ReplayItem]) -> tuple[dict[str, Scenario], list[ReplayItem], int]:
    """The scenarios the items name, the items the grader can follow, and how many it cannot.
    :class:`RunInputError` for an item whose scenario no longer exists or whose dialogue does not fit."""
    registry = scenario_registry()
    scenarios: dict[str, Scenario] = {}
    for item in items:
        if item.scenario not in scenarios:
            try:
                scenarios[item.scenario] = registry.get(item.scenario)
            except ScenarioError:
                raise RunInputError(f"item {item.id}: scenario {item.scenario!r} no longer exists") from None
    try:
        followed = [item for item in items if follows(scenarios[item.scenario], item)]
    except ReplayFileError as exc:
        raise RunInputError(str(exc)) from None
    return scenarios, followed, len(items) - len(followed)


def _items(settings: Settings, request: ReplayRequest, engine: Any) -> list[ReplayItem]:
    """The request's items: its file's, else the database's (``engine``) public ones; ``--since`` applied."""
    try:
        if request.source is not None:
            items = read_replay_file(request.source)
        else:
            from scenarios.storage import stored_replay_items

            delay = settings.public_export_delay_hours
            cutoff = dt.datetime.now(dt.UTC) - dt.timedelta(hours=delay) if delay else None
            items = stored_replay_items(engine, closed_before=cutoff)
    except ReplayFileError as exc:
        raise RunInputError(str(exc)) from None
    if request.since is not None:
        since = request.since
        items = [i for i in items if i.created_at is None or i.created_at >= since]
    return items


def summary(model: str, answers: Sequence[ReplayAnswer], *, source: str, items: int, skipped: int,
            already: int, stored: int, seconds: float) -> dict[str, Any]:
    """The ``--json`` line of one model (see the module docstring)."""
    from ranking.rates import wilson_interval

    own: Counter[str] = Counter(a.outcome for a in answers if a.own and a.outcome is not None)
    other: Counter[str] = Counter(a.outcome for a in answers if not a.own and a.outcome is not None)
    graded = sum(own.values()) + sum(other.values())
    fixed = own["fixed"] + other["fixed"]
    rate: dict[str, Any] = {"value": None, "low": None, "high": None, "n": graded}
    if graded:
        low, high = wilson_interval(fixed, graded)
        rate = {"value": round(fixed / graded, 4), "low": round(float(low), 4), "high": round(float(high), 4),
                "n": graded}
    return {
        "model": model, "source": source, "items": items, "skipped": skipped, "already_answered": already,
        "asked": len(answers), "errors": sum(1 for a in answers if a.result.error), "stored": stored,
        "items_per_minute": round(60.0 * len(answers) / seconds, 2) if seconds > 0 else 0.0,
        "own": {name: own[name] for name in OUTCOMES}, "other": {name: other[name] for name in OUTCOMES},
        "fix_rate": rate, "answers": {str(a.item.id): a.outcome for a in answers},
    }


def _text(line: dict[str, Any]) -> str:
    rate = line["fix_rate"]
    shown = "–" if rate["value"] is None else (
        f"{100 * rate['value']:.0f}% ({100 * rate['low']:.0f}–{100 * rate['high']:.0f}, n={rate['n']})")
    parts = [f"{line['model']} ({line['source']}): {line['asked']} asked of {line['items']} items "
             f"({line['skipped']} not followable, {line['already_answered']} answered before), "
             f"{line['items_per_minute']} a minute",
             f"  fixed {shown}",
             "  own mistakes:    " + ", ".join(f"{k} {v}" for k, v in line["own"].items()),
             "  others' mistakes: " + ", ".join(f"{k} {v}" for k, v in line["other"].items())]
    if line["errors"]:
        parts.append(f"  {line['errors']} engine errors (not stored: a later replay asks again)")
    return "\n".join(parts)


def run_replay_command(*, settings: Settings, request: ReplayRequest, as_json: bool,
                       show_progress: bool = True) -> int:
    """Replay the items to each model; print a line per model; 1 if no model could run."""
    from inference.catalogue import CatalogueError, load_catalogue

    try:
        entries = select_entries(load_catalogue(settings.catalogue_path), request.slugs)
    except CatalogueError as exc:
        raise RunInputError(str(exc)) from exc
    engine = database(database_url(settings)) if request.source is None else None
    try:
        items = _items(settings, request, engine)
        scenarios, followed, skipped = checked_items(items)
    except RunInputError:
        if engine is not None:
            engine.dispose()
        raise
    source = str(request.source) if request.source is not None else "database"
    if engine is not None:
        from scenarios.storage import ensure_contestant

        for entry in entries:
            ensure_contestant(engine, slug=entry.slug, name=entry.name, family=entry.family,
                              source=entry.source)
    enable_compilation_cache(settings)
    bar = progress_bar(total=0, enabled=show_progress)
    pool = model_pool(settings, entries,
                      on_progress=lambda s: bar.set_description(f"{s.slug}: {s.state} {s.message}".strip()))
    ran = 0
    try:
        for entry in entries:
            todo, already = _todo(engine, entry.slug, followed, request.limit)
            answers: list[ReplayAnswer] = []
            stored, seconds = 0, 0.0
            if todo:
                model, problem = _ready_model(pool, entry.slug)
                if model is None:
                    print(f"warning: {entry.slug} skipped: {problem}", file=sys.stderr)
                    continue
                bar.reset(total=len(todo))
                started = time.perf_counter()
                storer = Storer(engine) if engine is not None else None
                answers = run_replay(items=todo, scenarios=scenarios, model=model,
                                     params=sampling_params(entry.sampling, request.overrides),
                                     concurrency=request.concurrency, sink=storer,
                                     progress=lambda done, total: bar.update(1))
                seconds = time.perf_counter() - started
                stored = storer.stored if storer is not None else 0
            ran += 1
            line = summary(entry.slug, answers, source=source, items=len(items), skipped=skipped,
                           already=already, stored=stored, seconds=seconds)
            bar.clear()
            print(json.dumps(line, ensure_ascii=False) if as_json else _text(line), flush=True)
    finally:
        bar.close()
        pool.close()
        if engine is not None:
            engine.dispose()
    return 0 if ran else 1


def _todo(engine: Any, model: str, followed: Sequence[ReplayItem],
          limit: int | None) -> tuple[list[ReplayItem], int]:
    """The items ``model`` still has to answer (from the database: those it has not answered), at most
    ``limit``, and how many it had answered already."""
    done: frozenset[int] = frozenset()
    if engine is not None:
        from scenarios.storage import answered_items

        done = answered_items(engine, model=model)
    todo = [item for item in followed if item.id not in done]
    already = len(followed) - len(todo)
    return (todo[:limit] if limit is not None else todo), already


def _ready_model(pool: Any, slug: str) -> tuple[Any, str | None]:
    """The pool's model once loaded, or None and why not."""
    from inference.pool import ModelNotReadyError

    problem = wait_ready(pool, slug)
    if problem is not None:
        return None, problem
    try:
        return pool.get(slug), None
    except ModelNotReadyError as exc:
        return None, str(exc)


class Storer:
    """The sink that stores each graded answer as it ends, counting those written (an answer stored
    before, by this model in another run, counts as not written)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.stored = 0

    def __call__(self, answer: ReplayAnswer) -> None:
        from scenarios.storage import store_answer

        if answer.outcome is not None:
            self.stored += int(store_answer(self.engine, answer))
