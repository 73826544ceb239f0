"""Which weight format a model is served in, and whether the native CPU kernels multiply it: the one
place that decides (``weights = "auto"`` and explicit formats alike).

``auto`` decides by measuring, not by assuming. On an accelerator, XLA's own bfloat16 dot is the fast
path and nothing is measured. On a CPU, the first model built on a machine times each candidate on a
small fixed workload (:mod:`inference.engine.format_timing`): a decode-like step over 24 2048 x 2048
matrices (100M weights: 63 MB even in q4, more than a server's L3 holds, so that every format streams
from memory as a real model's does; six matrices, 16 MB in q4 and 27 in q8, fit a Zen 5's 32 MB L3 and
made q8 look as fast as q4 at batch 1, where Qwen2.5-Coder-1.5B then decoded at 7 tok/s instead of 13) at
batch 1 and batch 8, in ``q4`` (a quarter of its matrices in ``q6``, as a file's 6-bit matrices are
served) and ``q8`` through each vector copy of the native kernels the CPU runs and ``float32`` and
``bfloat16`` through XLA, every candidate once per round for ``repeats`` rounds (medians), so that a
shared machine's slow spell falls on all of them alike, the kernels' rounds apart from XLA's. Each block
format is timed twice per copy: with the kernels' wide decode tiles (4 outputs' rows read interleaved) and
with narrow ones (one output at a time up to :data:`inference.engine.kernels.NARROW_ROWS` rows), the same
bits in another order of reading that is 1.35-1.8x faster at one row on an AMD Zen 4 and was the slower
one where the wide tiles were tuned. Of the formats whose products stay within ``PRODUCT_TOLERANCE`` of
float64 on the same stored weights it keeps the fastest, where a heavier one must be 1.2x faster to
displace a lighter one (:func:`decide`), and the kernels use the copy (and the tile width) that served
that format fastest (the most capable copy is not always the fastest: on an Intel Emerald Rapids the
``avx512`` copy's float32 products and ``avx512bf16``'s bfloat16 ones trade places; docs/BENCHMARKS.md).
The verdict is cached beside the kernels, keyed by the CPU, the copies measured and jax's version, so
later starts read it in a millisecond; starts that find none measure one at a time (a lock beside it: two
measuring at once time each other), the later ones reading the first's verdict; ``python -m inference
kernels --json`` prints it with the timings.

The same rounds time q4's 6-bit quarter alone in ``q6`` and in ``q8`` on each copy: a ``q4`` model's
6-bit matrices (a file's Q6_K ones: Qwen2.5-Coder-1.5B's head and half its ``ffn_down``) are served in
``q8`` where that copy multiplies them at least :data:`HEAVIER_MARGIN` times faster (``q8`` re-quantizes
them and keeps 1.2x their bytes), else in ``q6`` as they are (:func:`decide_six_bit`). On an AMD Zen 3
(AVX2) widening 6-bit weights cost more than reading 8-bit ones: q8 1.4x faster at one row, 1.9x at eight.

What the workload cannot judge is how well a format stores a given file's weights: that is the converter's
rule (``q4`` only for matrices it reproduces, ``q8`` for the rest; :mod:`inference.engine.weights`) and
``python -m inference bench --fidelity`` (next-token agreement with float32 on the real model). ``auto``
only considers formats whose agreement there stayed >= 0.99: ``int8`` (keras' per-channel scheme, 0.89
on SmolLM2) and the 8-bit-activation formats ``q4a8``/``q8a8`` (llama.cpp's integer products: twice q4's
speed on AVX2, but 0.954/0.964 on SmolLM2, AMD EPYC AVX2, 2026-12-01) are opt-in (``weights = "q4a8"``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from inference.engine.format_timing import Candidate, measure
from inference.engine.turns import taking_turns
from inference.formats.matrices import BLOCK_FORMATS, SIX_BIT_FORMATS, WEIGHT_FORMATS, SixBit, WeightFormat

log = logging.getLogger(__name__)

# Bytes a weight keeps resident, fewest first: q4 0.63 (its offsets included), q8 1.06, bfloat16 2, float32 4.
LIGHTEST_FIRST: tuple[WeightFormat, ...] = ("q4", "q8", "bfloat16", "float32")
HEAVIER_MARGIN = 1.2  # how much better a heavier format must score to be served instead of a lighter one
MEASURE_VERSION = 9  # bump when the workload or the score changes: old verdicts are then measured again


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What ``auto`` serves on this machine, why, and the measurements it came from."""

    format: WeightFormat
    native: bool
    why: str
    candidates: tuple[Candidate, ...] = ()
    isa: str | None = None
    cpu: str = ""
    cached: bool = False
    narrow_rows: int = 0  # the kernels' tile setting that served the fastest block format
    six_bit: SixBit = "q6"  # what a q4 model's 6-bit matrices are served in (decide_six_bit)
    six_bit_why: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "format": self.format, "native": self.native, "why": self.why, "isa": self.isa, "cpu": self.cpu,
            "cached": self.cached, "narrow_rows": self.narrow_rows, "six_bit": self.six_bit,
            "six_bit_why": self.six_bit_why,
            "candidates": [{"format": c.format, "isa": c.isa, "native": c.native, "passes": c.passes,
                            "ms": {str(b): round(t, 3) for b, t in c.ms.items()},
                            "product_error": c.product_error, "narrow_rows": c.narrow_rows,
                            "six_bit": c.six_bit}
                           for c in self.candidates],
        }


def decide(candidates: tuple[Candidate, ...]) -> tuple[Candidate, str]:
    """The candidate ``auto`` serves and a sentence saying why (ValueError if none passes): of the passing
    candidates whose score (:attr:`Candidate.score`) is within :data:`HEAVIER_MARGIN` of the fastest, the
    lightest format (:data:`LIGHTEST_FIRST`), so a heavier format is served only where it is that much
    faster.

    Speed is not all a heavier format costs: q8 keeps 1.7x q4's bytes resident (every bundled model at
    once must fit the memory budget) and re-quantizes a Q4_K or Q6_K file's weights, which q4 (with q6 for
    the file's 6-bit matrices) serves as they are. Without the margin the choice flipped with the
    machine's spells: on an AMD Zen 4 the same source picked q4 one day and q8 (1.25x slower at one row,
    1.4x faster at eight: a score 6% better) the next."""
    candidates = tuple(c for c in candidates if c.six_bit is None)  # formats, not q4's 6-bit quarter alone
    passing = sorted((c for c in candidates if c.passes), key=lambda c: c.score)
    if not passing:
        raise ValueError("no weight format passed the product-error check")
    near = [c for c in passing if c.score <= passing[0].score * HEAVIER_MARGIN]
    best = min(near, key=_weight)  # the lightest of those; min keeps the fastest of equal weight
    figures = ", ".join(f"{c.label} {c.ms[1]:.2f}/{c.ms[8]:.2f} ms" for c in sorted(candidates,
                                                                                      key=lambda c: c.score))
    failed = [c.label for c in candidates if not c.passes]
    why = (f"measured fastest at batch 1/8 ({figures})" if best is passing[0] else
           f"within {HEAVIER_MARGIN:.2f}x of {passing[0].label}, which keeps more bytes a weight, at "
           f"batch 1/8 ({figures})")
    if failed:
        why += f"; {', '.join(failed)} failed the product check"
    return best, why


def decide_six_bit(
    candidates: tuple[Candidate, ...], isa: str | None, narrow_rows: int
) -> tuple[SixBit, str]:
    """What a q4 model's 6-bit matrices are served in on the kernels' copy ``isa`` (with its tile setting)
    and why: ``q8`` where its timing of them beats ``q6``'s by :data:`HEAVIER_MARGIN` (scores as
    :func:`decide`'s) and its products pass, else ``q6``, which serves them as they are."""
    timed = {c.six_bit: c for c in candidates if c.six_bit and c.isa == isa and c.narrow_rows == narrow_rows}
    six, eight = timed.get("q6"), timed.get("q8")
    if six is None or eight is None:
        return "q6", "as they are (q6 and q8 were not both timed on the kernels' copy)"
    figures = f"q6 {six.ms[1]:.2f}/{six.ms[8]:.2f} ms, q8 {eight.ms[1]:.2f}/{eight.ms[8]:.2f} ms at batch 1/8"
    ratio = six.score / eight.score
    if eight.passes and ratio >= HEAVIER_MARGIN:
        return "q8", f"q8 multiplies them {ratio:.2f}x as fast as q6 on {isa} ({figures})"
    return "q6", f"as they are: q8 {ratio:.2f}x as fast, not {HEAVIER_MARGIN:.2f}x ({figures})"


def served_six_bit(weight_format: WeightFormat, native: bool) -> SixBit:
    """What a model's 6-bit matrices are served in: ``q8`` only for a native ``q4`` model where the
    verdict in force (``auto``'s, or the cached one an explicit format reads) measured it faster."""
    return _six_bit_in_force if weight_format == "q4" and native else "q6"


_six_bit_in_force: SixBit = "q6"


def _weight(candidate: Candidate) -> int:
    fmt = candidate.format
    return LIGHTEST_FIRST.index(fmt) if fmt in LIGHTEST_FIRST else len(LIGHTEST_FIRST)


def choose_weights(requested: WeightFormat | Literal["auto"]) -> tuple[WeightFormat, bool, str]:
    """(format, native kernels?, why) for a requested format on the devices this model is built for.

    An explicit block format runs natively where it can and as plain XLA otherwise; the other explicit
    formats never need the kernels (nor build them); ``auto`` is :func:`auto_verdict`'s."""
    if requested != "auto" and requested not in WEIGHT_FORMATS:
        raise ValueError(f"weight format {requested!r}: choose auto or one of {', '.join(WEIGHT_FORMATS)}")
    if requested != "auto" and requested not in BLOCK_FORMATS:
        return requested, False, f"{requested} weights, XLA"
    if requested == "auto":
        verdict = auto_verdict()
        return verdict.format, verdict.native, verdict.why
    blocked = native_blocker()
    if blocked is None:
        _prefer_measured_copy()
    return (requested, True, "native CPU kernels") if blocked is None else (requested, False, blocked)


def min_batch_for(weights: WeightFormat) -> int:
    """XLA-CPU multiplies a single bfloat16/int8 row on a slow path; two rows cost less than one."""
    return 2 if weights in ("bfloat16", "int8") else 1


def native_blocker() -> str | None:
    """Why the native CPU kernels cannot serve a model built here (None: they can)."""
    import jax
    import keras

    import inference.engine.kernels as kernels

    if jax.default_backend() != "cpu":
        return f"XLA on {jax.default_backend()} (the native kernels are CPU-only)"
    distribution = keras.distribution.distribution()
    if distribution is not None and distribution.device_mesh.devices.size > 1:
        return "XLA on a sharded mesh (the native kernels run on one device)"
    status = kernels.kernel_status()
    return None if status is None else f"XLA: native kernels unavailable ({status.splitlines()[0]})"


def auto_verdict(*, measure_fn: Callable[..., tuple[Candidate, ...]] | None = None,
                 again: bool = False) -> Verdict:
    """What ``auto`` serves here: bfloat16 on an accelerator (not measured); on a CPU the cached
    measurement, measuring first if there is none (block formats only where the native kernels can
    serve the model: one CPU device and a built copy of the kernels). ``again``: measure now and replace
    the cached verdict (``python -m inference kernels --measure``: one measured while the machine was
    busy can be far from its quiet figures)."""
    import jax

    if jax.default_backend() != "cpu":
        return Verdict("bfloat16", False, f"XLA bfloat16 on {jax.default_backend()} (not measured)")
    blocked = native_blocker()
    native = blocked is None
    isas = copies_to_measure() if native else ()
    path = _verdict_path(isas)
    verdict = None if again else _read_verdict(path)
    if verdict is None:
        # Starts measuring at once would time each other (two starts of the app on a new machine cached
        # q8 at 2-3x the quiet timings, AMD Zen 5): the later one waits and reads the first's verdict.
        with taking_turns(path.with_suffix(".lock"), on_wait=lambda: log.info(
                "weights = auto: another start is measuring; waiting for its verdict")):
            cached = None if again else _read_verdict(path)
            verdict = cached or _measured_verdict(path, native, isas, blocked, measure_fn)
    if native:
        _use_measured_kernels(verdict)
    if blocked is not None:
        verdict = dataclasses.replace(verdict, why=f"{blocked}; {verdict.why}")
    return verdict


def _measured_verdict(path: Path, native: bool, isas: tuple[str, ...], blocked: str | None,
                      measure_fn: Callable[..., tuple[Candidate, ...]] | None) -> Verdict:
    """Measure the candidates and decide; cache the verdict at ``path`` unless the kernels' build failed."""
    import inference.engine.kernels as kernels

    candidates = (measure_fn or measure)(native=native, isas=isas)
    best, why = decide(candidates)
    fastest = fastest_native(candidates, best.format)
    isa, narrow = (fastest.isa, fastest.narrow_rows) if fastest else (None, 0)
    six_bit, six_bit_why = decide_six_bit(candidates, isa, narrow)
    verdict = Verdict(best.format, best.native, why, candidates, isa, kernels.cpu_model(),
                      narrow_rows=narrow, six_bit=six_bit, six_bit_why=six_bit_why)
    if blocked is not None and kernels.kernel_status() is not None:
        # a failed build (no compiler yet, a timeout, a full disk) may succeed next start: a verdict
        # cached now would keep the XLA formats until the kernels' source changed
        log.warning("weights = auto: %s, not cached (%s)", best.label, blocked)
    else:
        _write_verdict(path, verdict)
    log.info("weights = auto: %s (%s)", best.label, why)
    return verdict


def copies_to_measure() -> tuple[str, ...]:
    """The kernel copies ``auto`` times: the forced one, else every copy the CPU runs that decodes weights
    with vector instructions (the scalar copy only where there is no other)."""
    import inference.engine.kernels as kernels

    forced = kernels.forced_isa()
    if forced is not None:
        return (forced,)
    supported = kernels.supported_isas()
    return tuple(isa for isa in supported if kernels.vector_decode(isa)) or supported[:1]


def fastest_native(candidates: tuple[Candidate, ...], fmt: WeightFormat | None = None) -> Candidate | None:
    """The fastest passing block-format candidate, of ``fmt`` where that was measured natively (the
    verdict's format: the kernels then run its best copy and tiles); None: none was measured."""
    native = sorted((c for c in candidates if c.native and c.passes and c.isa and c.six_bit is None),
                    key=lambda c: c.score)
    chosen = [c for c in native if c.format == fmt] or native
    return chosen[0] if chosen else None


def fastest_copy(candidates: tuple[Candidate, ...], fmt: WeightFormat | None = None) -> str | None:
    """The kernel copy of :func:`fastest_native` (None: none was measured)."""
    fastest = fastest_native(candidates, fmt)
    return fastest.isa if fastest else None


def _use_measured_kernels(verdict: Verdict) -> None:
    """The kernels use the copy and the tile width that served the verdict's fastest block format; q4's
    6-bit matrices are served as it measured them fastest there."""
    global _six_bit_in_force
    import inference.engine.kernels as kernels

    kernels.prefer_isa(verdict.isa)
    kernels.set_narrow_rows(verdict.narrow_rows)
    _six_bit_in_force = verdict.six_bit


def _prefer_measured_copy() -> None:
    """An explicit block format uses the copy (and tiles) a cached ``auto`` verdict measured fastest (never
    measures)."""
    verdict = _read_verdict(_verdict_path(copies_to_measure()))
    if verdict is not None:
        _use_measured_kernels(verdict)


def _verdict_path(isas: tuple[str, ...]) -> Path:
    import jax

    import inference.engine.kernels as kernels

    key = hashlib.sha256()
    # the whole kernel source: a verdict measured on other kernels is measured again
    source = kernels.source_digest()
    for part in (str(MEASURE_VERSION), source, ",".join(isas),
                 jax.__version__, kernels.cpu_model(), " ".join(sorted(kernels.cpu_flags()))):
        key.update(part.encode())
    return kernels.cache_dir() / f"weights-auto-{key.hexdigest()[:16]}.json"


def _read_verdict(path: Path) -> Verdict | None:
    try:
        data = json.loads(path.read_text())
        candidates = tuple(Candidate(c["format"], c["native"], {int(b): t for b, t in c["ms"].items()},
                                     c["product_error"], c.get("isa"), int(c.get("narrow_rows", 0)),
                                     c.get("six_bit"))
                           for c in data["candidates"])
        six_bit = data["six_bit"]
        if six_bit not in SIX_BIT_FORMATS:
            raise ValueError(f"six_bit {six_bit!r}")
        return Verdict(data["format"], data["native"], data["why"], candidates, data["isa"], data["cpu"],
                       cached=True, narrow_rows=int(data.get("narrow_rows", 0)), six_bit=six_bit,
                       six_bit_why=data["six_bit_why"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_verdict(path: Path, verdict: Verdict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_suffix(f".{os.getpid()}.tmp")
        scratch.write_text(json.dumps(verdict.as_json(), indent=1))
        os.replace(scratch, path)  # atomic: a concurrent process reads the whole verdict or none
    except OSError as exc:  # a read-only cache: measure again next time
        log.warning("could not cache the weights = auto verdict in %s: %s", path, exc)
