"""``python -m inference kernels --bench``: every block format (q4, q6, q8, and q4/q8 with 8-bit
activations) through every copy of the native kernels
this CPU runs, beside XLA's float32 and bfloat16 dots, on SmolLM2's shapes, in one process.

The workload is one decoder layer's four matrices (fused q/k/v 576 -> 960, output 576 -> 576, fused
gate/up 576 -> 3072, down 1536 -> 576) plus the tied 49152 x 576 head: 31.8 M weights, random values,
multiplied by 1, 8 and 100 rows (a decode step alone, a batch, a prefill). Figures are medians of
``repeats`` calls, in milliseconds, with the weights per second they stand for.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

SHAPES = ((960, 576), (576, 576), (3072, 576), (576, 1536), (49152, 576))  # (out, in)
# ``--shapes``: SmolLM2's (the default), or Qwen2.5-Coder-1.5B's layer (fused q/k/v 1536 -> 2048, output,
# fused gate/up 1536 -> 17920, down 8960 -> 1536) and untied 151936 x 1536 head, 280 M weights: a call
# reads more than any cache holds, as a decode step of that model does.
WORKLOADS: dict[str, tuple[tuple[int, int], ...]] = {
    "smollm2": SHAPES,
    "qwen2.5-1.5b": ((2048, 1536), (1536, 1536), (17920, 1536), (1536, 8960), (151936, 1536)),
}
ROWS = (1, 8, 100)


def run_kernel_bench(
    *, repeats: int = 15, rows: tuple[int, ...] | None = None,
    shapes: tuple[tuple[int, int], ...] | None = None,
) -> dict[str, Any]:
    """``{cpu, isas, weights, results: [{path, rows, ms, gweights_s}]}``; ``path`` is ``FORMAT/ISA`` for
    the native kernels and ``FORMAT/xla`` for XLA's dots. ``rows`` and ``shapes`` default to :data:`ROWS`
    and :data:`SHAPES`."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import inference.engine.kernels as kernels
    from inference.formats import block_formats

    shapes = shapes or SHAPES
    rows = rows or ROWS
    rng = np.random.default_rng(0)
    dense = [jnp.asarray(rng.normal(0, 0.05, size=shape).astype("float32")) for shape in shapes]
    total = sum(n * k for n, k in shapes)
    width = max(k for _, k in shapes)
    q4 = [jax.jit(block_formats.q4_quantize)(w) for w in dense]
    q8 = [jax.jit(block_formats.q8_quantize)(w) for w in dense]
    q6 = [jax.jit(block_formats.q6_quantize)(w) for w in dense]
    def bfloat16_dot(x: Any, w: Any) -> Any:
        return jnp.dot(x.astype(jnp.bfloat16), w.T, preferred_element_type=jnp.float32)

    paths: dict[str, tuple[Callable[..., Any], list[Any]]] = {
        "float32/xla": (lambda x, w: jnp.dot(x, w.T), dense),
        "bfloat16/xla": (bfloat16_dot, [w.astype(jnp.bfloat16) for w in dense]),
    }
    isas = [isa for isa in kernels.supported_isas() if kernels.kernel_status(isa) is None]
    for isa in isas:
        for a8 in (False, True):
            suffix = "a8" if a8 else ""
            paths[f"q4{suffix}/{isa}"] = (
                lambda x, w, isa=isa, a8=a8: kernels.q4_matmul(x, *w, isa=isa, int8_activations=a8), q4)
            paths[f"q8{suffix}/{isa}"] = (
                lambda x, w, isa=isa, a8=a8: kernels.q8_matmul(x, *w, isa=isa, int8_activations=a8), q8)
        paths[f"q6/{isa}"] = (lambda x, w, isa=isa: kernels.q6_matmul(x, *w, isa=isa), q6)
    results = []
    for path, (product, weights) in paths.items():
        step = jax.jit(lambda x, ws, product=product: [product(x[:, : w_in(w)], w) for w in ws])
        for count in rows:
            x = jnp.asarray(rng.normal(size=(count, width)).astype("float32"))
            jax.block_until_ready(step(x, weights))
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                jax.block_until_ready(step(x, weights))
                times.append(time.perf_counter() - start)
            ms = statistics.median(times) * 1e3
            results.append({"path": path, "rows": count, "ms": ms, "gweights_s": total * count / ms / 1e6})
    return {"cpu": kernels.cpu_model(), "isas": isas, "weights": total, "results": results}


def w_in(weights: Any) -> int:
    """The input width of a dense ``(out, in)`` matrix or of q4/q6/q8 blocks."""
    first = weights[0] if isinstance(weights, tuple) else weights
    width = int(first.shape[1])
    return width * 2 if str(first.dtype) == "uint8" else width
