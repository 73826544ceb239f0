"""``python -m db export``: argument parsing and the progress bar around :func:`db.export.export_battles`.

Wired into :mod:`commands.db` through
``add_export_parser(subparsers)`` and ``run_export(args) -> int``.
It reads ``settings.py`` for the hashing salt (the database URL comes through :mod:`commands.db`).
Bad input exits 2 with one line on stderr; success prints one JSON line (counts and files) on stdout
for scripts.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import sys
from dataclasses import asdict
from typing import Any

from db import InvalidInput, VoteFilters
from db.export import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_VIEW,
    FORMATS,
    VIEWS,
    ExportError,
    check,
    check_modes,
    export_battles,
    parse_date,
)


def add_export_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``export`` subcommand to ``python -m db``'s subparsers."""
    p = subparsers.add_parser(
        "export",
        help="export dialogues (nested or flat tables), the battles file or training views, with a card",
    )
    p.add_argument("--url", default=None, help="SQLAlchemy URL (default: ARENA_DATABASE_URL / ./var)")
    p.add_argument("--format", dest="fmt", required=True, metavar="{jsonl,parquet,csv}")
    p.add_argument("--out", required=True, help="output file (CSV tables: a folder); README.md beside it")
    p.add_argument("--scenario", default=None, help="only battles of this scenario slug")
    p.add_argument("--since", default=None, help="battles created on/after DATE (YYYY-MM-DD or ISO datetime)")
    p.add_argument("--until", default=None, help="battles created up to DATE (a bare date includes that day)")
    p.add_argument("--mode", default=None, metavar="MODES",
                   help="only battles of these modes, comma-separated: anonymous,named,direct,auto")
    p.add_argument("--corrections-only", action="store_true", help="only battles with a correction")
    p.add_argument("--include-open", action="store_true",
                   help="also battles still open (left out by default: their contestants are not public yet)")
    p.add_argument("--exclude-flagged", action="store_true",
                   help="leave out battles flagged by moderation (kept by default, with status flagged; "
                   "the public Dataset page always leaves them out)")
    p.add_argument("--view", default=DEFAULT_VIEW, metavar="{" + ",".join(VIEWS) + "}",
                   help="dialogues: nested battles (default; CSV: flat tables); battles: one row per counted "
                   "vote for `python -m ranking fit --battles`; preferences / corrections: training views")
    p.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK_SIZE, help="battles per page")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return p


class _Bar:
    """A tqdm progress bar on stderr, counting battles (created lazily once the total is known)."""

    def __init__(self, enabled: bool) -> None:
        self._enabled = enabled
        self._bar: Any = None
        self._done = 0

    def __call__(self, done: int, total: int) -> None:
        if not self._enabled:
            return
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit="battle", file=sys.stderr, desc="export", leave=True)
        self._bar.update(done - self._done)
        self._done = done

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _filters(args: argparse.Namespace) -> VoteFilters:
    modes = None
    if args.mode is not None:
        modes = check_modes(tuple(m.strip() for m in args.mode.split(",") if m.strip()))
    return check(VoteFilters(
        scenario=args.scenario,
        since=parse_date(args.since) if args.since else None,
        until=parse_date(args.until, end=True) if args.until else None,
        corrections_only=args.corrections_only,
        include_open=args.include_open,
        exclude_flagged=args.exclude_flagged,
        modes=modes,
    ))


def public_replay(filters: VoteFilters, delay_hours: float) -> VoteFilters:
    """The replay view's items are tests others run: only battles public on the site (closed more than
    ``ARENA_PUBLIC_EXPORT_DELAY_HOURS`` ago; 0: every closed battle)."""
    if not delay_hours:
        return filters
    cutoff = dt.datetime.now(dt.UTC) - dt.timedelta(hours=delay_hours)
    return dataclasses.replace(filters, closed_before=cutoff)


def run_export(args: argparse.Namespace) -> int:
    """Run ``python -m db export``; 0 on success, 2 with a one-line reason on bad input."""
    from db import make_engine

    bar = _Bar(enabled=not args.no_progress)
    try:
        if args.fmt not in FORMATS:
            raise ExportError(f"unknown format {args.fmt!r}: use one of {', '.join(FORMATS)}")
        if args.view not in VIEWS:
            raise ExportError(f"unknown view {args.view!r}: use one of {', '.join(VIEWS)}")
        if args.chunk_size < 1:
            raise ExportError("--chunk-size must be >= 1")
        filters = _filters(args)
        from settings import get_settings

        settings = get_settings()
        salt = settings.hash_salt.get_secret_value()
        if args.view == "replay":
            filters = public_replay(filters, settings.public_export_delay_hours)
        engine = make_engine(args.url)
        try:
            result = export_battles(
                engine, fmt=args.fmt, out=args.out, salt=salt, filters=filters,
                view=args.view, chunk_size=args.chunk_size, progress=bar,
            )
        finally:
            bar.close()
            engine.dispose()
    except (ExportError, InvalidInput) as exc:
        print(f"error: {exc}".splitlines()[0], file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: cannot write the export: {exc}".splitlines()[0], file=sys.stderr)
        return 2
    print(json.dumps({"format": result.fmt, "view": result.view, "counts": asdict(result.counts),
                      "files": result.files, "card": result.card}))
    return 0
