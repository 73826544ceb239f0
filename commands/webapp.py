"""``python -m webapp``: the web app's command line (``bench``). Run the app itself with ``make run``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 1")
    return value


def _non_negative(text: str) -> int:
    return 0 if text.strip() == "0" else _positive(text)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m webapp", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    bench = commands.add_parser("bench", help="leaderboard render time at scale; concurrent streaming check")
    bench.add_argument("--votes", type=_positive, default=1_000_000, help="votes to seed (default 1,000,000)")
    bench.add_argument("--models", type=_positive, default=100, help="contestants (default 100)")
    bench.add_argument("--replies", type=_non_negative, default=1_000_000,
                       help="graded replies to seed on the voted battles (five per side; default 1,000,000)")
    bench.add_argument("--replay", type=_non_negative, default=200_000,
                       help="replay answers to seed on the corrections (four models each; default 200,000)")
    bench.add_argument("--rounds", type=_positive, default=3, help="cold renders to time (default 3)")
    bench.add_argument("--database", type=Path, help="reuse this SQLite file (seeded when missing)")
    bench.add_argument("--skip-streaming", action="store_true", help="leave out the streaming check")
    bench.add_argument("--skip-leaderboard", action="store_true", help="leave out the leaderboard render")
    bench.add_argument(
        "--catalogue",
        type=Path,
        default=None,
        help="catalogue whose first two models stream (default: the tiny test models)",
    )
    bench.add_argument("--new-tokens", type=_positive, default=64, help="tokens per reply when streaming")
    bench.add_argument(
        "--visitors", type=_positive, default=None,
        help="instead: a load test with this many simulated visitors on the catalogue's models",
    )
    bench.add_argument("--seconds", type=_positive, default=60, help="load test duration (default 60)")
    bench.add_argument(
        "--servers", type=_positive, default=None,
        help="with --visitors: that many real app servers on one fresh PostgreSQL database, the models "
             "behind `inference serve`, each visitor a headless browser (bench/webapp_servers.py)",
    )
    bench.add_argument("--concurrency", type=_positive, default=16,
                       help="with --servers: browsers at once (default 16)")
    bench.add_argument("--postgres-url", default=None,
                       help="with --servers: a PostgreSQL server to create the run's database on (default: "
                            "$ARENA_TEST_POSTGRES_URL, else postgres on 127.0.0.1:5432)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.catalogue is not None and not args.catalogue.is_file():
        print(f"python -m webapp bench: error: no catalogue file {args.catalogue}", file=sys.stderr)
        return 2
    if args.models < 2:
        print("python -m webapp bench: error: --models must be >= 2", file=sys.stderr)
        return 2
    os.environ.setdefault("KERAS_BACKEND", "jax")
    if args.servers is not None:
        return _bench_servers(args)
    if args.visitors is not None:
        from bench.webapp_load import run_visitors

        load = run_visitors(
            visitors=args.visitors, seconds=args.seconds,
            **({"catalogue": args.catalogue} if args.catalogue is not None else {}),
        )
        print(json.dumps(load, indent=2))
        return 0 if load["rows"]["lost"] == 0 and load["rows"]["duplicated"] == 0 else 1
    from bench.webapp import run

    report = run(
        votes=args.votes,
        models=args.models,
        rounds=args.rounds,
        database=args.database,
        skip_streaming=args.skip_streaming,
        skip_leaderboard=args.skip_leaderboard,
        new_tokens=args.new_tokens,
        replies=args.replies,
        replay=args.replay,
        **({"catalogue": args.catalogue} if args.catalogue is not None else {}),
    )
    print(json.dumps(report, indent=2))
    return 0


def _bench_servers(args: argparse.Namespace) -> int:
    """``--servers N --visitors V``: the multi-process load run; exit 1 when a row was lost or doubled."""
    import shutil

    from bench.webapp_servers import DEFAULT_POSTGRES_URL, run_servers

    chromium = shutil.which("chromium")
    if args.visitors is None:
        print("python -m webapp bench: error: --servers needs --visitors", file=sys.stderr)
        return 2
    if chromium is None:
        print("python -m webapp bench: error: --servers needs Debian's chromium on PATH", file=sys.stderr)
        return 2
    postgres = args.postgres_url or os.environ.get("ARENA_TEST_POSTGRES_URL") or DEFAULT_POSTGRES_URL
    report = run_servers(servers=args.servers, visitors=args.visitors, concurrency=args.concurrency,
                         postgres_url=postgres, chromium=chromium,
                         **({"catalogue": args.catalogue} if args.catalogue is not None else {}))
    print(json.dumps(report, indent=2))
    return 0 if report["rows"]["lost"] == 0 and report["rows"]["duplicated"] == 0 else 1
