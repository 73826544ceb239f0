"""``python -m inference bench``: one model's speed, the contract's concurrency figures, the resident
memory of several models, or the fidelity of the low-precision weight formats.

The measurements are :mod:`bench.inference`, :mod:`bench.inference_fidelity` and
:mod:`bench.inference_anchor`; this module checks the flags, picks the entry and prints the figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from commands.inference_models import (
    UsageError,
    cache_dir,
    find_entry,
    setup_compilation_cache,
    stderr_progress,
    weights_problem,
)
from inference.catalogue import CatalogueEntry


def cmd_bench(args: argparse.Namespace) -> int:
    """The ``bench`` subcommand: a JSON line, or (``--concurrency`` without ``--json``) a table."""
    from bench.inference import run_bench

    if args.new_tokens < 1 or args.runs < 1:
        raise UsageError("--new-tokens and --runs must be >= 1")
    levels = _concurrency_levels(args.concurrency or "1")
    if args.resident:
        return _bench_resident(args)
    if args.fidelity:
        entry = _bench_entry(args.model, None)
        return _bench_fidelity(entry, new_tokens=args.new_tokens, weights=args.weights)
    entry = _bench_entry(args.model, args.weights)
    if args.serve:
        return _bench_serve(args, entry, levels)
    if args.concurrency is None and not args.json:
        out = run_bench(entry, cache_dir=cache_dir(), new_tokens=args.new_tokens, runs=args.runs,
                        progress=stderr_progress(entry.slug))
        print(json.dumps(out))
        return 0
    setup_compilation_cache()
    from bench.inference import run_concurrency_bench

    if args.anchor:
        from bench.inference_anchor import AnchorUnavailable, anchor_python

        try:
            anchor_python(args.anchor_python)  # refuse before minutes of our own bench
        except AnchorUnavailable as exc:
            raise UsageError(str(exc)) from exc
    out = run_concurrency_bench(entry, cache_dir=cache_dir(), concurrency=levels, runs=args.runs,
                                batching=not args.serial, progress=stderr_progress(entry.slug),
                                anchor_python=(args.anchor_python or "") if args.anchor else None)
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"{out['model']}: cold start {out['cold_start_s']} s, RSS {out['rss_mb']} MB, "
          f"weights {out['weights']}")
    print(f"{'concurrency':>11} {'ttft ms':>9} {'decode tok/s':>13} {'aggregate tok/s':>16} "
          f"{'reused tokens':>14}")
    for row in out["results"]:
        cells = (row["concurrency"], row["ttft_ms"], row["decode_tok_s"], row["aggregate_tok_s"],
                 row["reused_prompt_tokens"])
        print("{:>11} {:>9} {:>13} {:>16} {:>14}".format(*cells))
    if "follow_up" in out:
        f = out["follow_up"]
        print(f"a follow-up turn of {f['prompt_tokens']} tokens: ttft {f['ttft_ms']} ms reusing "
              f"{f['reused_prompt_tokens']} of them, {f['ttft_ms_cold']} ms cold")
    if "anchor" in out:
        a = out["anchor"]
        print(f"llama.cpp {a['version']} ({a['threads']} threads), same file and prompt: "
              f"ttft {a['ttft_ms']} ms, decode {a['decode_tok_s']} tok/s, "
              f"one stream end to end {a['end_to_end_tok_s']} tok/s")
        print("ours / llama.cpp: " + ", ".join(f"{k} {v}" for k, v in out["ratios"].items()))
    return 0


def _bench_serve(args: argparse.Namespace, entry: CatalogueEntry, levels: list[int]) -> int:
    """``--serve``: in process, through ``inference serve``, through llama.cpp's server (``--anchor``)."""
    from bench.serve import run_serve_bench
    from inference.builder import entry_file

    if args.concurrency is None:
        raise UsageError("--serve needs --concurrency, e.g. --concurrency 1,8,32")
    anchor = None
    if args.anchor:
        from bench.inference_anchor import AnchorUnavailable, anchor_python

        try:
            anchor = anchor_python(args.anchor_python)
        except AnchorUnavailable as exc:
            raise UsageError(str(exc)) from exc
    setup_compilation_cache()
    gguf = entry_file(entry, cache_dir=cache_dir()) if anchor else None
    out = run_serve_bench(entry, gguf, levels, runs=args.runs,
                          new_tokens=args.new_tokens, anchor_python=anchor,
                          progress=lambda line: print(f"[bench {entry.slug}] {line}", file=sys.stderr))
    print(json.dumps(out))
    return 0


def _bench_entry(slug: str, weights: str | None) -> CatalogueEntry:
    """The catalogue entry a bench measures: local, installed, with an optional weight-format override."""
    entry = find_entry(slug)
    if weights is not None:
        entry = dataclasses.replace(entry, weights=weights)
    problem = weights_problem(entry)
    if problem:
        raise UsageError(problem)
    if entry.source_kind == "remote":
        raise UsageError(f"bench measures local models; {slug} is remote")
    return entry


def _bench_fidelity(entry: CatalogueEntry, *, new_tokens: int, weights: str | None) -> int:
    """``weights``: that format alone (``auto``: the one ``auto`` serves here), else every format."""
    from bench.inference_fidelity import FIDELITY_FORMATS, run_fidelity_bench
    from inference.engine.weight_policy import choose_weights

    formats: tuple[str, ...] = FIDELITY_FORMATS
    if weights is not None:
        chosen = choose_weights(weights)[0] if weights == "auto" else weights  # type: ignore[arg-type]
        if chosen not in FIDELITY_FORMATS:
            asked = f"auto ({chosen} here)" if weights == "auto" else weights
            raise UsageError(f"--fidelity compares formats against float32: give one of "
                             f"{', '.join(FIDELITY_FORMATS)} or auto, not {asked}")
        formats = (chosen,)
    try:
        out = run_fidelity_bench(entry, cache_dir=cache_dir(), new_tokens=new_tokens,
                                 progress=stderr_progress(entry.slug), formats=formats)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    print(json.dumps(out))
    return 0


def _bench_resident(args: argparse.Namespace) -> int:
    from bench.inference import run_resident_bench

    entries = [_bench_entry(slug.strip(), args.weights) for slug in args.model.split(",") if slug.strip()]
    setup_compilation_cache()
    print(json.dumps(run_resident_bench(entries, cache_dir=cache_dir(), progress=stderr_progress("bench"))))
    return 0


def _concurrency_levels(text: str) -> list[int]:
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        levels = []
    if not levels or min(levels) < 1:
        raise UsageError(f"--concurrency {text!r}: give positive integers separated by commas, e.g. 1,4,8")
    return levels
