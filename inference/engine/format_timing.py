"""The workload ``weights = "auto"`` times its candidates on (:mod:`inference.engine.weight_policy` decides
from the figures): each candidate format through each copy of the native kernels, or through XLA.

A decode-like step over 24 2048 x 2048 matrices at batch 1 and batch 8 (see the policy's docstring for
why that size); ``q4`` as it is served, a quarter of its matrices in ``q6``; that quarter alone in ``q6``
and in ``q8`` (what a ``q4`` model's 6-bit matrices are served in); the kernels' candidates in rounds of
their own, XLA's dots in theirs (:func:`measure`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

from inference.formats.matrices import SixBit, WeightFormat

PRODUCT_TOLERANCE = 1e-2  # relative RMS error of a product (bfloat16 rounding gives ~3e-3)
BATCHES = (1, 8)


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One format's figures on the workload: milliseconds per step at each batch, and product error."""

    format: WeightFormat
    native: bool
    ms: dict[int, float]
    product_error: float
    isa: str | None = None  # the kernel copy that multiplied it (block formats)
    narrow_rows: int = 0  # decode batches up to this many rows read one output at a time (kernels)
    # q6 or q8: not a format to serve but the 6-bit quarter of q4's workload alone, in that format
    six_bit: SixBit | None = None

    @property
    def label(self) -> str:
        label = f"{self.format}/{self.isa}" if self.isa else self.format
        if self.six_bit:
            label = f"6-bit as {self.six_bit}/{self.isa}"
        return f"{label}/narrow" if self.narrow_rows else label

    @property
    def passes(self) -> bool:
        return self.product_error <= PRODUCT_TOLERANCE

    @property
    def score(self) -> float:
        """The geometric mean of the times at each batch: 10% faster at batch 1 counts as much as 10%
        faster at batch 8. (Their sum let the batch-8 step, the longer one, decide alone: on an AMD Zen 4
        it picked q8, 1.2x slower than q4 at batch 1, for being 1.1x faster at batch 8.)"""
        return math.prod(self.ms.values()) ** (1 / len(self.ms))


Product = Callable[..., Any]  # (rows, one stored matrix) -> product; a kernel: (rows, *blocks, isa=...)


@dataclasses.dataclass(frozen=True)
class Matrix:
    """One stored matrix of the workload: its kind (``q4``, ``q6`` ...), product and float32 values."""

    kind: str
    product: Product
    dequantize: Callable[[Any], Any]
    stored: Any


Workload = list[Matrix]


@dataclasses.dataclass(frozen=True)
class Run:
    """One candidate on the workload: a format through a kernel copy (or XLA) with a tile setting."""

    format: WeightFormat
    isa: str | None
    narrow: int
    workload: Workload
    six_bit: SixBit | None = None

    @property
    def native(self) -> bool:
        return self.isa is not None


def measure(
    *, native: bool, isas: tuple[str, ...] = (), size: int = 2048, matrices: int = 24, repeats: int = 7
) -> tuple[Candidate, ...]:
    """Time each candidate format on the fixed workload (see the module's docstring); block formats only
    where ``native``, once per kernel copy in ``isas`` (default: the selected copy).

    ``q4`` is timed as it is served: the last quarter of its matrices in ``q6``, as a file's Q6_K matrices
    are (Qwen2.5-Coder-1.5B's head and half its ``ffn_down``, 35 % of its bytes; 45 of Gemma 3's 82
    matrices), so a copy slow at 6 bits is not chosen for being as fast at 4. The kernels' candidates
    take their rounds apart from XLA's dots, which run on XLA's own thread pool: in rounds shared with
    them the copies' figures came out closer together than they are (on an AMD Zen 4, q4 at eight rows:
    the ``avx2`` copy 1.3x slower than ``avx512bf16`` alone, 0.98-1.08x in shared rounds, where it then
    served every model, 1.2-1.5x slower at eight rows on Qwen2.5-Coder-1.5B's shapes)."""
    import jax.numpy as jnp
    import numpy as np

    import inference.engine.kernels as kernels

    rng = np.random.default_rng(0)
    dense = [jnp.asarray(rng.normal(0, 0.05, size=(size, size)).astype("float32")) for _ in range(matrices)]
    runs = [Run(fmt, None, 0, workload) for fmt, workload in xla_workloads(dense).items()]
    if native:
        workloads = block_workloads(dense)
        sixes = six_bit_workloads(workloads)
        copies = [(copy, narrow) for copy in isas or (kernels.selected_isa(),)
                  for narrow in (0, kernels.NARROW_ROWS)]
        runs = [Run(fmt, copy, narrow, on_copy(workload, copy)) for copy, narrow in copies
                for fmt, workload in workloads.items()] + [
                Run("q4", copy, narrow, on_copy(workload, copy), six_bit=kind) for copy, narrow in copies
                for kind, workload in sixes.items()] + runs
    del dense
    inputs = {batch: jnp.asarray(rng.normal(size=(batch, size)).astype("float32")) for batch in BATCHES}
    ms: dict[int, dict[int, float]] = {}
    for native_runs in (True, False):
        group = [i for i, run in enumerate(runs) if run.native == native_runs]
        ms.update(zip(group, time_rounds([runs[i] for i in group], inputs, repeats), strict=True))
    probe = rng.normal(size=(BATCHES[-1], size))
    return tuple(Candidate(run.format, run.native, ms[i], product_error_of(run.workload, probe), run.isa,
                           run.narrow, run.six_bit) for i, run in enumerate(runs))


def xla_workloads(dense: list[Any]) -> dict[WeightFormat, Workload]:
    """float32 and bfloat16 through XLA's own dots, the same matrices."""
    import jax.numpy as jnp

    def float32(x: Any, w: Any) -> Any:
        return jnp.dot(x, w.T)

    def bfloat16(x: Any, w: Any) -> Any:
        return jnp.dot(x.astype(jnp.bfloat16), w.T).astype(jnp.float32)

    return {
        "float32": [Matrix("float32", float32, lambda w: w, w) for w in dense],
        "bfloat16": [Matrix("bfloat16", bfloat16, lambda w: w.astype(jnp.float32), w.astype(jnp.bfloat16))
                     for w in dense],
    }


def block_workloads(dense: list[Any]) -> dict[WeightFormat, Workload]:
    """q4 as served (its last quarter of matrices in q6, at least one) and q8, each matrix with the kernel
    that multiplies it (the copy bound later) and its dequantization."""
    import jax

    import inference.engine.kernels as kernels
    from inference.formats.block_formats import (
        q4_dequantize,
        q4_quantize,
        q6_dequantize,
        q6_quantize,
        q8_dequantize,
        q8_quantize,
    )

    def stored(kind: str, kernel: Callable[..., Any], dequantize: Callable[..., Any],
               quantize: Callable[[Any], Any], matrices: list[Any]) -> Workload:
        return [Matrix(kind, kernel, lambda w: dequantize(*w), jax.jit(quantize)(w)) for w in matrices]

    fours = len(dense) - max(1, len(dense) // 4)
    return {
        "q4": stored("q4", kernels.q4_matmul, q4_dequantize, q4_quantize, dense[:fours])
        + stored("q6", kernels.q6_matmul, q6_dequantize, q6_quantize, dense[fours:]),
        "q8": stored("q8", kernels.q8_matmul, q8_dequantize, q8_quantize, dense),
    }


def six_bit_workloads(workloads: dict[WeightFormat, Workload]) -> dict[SixBit, Workload]:
    """q4's 6-bit quarter alone as it is served (``q6``) and the same matrices in ``q8`` (the same stored
    blocks as q8's workload): what decides the format of a q4 model's 6-bit matrices."""
    sixes = [i for i, m in enumerate(workloads["q4"]) if m.kind == "q6"]
    return {"q6": [workloads["q4"][i] for i in sixes], "q8": [workloads["q8"][i] for i in sixes]}


def on_copy(workload: Workload, isa: str) -> Workload:
    """The workload's matrices multiplied by the kernels' copy ``isa``."""

    def product(kernel: Product) -> Product:
        return lambda x, w: kernel(x, *w, isa=isa)

    return [dataclasses.replace(m, product=product(m.product)) for m in workload]


def time_rounds(runs: list[Run], inputs: dict[int, Any], repeats: int) -> list[dict[int, float]]:
    """Each run's median milliseconds per batch: every run once per round, round after round, so that a
    shared machine's slow spell (seen here: 2x within an hour) slows them all alike instead of the one
    measured then."""
    import jax
    import numpy as np

    import inference.engine.kernels as kernels

    steps = [jax.jit(lambda x, ws, products=tuple(m.product for m in run.workload):
                     [product(x, w) for product, w in zip(products, ws, strict=True)]) for run in runs]
    weights = [[m.stored for m in run.workload] for run in runs]
    times: dict[tuple[int, int], list[float]] = {}
    in_force = kernels.set_narrow_rows(0)
    try:
        for batch, x in inputs.items():
            for i, run in enumerate(runs):
                kernels.set_narrow_rows(run.narrow)
                jax.block_until_ready(steps[i](x, weights[i]))  # compile
            for _ in range(repeats):
                for i, run in enumerate(runs):
                    kernels.set_narrow_rows(run.narrow)
                    start = time.perf_counter()
                    jax.block_until_ready(steps[i](x, weights[i]))
                    times.setdefault((i, batch), []).append(time.perf_counter() - start)
    finally:
        kernels.set_narrow_rows(in_force)
    return [{batch: float(np.median(times[(i, batch)])) * 1e3 for batch in inputs} for i in range(len(runs))]


def product_error_of(workload: Workload, probe: Any) -> float:
    """The largest relative RMS error against float64, over the first matrix of each kind in the
    workload (q4's and its q6's)."""
    import jax.numpy as jnp
    import numpy as np

    firsts: dict[str, Matrix] = {}
    for m in workload:
        firsts.setdefault(m.kind, m)
    errors = []
    for m in firsts.values():
        got = np.asarray(m.product(jnp.asarray(probe.astype("float32")), m.stored), dtype=np.float64)
        exact = probe @ np.asarray(m.dequantize(m.stored), dtype=np.float64).T
        errors.append(float(np.sqrt(np.mean((got - exact) ** 2)) / np.sqrt(np.mean(exact**2))))
    return max(errors)
