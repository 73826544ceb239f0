"""``python -m scenarios``: list scenarios, generate dialogues, grade replies, and run the automatic arena.

Settings, the model pool, the database and the scenario registry come from :mod:`wiring`; ``grade``,
``generate`` and ``list`` are :mod:`commands.scenarios_dialogues`; ``run`` and ``report`` are
:mod:`commands.scenarios_arena`; ``replay`` is :mod:`commands.scenarios_replay`. Bad input exits with
status 2 and one line saying what to fix.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "jax")

from commands.scenarios_dialogues import UsageError, add_parsers, gradable  # noqa: E402
from scenarios import Scenario, ScenarioError  # noqa: E402
from scenarios.corrections import STYLES  # noqa: E402
from scenarios.records import PROTOCOLS, ProtocolName  # noqa: E402
from scenarios.suite import DEFAULT_CONCURRENCY, DEFAULT_K  # noqa: E402
from settings import SettingsProblem  # noqa: E402
from wiring import database_url, scenario_registry  # noqa: E402

EXIT_BAD_INPUT = 2
PROTOCOL_CHOICES = (*PROTOCOLS, "all")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except (UsageError, ScenarioError, SettingsProblem) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


def build_parser() -> argparse.ArgumentParser:
    """The CLI's parser (also read by the docs tests)."""
    parser = argparse.ArgumentParser(prog="python -m scenarios", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    slugs = [s.slug for s in scenario_registry().list()]

    add_parsers(sub, slugs)

    p = sub.add_parser("run", help="the automatic arena: the study's three tables for catalogue models")
    p.add_argument("scenario", help="scenario slug (calendar)")
    p.add_argument("--models", required=True, help="comma-separated catalogue slugs, or 'all' (enabled)")
    p.add_argument("--protocol", choices=PROTOCOL_CHOICES, default="all", help="which table(s) to run")
    p.add_argument("--repeats", type=int, default=5, help="reliability attempts per model (default 5)")
    p.add_argument("--max-fix-attempts", type=int, default=2,
                   help="dialogue: corrections per wrong reply before moving on (default 2)")
    p.add_argument("--fixing-attempts", type=int, default=3,
                   help="fixing: fresh attempts per pre-made mistake (default 3, as in the study)")
    p.add_argument("--out", type=Path, help="also write the Markdown report to this file")
    p.add_argument("--style", type=_styles, default=("fix",), metavar="STYLE[,STYLE]",
                   help=f"correction style(s) of the dialogue protocol, comma-separated: {', '.join(STYLES)} "
                        "(default fix; each style is one dialogue run per model)")
    p.add_argument("--temperature", type=float, help="override the catalogue's sampling temperature")
    p.add_argument("--max-new-tokens", type=int, help="override the catalogue's max_new_tokens")
    p.add_argument("--seed", type=int, help="base seed (attempt i uses seed+i; default 0)")
    p.add_argument("--no-store", action="store_true", help="do not write the runs to the database")
    p.add_argument("--dialogues", type=int, metavar="N",
                   help="a fixing suite instead of the study's tables: N generated dialogues per model "
                        "(with --seed; figures with 95%% intervals over dialogues)")
    p.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY, metavar="C",
                   help="suite: conversations in flight at once through the model's batcher "
                        f"(default {DEFAULT_CONCURRENCY})")
    p.add_argument("--k", type=int, default=DEFAULT_K,
                   help="suite: samples of each dialogue's first turn for pass^k, the dialogue's own first "
                        f"reply among them (default {DEFAULT_K})")
    p.add_argument("--false-corrections", type=float, default=0.2, metavar="SHARE",
                   help="suite: share of dialogues with a false correction (default 0.2)")
    p.add_argument("--json", action="store_true",
                   help='suite: one line per model {"model", "scenario", "dialogues", "seed", '
                        '"dialogues_per_minute", "failed", "metrics": {NAME: {"value", "low", "high", "n"}}}')
    p.set_defaults(handler=_cmd_run)

    p = sub.add_parser("report", help="the study's three emoji tables from the stored automatic runs")
    p.add_argument("scenario", nargs="?", default="calendar", help="scenario slug (default calendar)")
    p.add_argument("--url", default=None, help="SQLAlchemy URL (default: ARENA_DATABASE_URL / ./var)")
    p.add_argument("--out", type=Path, help="also write the Markdown report to this file")
    p.add_argument("--json", action="store_true",
                   help='print {"cells": {model: {column: text}}, "summary", "suites": [the suite lines of '
                        '`run --dialogues --json`, from the stored suite runs]}')
    p.add_argument("--all-runs", action="store_true",
                   help="every stored run in the tables (default: each model's latest run per protocol)")
    p.add_argument("--pairs", type=Path, metavar="FILE.csv",
                   help="also write the stored suites' pairwise outcomes as a battles file (source suite) "
                        "for `python -m ranking fit --composite`")
    p.set_defaults(handler=_cmd_report)

    p = sub.add_parser("replay", help="every stored correction a person wrote, answered by other models and "
                                      "graded in context")
    p.add_argument("--models", required=True, help="comma-separated catalogue slugs, or 'all' (enabled)")
    p.add_argument("--from", dest="source", type=Path, metavar="FILE",
                   help="replay the items of this file (`python -m db export --view replay`, JSONL or "
                        "Parquet) instead of the database's; nothing is stored")
    p.add_argument("--since", default=None, metavar="DATE",
                   help="only corrections sent on or after DATE (YYYY-MM-DD or ISO datetime, UTC)")
    p.add_argument("--limit", type=int, metavar="N",
                   help="at most N items per model, oldest first (from the database: N it has not answered)")
    p.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY, metavar="C",
                   help="requests in flight at once through the model's batcher "
                        f"(default {DEFAULT_CONCURRENCY})")
    p.add_argument("--temperature", type=float, help="override the catalogue's sampling temperature")
    p.add_argument("--max-new-tokens", type=int, help="override the catalogue's max_new_tokens")
    p.add_argument("--seed", type=int, help="sampling seed (default 0)")
    p.add_argument("--json", action="store_true",
                   help='one line per model {"model", "source", "items", "skipped", "already_answered", '
                        '"asked", "errors", "stored", "items_per_minute", "own", "other", "fix_rate", '
                        '"answers"}')
    p.set_defaults(handler=_cmd_replay)

    p = sub.add_parser("bench", help="grader speed on the labeled replies and on hostile input (JSON); "
                                     "with --replay-model, replay's items per minute on a model")
    p.add_argument("--rounds", type=int, default=20, help="repetitions per measurement (default 20)")
    p.add_argument("--replay-model", metavar="SLUG",
                   help="instead: replay's speed on this catalogue model, over --replay-items corrections")
    p.add_argument("--replay-items", type=int, default=40, metavar="N",
                   help="corrections to replay with --replay-model (default 40)")
    p.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY, metavar="C",
                   help=f"with --replay-model: requests in flight (default {DEFAULT_CONCURRENCY})")
    p.set_defaults(handler=_cmd_bench)
    return parser


def _styles(text: str) -> tuple[str, ...]:
    styles = tuple(dict.fromkeys(s.strip() for s in text.split(",") if s.strip()))
    unknown = [s for s in styles if s not in STYLES]
    if not styles or unknown:
        raise argparse.ArgumentTypeError(f"expected styles from {', '.join(STYLES)}, got {text!r}")
    return styles


def _cmd_bench(args: argparse.Namespace) -> int:
    from bench.scenarios import run_bench

    if args.rounds < 1:
        raise UsageError("--rounds must be >= 1")
    if args.replay_model is not None:
        if args.replay_items < 1 or args.concurrency < 1:
            raise UsageError("--replay-items and --concurrency must be >= 1")
        print(json.dumps(_replay_bench(args.replay_model, args.replay_items, args.concurrency),
                         ensure_ascii=False, indent=2))
        return 0
    print(json.dumps(run_bench(rounds=args.rounds), ensure_ascii=False, indent=2))
    return 0


def _replay_bench(model: str, items: int, concurrency: int) -> dict[str, Any]:
    """Seed a throw-away database (``bench.replay``), replay it to ``model`` and return the figures."""
    import contextlib
    import io
    import tempfile

    from bench.replay import replay_figures, seed_battles
    from commands.run_models import RunInputError
    from commands.scenarios_replay import ReplayRequest, run_replay_command
    from settings import get_settings_without_secrets as get_settings

    with tempfile.TemporaryDirectory(prefix="replay-bench-") as tmp:
        url = f"sqlite:///{Path(tmp, 'replay.db').as_posix()}"
        seed_battles(url, items=items)
        settings = get_settings().model_copy(update={"database_url": url, "public_export_delay_hours": 0.0})
        request = ReplayRequest(slugs=[model], source=None, since=None, limit=None, concurrency=concurrency,
                                overrides={})
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                code = run_replay_command(settings=settings, request=request, as_json=True,
                                          show_progress=False)
        except RunInputError as exc:
            raise UsageError(str(exc)) from exc
    if code != 0:
        raise UsageError(f"{model} could not run (see the warning above)")
    (line,) = [json.loads(text) for text in out.getvalue().splitlines() if text.strip()]
    return replay_figures(line, items=items, concurrency=concurrency)


# --- report ------------------------------------------------------------------------------------------


def _cmd_report(args: argparse.Namespace) -> int:
    from commands.scenarios_arena import stored_report

    scenario = gradable(args.scenario)
    if args.url is None:
        from settings import get_settings_without_secrets as get_settings

        url = database_url(get_settings())
    else:
        url = args.url
    from commands.scenarios_suite import stored_suites

    report, markdown, records = stored_report(url=url, scenario=scenario, all_runs=args.all_runs)
    suites, suites_markdown = stored_suites(records, scenario=scenario)
    markdown += suites_markdown
    if not report.models and not suites:
        print(f"no automatic runs of {scenario.slug!r} stored", file=sys.stderr)
    if args.json:
        print(json.dumps({"cells": report.text(), "summary": report.summary(), "suites": suites},
                         ensure_ascii=False))
    else:
        print(markdown, end="")
    if args.out is not None:
        args.out.write_text(markdown, encoding="utf-8")
    if args.pairs is not None:
        _write_pairs(args.pairs, records, scenario.slug)
    return 0


def _write_pairs(path: Path, records: Any, scenario: str) -> None:
    """The suites' pairwise outcomes (``scenarios.suite_counts.suite_pairs``) as a CSV battles file."""
    import csv

    from scenarios.suite_counts import suite_pairs

    rows = suite_pairs(records)
    try:
        with path.open("w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerow(["model_a", "model_b", "winner", "source", "scenario", "item"])
            writer.writerows([a, b, winner, "suite", scenario, item] for a, b, winner, item in rows)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    print(f"wrote {len(rows)} suite pairs to {path}", file=sys.stderr)


# --- replay ------------------------------------------------------------------------------------------


def _cmd_replay(args: argparse.Namespace) -> int:
    from commands.run_models import RunInputError
    from commands.scenarios_replay import ReplayRequest, run_replay_command
    from db import InvalidInput
    from db.export import ExportError, parse_date
    from settings import get_settings_without_secrets as get_settings

    if args.concurrency < 1:
        raise UsageError(f"--concurrency must be >= 1, got {args.concurrency}")
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit must be >= 1, got {args.limit}")
    try:
        since = parse_date(args.since) if args.since else None
    except (ExportError, InvalidInput) as exc:
        raise UsageError(f"--since: {exc}") from None
    slugs, overrides = _models_and_overrides(args)
    request = ReplayRequest(slugs=slugs, source=args.source, since=since, limit=args.limit,
                            concurrency=args.concurrency, overrides=overrides)
    try:
        return run_replay_command(settings=get_settings(), request=request, as_json=args.json)
    except RunInputError as exc:
        raise UsageError(str(exc)) from exc


# --- run ---------------------------------------------------------------------------------------------


def _cmd_run(args: argparse.Namespace) -> int:
    from commands.run_models import RunInputError
    from commands.scenarios_arena import run_command
    from settings import get_settings_without_secrets as get_settings

    scenario = gradable(args.scenario)
    if args.dialogues is not None:
        return _run_suite(args, scenario)
    if args.repeats < 1:
        raise UsageError("--repeats must be >= 1")
    if args.fixing_attempts < 1:
        raise UsageError("--fixing-attempts must be >= 1")
    if args.max_fix_attempts < 0:
        raise UsageError("--max-fix-attempts must be >= 0")
    protocols: tuple[ProtocolName, ...] = PROTOCOLS if args.protocol == "all" else (args.protocol,)
    if not scenario.premade and "fixing" in protocols:
        if args.protocol == "fixing":
            raise UsageError(f"scenario {scenario.slug!r} has no pre-made faulty replies: no fixing protocol")
        protocols = tuple(p for p in protocols if p != "fixing")
    slugs, overrides = _models_and_overrides(args)
    try:
        return run_command(settings=get_settings(), scenario=scenario, slugs=slugs, protocols=protocols,
                           repeats=args.repeats, max_fix_attempts=args.max_fix_attempts,
                           fixing_attempts=args.fixing_attempts, styles=args.style, overrides=overrides,
                           out=args.out, store=not args.no_store)
    except RunInputError as exc:
        raise UsageError(str(exc)) from exc


def _models_and_overrides(args: argparse.Namespace) -> tuple[list[str], dict[str, Any]]:
    """``--models`` as slugs, and the sampling flags given (temperature, max_new_tokens, seed)."""
    slugs = [s.strip() for s in args.models.split(",") if s.strip()]
    if not slugs:
        raise UsageError("--models needs at least one slug, or 'all'")
    if args.max_new_tokens is not None and args.max_new_tokens < 1:
        raise UsageError("--max-new-tokens must be >= 1")
    if args.temperature is not None and args.temperature < 0:
        raise UsageError("--temperature must be >= 0")
    overrides = {k: v for k, v in (("temperature", args.temperature), ("max_new_tokens", args.max_new_tokens),
                                   ("seed", args.seed)) if v is not None}
    return slugs, overrides


def _run_suite(args: argparse.Namespace, scenario: Scenario) -> int:
    from commands.run_models import RunInputError
    from commands.scenarios_suite import SuiteRequest, run_suite_command
    from settings import get_settings_without_secrets as get_settings

    if args.dialogues < 1:
        raise UsageError(f"--dialogues must be >= 1, got {args.dialogues}")
    if args.concurrency < 1:
        raise UsageError(f"--concurrency must be >= 1, got {args.concurrency}")
    if args.k < 1:
        raise UsageError(f"--k must be >= 1, got {args.k}")
    if not 0.0 <= args.false_corrections <= 1.0:
        raise UsageError(f"--false-corrections must be between 0 and 1, got {args.false_corrections}")
    if scenario.generator is None:
        raise UsageError(f"scenario {scenario.slug!r} has no dialogue generator")
    if len(args.style) != 1:
        raise UsageError("a suite uses one correction --style")
    if args.max_fix_attempts < 0:
        raise UsageError("--max-fix-attempts must be >= 0")
    slugs, overrides = _models_and_overrides(args)
    request = SuiteRequest(scenario=scenario, slugs=slugs, dialogues=args.dialogues, seed=args.seed or 0,
                           concurrency=args.concurrency, k=args.k, max_fix_attempts=args.max_fix_attempts,
                           style=args.style[0], false_share=args.false_corrections, overrides=overrides,
                           store=not args.no_store)
    try:
        return run_suite_command(settings=get_settings(), request=request, as_json=args.json)
    except RunInputError as exc:
        raise UsageError(str(exc)) from exc
