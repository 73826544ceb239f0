"""``python -m webapp``: the web app's command line (``bench``). Run the app itself with ``make run``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 1")
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m webapp", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    bench = commands.add_parser("bench", help="leaderboard render time at scale; concurrent streaming check")
    bench.add_argument("--votes", type=_positive, default=1_000_000, help="votes to seed (default 1,000,000)")
    bench.add_argument("--models", type=_positive, default=100, help="contestants (default 100)")
    bench.add_argument("--rounds", type=_positive, default=3, help="cold renders to time (default 3)")
    bench.add_argument("--database", type=Path, help="reuse this SQLite file (seeded when missing)")
    bench.add_argument("--skip-streaming", action="store_true", help="leave out the streaming check")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.models < 2:
        print("python -m webapp bench: error: --models must be >= 2", file=sys.stderr)
        return 2
    os.environ.setdefault("KERAS_BACKEND", "jax")
    from webapp.bench import run

    report = run(
        votes=args.votes,
        models=args.models,
        rounds=args.rounds,
        database=args.database,
        skip_streaming=args.skip_streaming,
    )
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
