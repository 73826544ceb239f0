"""``python -m inference``: list the catalogue, chat with a model, generate one reply, benchmark.

Settings come through :mod:`wiring` (the models folder, the keys, the compilation cache); the
shared helpers are :mod:`commands.inference_models`, the ``bench`` subcommand is
:mod:`commands.inference_bench` (over :mod:`bench.inference`, :mod:`bench.inference_fidelity` and
:mod:`bench.inference_anchor`). Bad input (unknown slug, missing wheel, unreadable messages file,
invalid catalogue) exits with status 2 and one line that says how to fix it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "jax")

from commands.inference_bench import cmd_bench  # noqa: E402
from commands.inference_models import (  # noqa: E402
    UsageError,
    build,
    entries,
    find_entry,
    load_for_shardings,
    sampling_params,
    weights_problem,
)
from commands.inference_serve import add_serve_parser  # noqa: E402
from inference.catalogue import WEIGHTS  # noqa: E402
from inference.protocol import ChatMessage  # noqa: E402

EXIT_BAD_INPUT = 2


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["shardings"]:  # its own parser lives next to the layout maps
        from inference.sharding import cli_shardings

        return cli_shardings(argv[1:], load=load_for_shardings)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


def build_parser() -> argparse.ArgumentParser:
    """The CLI's parser (also read by the docs tests)."""
    parser = argparse.ArgumentParser(prog="python -m inference", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="the catalogue's models, their sources and whether the weights are here")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(handler=_cmd_list)

    p = sub.add_parser("chat", help="interactive streamed chat with one model (empty line or Ctrl-D ends)")
    p.add_argument("--model", required=True, help="catalogue slug")
    p.add_argument("--system", default=None, help="system prompt")
    _sampling_flags(p)
    p.set_defaults(handler=_cmd_chat)

    p = sub.add_parser("generate", help="one reply to the messages in a JSON file")
    p.add_argument("--model", required=True, help="catalogue slug")
    p.add_argument("--messages", required=True, type=Path, help='JSON: [{"role": ..., "content": ...}, ...]')
    p.add_argument("--json", action="store_true", help="print {text, finish_reason, prompt_tokens, ...}")
    _sampling_flags(p)
    p.set_defaults(handler=_cmd_generate)

    p = sub.add_parser("bench", help="compile time, time to first token and decode speed of one model")
    p.add_argument("--model", required=True, help="catalogue slug")
    p.add_argument("--new-tokens", type=int, default=64, help="tokens to generate per run (default 64)")
    p.add_argument("--runs", type=int, default=3, help="measured runs after the warm-up run (default 3)")
    p.add_argument("--concurrency", default=None,
                   help="e.g. 1,4,8: clients at once, 100-token prompt, 64 new tokens (issue-7 figures)")
    p.add_argument("--json", action="store_true", help="with --concurrency: one JSON object, not a table")
    p.add_argument("--serial", action="store_true",
                   help="with --concurrency: one request at a time (no dynamic batching), for comparison")
    p.add_argument("--resident", action="store_true",
                   help="--model A,B,...: load every listed model as the pool does and print the RSS of all")
    p.add_argument("--fidelity", action="store_true",
                   help="top-1 agreement and KL of every other format (with --weights: that one) against "
                        "float32 (teacher-forced)")
    p.add_argument("--weights", choices=WEIGHTS, default=None,
                   help="override the catalogue's weight format: " + ", ".join(WEIGHTS))
    p.add_argument("--anchor", choices=["llama.cpp"], default=None,
                   help="with --concurrency: also run llama.cpp on the same GGUF file and prompt ids, after "
                        "ours, and print both and the ratios")
    p.add_argument("--anchor-python", default=None,
                   help="interpreter with llama-cpp-python (default: $ARENA_ANCHOR_PYTHON, else this one)")
    p.add_argument("--serve", action="store_true",
                   help="with --concurrency: the same streams in process, through `inference serve` over "
                        "HTTP and (with --anchor) through llama.cpp's server; figures and ratios as JSON")
    p.set_defaults(handler=cmd_bench)

    p = sub.add_parser("kernels", help="build the native CPU kernels for this machine if need be; report")
    p.add_argument("--json", action="store_true",
                   help="one JSON object: {ready, reason, library, products, decode_activations, "
                        "prefill_activations, vector_decode, cache_dir, isa, isas, cpu, auto}")
    p.add_argument("--bench", action="store_true",
                   help="time every block format through every copy of the kernels this CPU runs beside "
                        "XLA's float32/bfloat16 dots (1/8/100 rows)")
    p.add_argument("--measure", action="store_true",
                   help="measure what weights = \"auto\" serves again now and cache that verdict instead "
                        "(for one measured while the machine was busy)")
    p.add_argument("--shapes", choices=("smollm2", "qwen2.5-1.5b"), default="smollm2",
                   help="with --bench: one layer's matrices and the head of SmolLM2 (31.8 M weights) or of "
                        "Qwen2.5-Coder-1.5B (280 M weights, more than a cache holds)")
    p.set_defaults(handler=_cmd_kernels)

    add_serve_parser(sub)
    sub.add_parser("shardings", help="every weight's sharding on a device mesh (see `shardings --help`)")
    return parser


def _sampling_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-new-tokens", type=int, default=None, help="cap on reply tokens")
    p.add_argument("--temperature", type=float, default=None, help="0 is greedy (default: catalogue's)")
    p.add_argument("--top-p", type=float, default=None, help="nucleus mass in (0, 1]")
    p.add_argument("--top-k", type=int, default=None, help="keep the k best tokens (0: off)")
    p.add_argument("--seed", type=int, default=None, help="sampling seed, for repeatable replies")


# ---- helpers --------------------------------------------------------------------------------------


def _cmd_kernels(args: argparse.Namespace) -> int:
    """Exit 0 when the kernels are ready, 1 when not; either way say what ``weights = "auto"`` serves
    here and why (measuring it first on a new machine)."""
    from inference.engine import kernels
    from inference.engine.weight_policy import auto_verdict

    if args.bench:
        return _kernel_bench(json_out=args.json, shapes=args.shapes)
    # first: it picks the copy it measured fastest, which the lines below report
    verdict = auto_verdict(again=args.measure)
    reason = kernels.kernel_status()
    try:
        isa: str | None = kernels.selected_isa()
    except kernels.KernelUnavailable:
        isa = None
    report = {
        "ready": reason is None,
        "reason": reason,
        "library": str(kernels.library_path()) if reason is None else None,
        "products": kernels.product_type() if reason is None else None,
        "decode_activations": kernels.decode_activations() if reason is None else None,
        "prefill_activations": kernels.prefill_activations() if reason is None else None,
        "vector_decode": kernels.vector_decode() if reason is None else None,
        "cache_dir": str(kernels.cache_dir()),
        "isa": isa,
        "isas": list(kernels.supported_isas()),
        "cpu": kernels.cpu_model(),
        "auto": verdict.as_json(),
    }
    if args.json:
        print(json.dumps(report))
        return 0 if reason is None else 1
    if reason is None:
        print(f"native CPU kernels ready: {report['library']} ({isa}; products in {report['products']}, "
              f"a decode batch's q4 rows in {report['decode_activations']}, "
              f"a prefill's in {report['prefill_activations']})")
    else:
        print(f"native CPU kernels unavailable: {reason}")
    print(f"weights = \"auto\" serves {verdict.format}{' (native kernels)' if verdict.native else ''}: "
          f"{verdict.why}{' [cached]' if verdict.cached else ''}")
    if verdict.native and verdict.format == "q4":
        print(f"a q4 model's 6-bit matrices in {verdict.six_bit}: {verdict.six_bit_why}")
    return 0 if reason is None else 1


def _kernel_bench(*, json_out: bool, shapes: str = "smollm2") -> int:
    from inference.engine.kernel_bench import WORKLOADS, run_kernel_bench

    out = run_kernel_bench(shapes=WORKLOADS[shapes])
    if json_out:
        print(json.dumps(out))
        return 0
    print(f"{out['cpu']}: copies {', '.join(out['isas'])}; {out['weights'] / 1e6:.1f} M weights per call")
    print(f"{'path':>16} {'rows':>5} {'ms':>9} {'G weights/s':>12}")
    for row in out["results"]:
        print(f"{row['path']:>16} {row['rows']:>5} {row['ms']:>9.3f} {row['gweights_s']:>12.2f}")
    return 0


def _read_messages(path: Path) -> list[ChatMessage]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}; fix the --messages path") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not valid JSON ({exc}); write a list of role/content objects") from exc
    if isinstance(data, dict):
        data = data.get("messages")
    ok = isinstance(data, list) and data and all(
        isinstance(m, dict) and m.get("role") in ("system", "user", "assistant")
        and isinstance(m.get("content"), str) for m in data
    )
    if not ok:
        raise UsageError(
            f"{path}: expected a non-empty list of {{\"role\": system|user|assistant, \"content\": str}}"
        )
    return [ChatMessage(m["role"], m["content"]) for m in data]


# ---- commands -------------------------------------------------------------------------------------


def _cmd_list(args: argparse.Namespace) -> int:
    for entry in entries():
        problem = weights_problem(entry, assemble=False) if entry.enabled else None
        row = {
            "slug": entry.slug,
            "name": entry.name,
            "family": entry.family,
            "source": entry.source,
            "template": entry.template,
            "dtype": entry.dtype,
            "context_length": entry.context_length,
            "enabled": entry.enabled,
            "available": problem is None,
            "problem": problem,
        }
        if args.json:
            print(json.dumps(row))
        else:
            state = "ok" if problem is None else f"MISSING: {problem}"
            flag = "" if entry.enabled else " (disabled)"
            print(f"{entry.slug:28} {entry.family:8} {entry.template:8} {entry.source}{flag}  [{state}]")
    return 0


def _cmd_generate(args: argparse.Namespace) -> int:
    from inference.protocol import complete

    messages = _read_messages(args.messages)
    entry = find_entry(args.model)
    params = sampling_params(entry, args)
    model = build(entry)
    result = complete(model, messages, params)
    if args.json:
        keys = ("text", "finish_reason", "prompt_tokens", "new_tokens", "ttft_ms", "total_ms")
        out = {k: getattr(result, k) for k in keys}
        if result.error:
            out["error"] = result.error
        print(json.dumps(out, ensure_ascii=False))
    else:
        print(result.text)
    if result.finish_reason == "error":
        print(f"error: {result.error}", file=sys.stderr)
        return 1
    return 0


def _cmd_chat(args: argparse.Namespace) -> int:
    from inference.protocol import GenerationResult, TextDelta

    entry = find_entry(args.model)
    params = sampling_params(entry, args)
    model = build(entry)
    history: list[ChatMessage] = [ChatMessage("system", args.system)] if args.system else []
    print(f"{entry.name} ready. Empty line or Ctrl-D to quit.", file=sys.stderr)
    while True:
        try:
            line = input("> ")
        except EOFError:
            break
        if not line.strip():
            break
        history.append(ChatMessage("user", line))
        reply = ""
        for event in model.stream(history, params):
            if isinstance(event, TextDelta):
                print(event.text, end="", flush=True)
            elif isinstance(event, GenerationResult):
                reply = event.text
                tail = f" error: {event.error}" if event.error else ""
                print(f"\n[{event.finish_reason}, {event.new_tokens} tokens, {event.total_ms:.0f} ms{tail}]",
                      file=sys.stderr)
        history.append(ChatMessage("assistant", reply))
    return 0
