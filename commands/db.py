"""``python -m db``: upgrade | stats | bench | export.

Every command takes ``--url`` and falls back to ``ARENA_DATABASE_URL`` (default: the SQLite file under
``./var/``), read through :mod:`wiring`. ``export`` is :mod:`commands.db_export`; the benchmarks are
:mod:`bench.db_writes` and :mod:`bench.db_export`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence

from sqlalchemy.exc import ArgumentError, OperationalError


def _default_url() -> str:
    from settings import get_settings_without_secrets as get_settings
    from wiring import database_url

    return database_url(get_settings())


def _cmd_upgrade(args: argparse.Namespace) -> int:
    from db import current_revision, upgrade_to_head

    upgrade_to_head(args.url)
    print(f"database at revision {current_revision(args.url)}")
    return 0


def _cmd_stats(args: argparse.Namespace) -> int:
    from db import make_engine
    from db.boards import table_counts

    engine = make_engine(args.url)
    try:
        counts = table_counts(engine)
    finally:
        engine.dispose()
    if args.json:
        print(json.dumps(counts))
    else:
        for name, count in counts.items():
            print(f"{name:<14}{count:>12,}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from bench.db_writes import run_bench

    results: dict[str, object] = {}
    if args.only != "export":
        results = run_bench(
            sqlite_dir=args.dir,
            postgres_url=args.postgres_url,
            writers=args.writers,
            votes_per_writer=args.votes_per_writer,
            aggregate_votes=args.votes,
            models=args.models,
            parts=("aggregation",) if args.only == "aggregation" else ("votes", "aggregation"),
        )
    if args.only in ("all", "export"):
        from bench.db_export import run_export_bench

        results.update(run_export_bench(sqlite_dir=args.dir, postgres_url=args.postgres_url,
                                        messages=args.messages))
    print(json.dumps(results, indent=None if args.json else 2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m db", description="Fixit Arena database helpers.")
    sub = parser.add_subparsers(dest="command", required=True)

    def with_url(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--url", default=None, help="SQLAlchemy URL (default: ARENA_DATABASE_URL / ./var)")
        return p

    with_url(sub.add_parser("upgrade", help="migrate the database to the newest schema"))
    stats = with_url(sub.add_parser("stats", help="row counts per table"))
    stats.add_argument("--json", action="store_true", help="one JSON object instead of a table")

    bench = sub.add_parser("bench", help="votes/s with concurrent writers; pair aggregation over many votes")
    bench.add_argument("--writers", type=int, default=8)
    bench.add_argument("--votes-per-writer", type=int, default=500)
    bench.add_argument("--votes", type=int, default=1_000_000, help="stored votes for the aggregation")
    bench.add_argument("--models", type=int, default=100)
    bench.add_argument("--dir", default=None, help="folder for the SQLite files (default: a temp folder)")
    bench.add_argument(
        "--postgres-url", default=None, help="PostgreSQL to measure too (default: ARENA_TEST_POSTGRES_URL)"
    )
    bench.add_argument("--json", action="store_true", help="compact one-line JSON")
    bench.add_argument("--only", choices=("all", "votes", "aggregation", "export"), default="all",
                       help="votes: votes/s + aggregation only; aggregation: the aggregation only; "
                       "export: the export figure only")
    bench.add_argument("--messages", type=int, default=1_000_000, help="stored messages for the export")

    from commands.db_export import add_export_parser

    add_export_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "url", "") is None:
        try:
            args.url = _default_url()
        except ValueError as exc:  # settings.SettingsProblem: one line naming the variables at fault
            print(f"error: {exc}".splitlines()[0], file=sys.stderr)
            return 2
    if args.command == "bench":
        for name in ("writers", "votes_per_writer", "votes", "models", "messages"):
            if getattr(args, name) < 1 or (name == "models" and args.models < 2):
                print(f"error: --{name.replace('_', '-')} is too small", file=sys.stderr)
                return 2
    commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "upgrade": _cmd_upgrade,
        "stats": _cmd_stats,
        "bench": _cmd_bench,
    }
    from commands.db_export import run_export

    commands["export"] = run_export
    try:
        return commands[args.command](args)
    except (ArgumentError, ValueError) as exc:
        print(f"error: {exc}".splitlines()[0], file=sys.stderr)
        return 2
    except OperationalError as exc:
        print(f"error: database unreachable or unusable: {str(exc.orig).splitlines()[0]}", file=sys.stderr)
        return 1
