"""Command line: ``python -m ranking fit|bench`` (see docs/CLI.md); the benchmark is :mod:`bench.ranking`."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import NoReturn

import numpy as np

from ranking.battles_file import BattlesFileError, read_battles, read_sources
from ranking.composite import COLUMNS, DEFAULT_WEIGHTS, Source, composite_board
from ranking.counts import A_WINS, B_WINS, CountsError, tally
from ranking.leaderboard import leaderboard
from ranking.style import STYLE_FEATURES, fit_style_bt


class _Parser(argparse.ArgumentParser):
    """argparse, but bad input ends with one line on stderr and exit code 2."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _name_number(text: str, what: str, *, minimum: float | None = None) -> tuple[str, float]:
    """``NAME=NUMBER`` (the last ``=`` splits), the number finite and at least ``minimum``."""
    name, sep, value = text.rpartition("=")
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not sep or not name or not math.isfinite(number) or (minimum is not None and number < minimum):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return name, number


def _anchor(text: str) -> tuple[str, float]:
    return _name_number(text, "MODEL=VALUE")


def _weight(text: str) -> tuple[str, float]:
    return _name_number(text, "SOURCE=WEIGHT with a weight >= 0", minimum=0.0)


def build_parser() -> argparse.ArgumentParser:
    """The CLI's parser (also used by the docs test)."""
    parser = _Parser(prog="python -m ranking", description="Bradley-Terry leaderboards from battle files.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    fit = sub.add_parser("fit", help="fit a leaderboard on a battles file (CSV or Parquet)")
    fit.add_argument("--battles", type=Path, required=True, action="append",
                     help="file with columns model_a, model_b, winner (several with --composite)")
    fit.add_argument("--ties", choices=("half", "exclude"), default="half")
    fit.add_argument("--both-bad", choices=("tie", "exclude"), default="tie")
    fit.add_argument("--bootstrap", type=_non_negative, default=1000, help="bootstrap rounds (0: none)")
    fit.add_argument("--seed", type=int, default=0)
    fit.add_argument("--interval", choices=("bootstrap", "sandwich"), default="bootstrap")
    fit.add_argument("--anchor", type=_anchor, default=None, help="pin MODEL=VALUE (e.g. gpt-4=1200)")
    fit.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    fit.add_argument("--style-control", action="store_true",
                     help="contextual Bradley-Terry on the file's style columns (<feature>_a, <feature>_b: "
                     + ", ".join(STYLE_FEATURES) + "), as the Votes board's style control")
    fit.add_argument("--composite", action="store_true",
                     help="human-only, automatic-only and composite ratings from the files' sources (a "
                     "`source` column; none: human), with Kendall's tau between human and automatic")
    fit.add_argument("--weight", type=_weight, action="append", default=[], metavar="SOURCE=W",
                     help="--composite: a source's weight (default " + ", ".join(
                         f"{k}={v}" for k, v in DEFAULT_WEIGHTS.items()) + "; other sources 0.5)")
    bench = sub.add_parser("bench", help="time the full leaderboard against the Chatbot Arena reference")
    bench.add_argument("--models", type=_positive, default=100)
    bench.add_argument("--votes", type=_positive, default=1_000_000)
    bench.add_argument("--rounds", type=_positive, default=1000)
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--repeat", type=_positive, default=3, help="best of N runs for our timings")
    bench.add_argument("--no-reference", action="store_true", help="skip the (slow) reference method")
    bench.add_argument("--sampler-trials", type=_non_negative, default=5, help="pair-sampler simulations")
    bench.add_argument("--json", action="store_true")
    return parser


def _style_fit(args: argparse.Namespace) -> int:
    """``fit --style-control``: rows with a missing feature are left out, as the board leaves out votes
    without a reply on both sides; ties and both-bad count y = 1/2 (``ranking.style``)."""
    try:
        battles = read_battles(args.battles, style=STYLE_FEATURES)
    except BattlesFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    assert battles.features_a is not None and battles.features_b is not None
    keep = ~(np.isnan(battles.features_a).any(axis=1) | np.isnan(battles.features_b).any(axis=1))
    if not keep.any():
        print("error: no battle has every style feature on both sides", file=sys.stderr)
        return 2
    if not keep.all():
        print(f"note: {int((~keep).sum())} battles without every style feature left out", file=sys.stderr)
    played = np.union1d(battles.model_a[keep], battles.model_b[keep])
    remap = np.full(len(battles.models), -1, dtype=np.int64)
    remap[played] = np.arange(played.size)
    outcome = np.select([battles.outcome == A_WINS, battles.outcome == B_WINS], [1.0, 0.0], 0.5)
    fit = fit_style_bt(tuple(battles.models[i] for i in played), remap[battles.model_a[keep]],
                       remap[battles.model_b[keep]], outcome[keep], battles.features_a[keep],
                       battles.features_b[keep], features=STYLE_FEATURES)
    games = np.bincount(remap[battles.model_a[keep]], minlength=played.size) + np.bincount(
        remap[battles.model_b[keep]], minlength=played.size)
    rows = [{"model": fit.models[m], "rating": float(fit.ratings[m]), "ci_low": float(fit.ci_low[m]),
             "ci_high": float(fit.ci_high[m]), "rank": int(fit.ranks[m]), "battles": int(games[m])}
            for m in np.argsort(-fit.ratings, kind="stable")]
    coefficients = {name: float(b) for name, b in zip(fit.features, fit.beta, strict=True)}
    print("note: style coefficients " + ", ".join(f"{k}={v:+.3f}" for k, v in coefficients.items()),
          file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'rank':>4}  {'model':30s} {'rating':>8} {'95% CI':>19} {'battles':>8}")
    for row in rows:
        ci = f"[{row['ci_low']:.1f}, {row['ci_high']:.1f}]"
        print(f"{row['rank']:>4}  {row['model']:30s} {row['rating']:8.1f} {ci:>19} {row['battles']:>8}")
    return 0


def _composite_fit(args: argparse.Namespace) -> int:
    """``fit --composite``: every file's battles by source, three fits and Kendall's tau."""
    try:
        models, streams = read_sources(list(args.battles))
        sources = []
        for name, stream in streams.items():
            wins, ties, both_bad = tally(stream.model_a, stream.model_b, stream.outcome, n_models=len(models))
            sources.append(Source(name, wins, ties + (both_bad if args.both_bad == "tie" else 0)))
        board = composite_board(models, sources, weights=dict(args.weight), bootstrap=args.bootstrap,
                                seed=args.seed, interval=args.interval)
    except (BattlesFileError, CountsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tau = {"value": _finite(board.kendall_tau), "low": _finite(board.tau_low),
           "high": _finite(board.tau_high)}
    if args.json:
        print(json.dumps({"models": board.as_records(), "kendall_tau": tau, "weights": board.weights,
                          "battles": board.per_source_battles}, indent=2))
        return 0
    print("sources: " + ", ".join(f"{k} ({board.per_source_battles[k]} battles, weight {w})"
                                   for k, w in board.weights.items()))
    print(f"{'model':30s} " + " ".join(f"{name:>26}" for name in COLUMNS))
    for record in sorted(board.as_records(), key=_composite_rank):
        cells = []
        for name in COLUMNS:
            col = record[name]
            cells.append(f"{'–':>26}" if not isinstance(col, dict) else
                         f"{col['rating']:7.1f} [{col['ci_low']:.1f}, {col['ci_high']:.1f}]".rjust(26))
        print(f"{record['model']:30s} " + " ".join(cells))
    shown = "–" if tau["value"] is None else f"{tau['value']:.2f} (95% {tau['low']:.2f} to {tau['high']:.2f})"
    print(f"Kendall's tau, human against automatic: {shown}")
    return 0


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 4)


def _composite_rank(record: dict[str, object]) -> tuple[int, str]:
    column = record["composite"]
    return (int(column["rank"]) if isinstance(column, dict) else 1 << 30, str(record["model"]))


def _fit(args: argparse.Namespace) -> int:
    if args.composite:
        return _composite_fit(args)
    if len(args.battles) > 1:
        print("error: several --battles files need --composite", file=sys.stderr)
        return 2
    args.battles = args.battles[0]
    if args.style_control:
        return _style_fit(args)
    try:
        battles = read_battles(args.battles)
        wins, ties, both_bad = tally(
            battles.model_a, battles.model_b, battles.outcome, n_models=len(battles.models)
        )
        board = leaderboard(
            battles.models,
            wins,
            ties,
            both_bad,
            ties=args.ties,
            both_bad=args.both_bad,
            bootstrap=args.bootstrap,
            seed=args.seed,
            anchor=args.anchor,
            interval=args.interval,
        )
    except (BattlesFileError, CountsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if board.unrated:
        print(f"note: no usable battles for: {', '.join(board.unrated)}", file=sys.stderr)
    if board.ridge > 0:
        print(
            f"note: no finite MLE (disconnected or winless models); ridge {board.ridge} applied",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps(board.as_records(), indent=2))
        return 0
    print(
        f"{'rank':>4}  {'model':30s} {'rating':>8} {'95% CI':>19} {'battles':>8} {'W':>7} {'L':>7} {'T':>7}"
    )
    for row in board.rows:
        ci = f"[{row.ci_low:.1f}, {row.ci_high:.1f}]"
        print(
            f"{row.rank:>4}  {row.model:30s} {row.rating:8.1f} {ci:>19} {row.battles:>8} "
            f"{row.wins:>7} {row.losses:>7} {row.ties:>7}"
        )
    return 0


def _bench(args: argparse.Namespace) -> int:
    from bench.ranking import format_table, run_bench

    if args.models < 2:
        print("error: --models must be >= 2", file=sys.stderr)
        return 2
    figures = run_bench(
        models=args.models,
        votes=args.votes,
        rounds=args.rounds,
        seed=args.seed,
        repeat=args.repeat,
        reference=not args.no_reference,
        sampler_trials=args.sampler_trials,
    )
    print(json.dumps(figures, indent=2) if args.json else format_table(figures))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    return _fit(args) if args.command == "fit" else _bench(args)
