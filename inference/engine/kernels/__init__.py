"""Native CPU kernels for the fast engine, compiled for the machine they run on.

``cpu_kernels.cc`` and its parts (the headers beside it, one concern each) hold two things XLA-CPU does
slowly for a decoder:

- products of activations with weights kept in llama.cpp's block layouts: ``q8`` (int8, one float16
  scale per 32 weights, Q8_0), ``q4`` (4-bit, a float16 scale and offset per 32 weights, Q4_1) and
  ``q6`` (6-bit, ``w = d·(q − 32)`` with a float16 ``d`` per 16 weights: what a Q6_K file's values are).
  Decode on a small CPU is bound by the bytes of weights read per token; XLA has no such product (it
  would convert the whole matrix to float first). Products are bfloat16 with float32 sums where the CPU
  has AVX512-BF16, float32 elsewhere (:func:`product_type`);
- attention: write the new tokens' keys/values into each row's own cache slots, in place, and let each
  query attend over the slots it can see only (XLA runs about ten small ops per layer over the whole
  cache), skipping a padded prompt's padding.

The C++ source (XLA FFI handlers) is compiled on first use with the machine's C++ compiler, once per
instruction set (:data:`ISAS`: ``avx512bf16``, ``avx512``, ``avx2`` and ``scalar`` on x86-64, the
architecture's baseline elsewhere) with explicit target flags, into a per-user cache keyed by a hash of
the source, the compiler command, jaxlib's version and the architecture; each copy is registered with JAX
under its own names. The copy used is the most capable one the CPU runs (:func:`selected_isa`), or the one
``ARENA_KERNEL_ISA`` forces, so tests exercise every path on any CPU that runs it. Where nothing can be
built (no compiler, another OS) or the forced copy cannot run here, :func:`kernel_status` says why and
callers use :mod:`inference.formats.block_formats`' ``*_reference`` products: the same arithmetic in plain
XLA, on any backend and sharding.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("cpu_kernels.cc")  # the translation unit (its parts: headers beside it)


def sources() -> list[Path]:
    """Every file the kernels are compiled from: :data:`SOURCE` and the headers beside it."""
    return [SOURCE, *sorted(SOURCE.parent.glob("*.h"))]


def source_digest() -> str:
    """A hash of every source file's name and text: a change to any line of any part changes it."""
    digest = hashlib.sha256()
    for path in sources():
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()
_TARGETS = {  # JAX name -> symbol
    "fixit_q8_matmul": "FixitQ8Matmul",
    "fixit_q4_matmul": "FixitQ4Matmul",
    "fixit_q6_matmul": "FixitQ6Matmul",
    "fixit_attention": "FixitAttention",
    "fixit_attention_f16": "FixitAttentionF16",
    "fixit_candidates": "FixitCandidates",
}


class KernelUnavailable(RuntimeError):
    """The native kernel cannot be built or loaded here (the message says why)."""


# The instruction sets a copy of the kernels is compiled for, most capable first. Each copy is built with
# explicit target flags (never -march=native, whose guess a virtual machine's CPU model can get wrong) and
# asks the CPU itself, before anything is registered, whether it can run (``fixit_runnable``).
ISAS: tuple[str, ...] = ("avx512bf16", "avx512", "avx2", "scalar")
_ISA_FLAGS: dict[str, tuple[str, ...]] = {
    "avx512bf16": ("-march=x86-64-v4", "-mavx512bf16", "-mavx512vnni", "-mavx512vbmi", "-mtune=generic"),
    "avx512": ("-march=x86-64-v4", "-mtune=generic"),  # AVX-512 F, BW, CD, DQ, VL
    "avx2": ("-march=x86-64-v3", "-mtune=generic"),  # AVX2, FMA, F16C
    "scalar": ("-march=x86-64", "-mtune=generic"),  # SSE2: weights widened by scalar loops
}
_ISA_CPU_FLAGS: dict[str, frozenset[str]] = {
    "avx512bf16": frozenset(
        {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16", "avx512_vnni", "avx512vbmi", "fma",
         "f16c"}
    ),
    "avx512": frozenset({"avx512f", "avx512bw", "avx512vl", "avx512dq", "fma", "f16c"}),
    "avx2": frozenset({"avx2", "fma", "f16c"}),
    "scalar": frozenset(),
}


def cache_dir() -> Path:
    """Where built kernels live: ``$ARENA_KERNEL_CACHE``, else the user's cache directory."""
    override = os.environ.get("ARENA_KERNEL_CACHE")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fixit-arena" / "kernels"


def _compiler() -> str:
    compiler = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if not compiler:
        raise KernelUnavailable("no C++ compiler found (install g++ or set CXX)")
    return compiler


def _x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def _cpuinfo_field(*names: str) -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(names) and ":" in line:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as the OS reports them (``/proc/cpuinfo``; empty where unreadable)."""
    return frozenset((_cpuinfo_field("flags", "Features") or "").split())


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :mod:`platform` knows."""
    return _cpuinfo_field("model name") or platform.processor() or platform.machine()


def supported_isas() -> tuple[str, ...]:
    """The instruction sets this CPU runs, most capable first (``scalar`` always; only it off x86-64)."""
    if not _x86():
        return ("scalar",)
    flags = cpu_flags()
    return tuple(isa for isa in ISAS if _ISA_CPU_FLAGS[isa] <= flags)


_preferred: str | None = None  # the copy weights = "auto" measured fastest here (weight_policy sets it)


def prefer_isa(isa: str | None) -> None:
    """Use ``isa`` when ``ARENA_KERNEL_ISA`` forces nothing (None: the most capable copy again). The most
    capable copy is not always the fastest (on an Intel Emerald Rapids ``avx512``'s float32 products and
    ``avx512bf16``'s bfloat16 ones trade places), so the weight policy measures the copies and says which."""
    global _preferred
    if isa is not None and isa not in ISAS:
        raise KernelUnavailable(f"no kernel copy {isa!r}: one of {', '.join(ISAS)}")
    _preferred = isa


NARROW_ROWS = 4  # the most rows a decode batch can read one output at a time (kNarrowRows in the source)
_narrow_rows = 0  # the setting every copy loaded in this process gets (weight_policy sets it)


def set_narrow_rows(rows: int) -> int:
    """Decode batches of up to ``rows`` rows (0..:data:`NARROW_ROWS`) read one output at a time, as one
    stream of weights per thread, instead of 4 outputs' rows interleaved; 0 (the default) keeps the wide
    tiles. The bits are the same either way; which is faster depends on the CPU, so ``weights = "auto"``
    measures both and sets the faster one. Applies to every copy loaded now and later in this process (none
    need be built). Returns the setting it replaced."""
    global _narrow_rows
    if not 0 <= rows <= NARROW_ROWS:
        raise ValueError(f"narrow rows {rows}: choose 0..{NARROW_ROWS}")
    previous, _narrow_rows = _narrow_rows, rows
    with _LOCK:
        for library in _LIBRARIES.values():
            library.fixit_set_narrow_rows(rows)
    return previous


def narrow_rows(isa: str | None = None) -> int:
    """The setting in force in the ``isa`` copy (default :func:`selected_isa`), as the library reports it."""
    return int(_library(isa)[1].fixit_narrow_rows())


def forced_isa() -> str | None:
    """The copy ``$ARENA_KERNEL_ISA`` forces (None: unset or ``auto``)."""
    forced = os.environ.get("ARENA_KERNEL_ISA", "").strip().lower() or "auto"
    return None if forced == "auto" else forced


def selected_isa() -> str:
    """``$ARENA_KERNEL_ISA`` when set to one of :data:`ISAS` (tests force each path with it), else (unset or
    ``auto``) the copy the weight policy measured fastest (:func:`prefer_isa`) or, before it has, the most
    capable set this CPU runs. A forced set the CPU lacks is refused when loaded."""
    forced = forced_isa() or "auto"
    if forced == "auto":
        supported = supported_isas()
        return _preferred if _preferred in supported else supported[0]
    if forced not in ISAS:
        raise KernelUnavailable(f"ARENA_KERNEL_ISA={forced!r}: choose auto or one of {', '.join(ISAS)}")
    return forced


def _command(compiler: str, output: Path, isa: str) -> list[str]:
    import jax.ffi

    flags = list(_ISA_FLAGS[isa]) if _x86() else []  # elsewhere the architecture's baseline (NEON on arm64)
    return [compiler, "-O3", *flags, "-std=c++17", "-shared", "-fPIC", "-DNDEBUG", "-Wno-psabi",
            "-isystem", str(jax.ffi.include_dir()), str(SOURCE), "-o", str(output)]


def _build(isa: str) -> Path:
    """Compile the ``isa`` copy (or find it already compiled) and return the shared library's path. The
    cache key is every source file, the compiler command, jaxlib's version and the machine's architecture: the
    flags are explicit, so one build serves every CPU that runs them."""
    import jaxlib

    compiler = _compiler()
    key = hashlib.sha256()
    key.update(source_digest().encode())
    key.update(" ".join(_command(compiler, Path("out"), isa)).encode())
    key.update(jaxlib.__version__.encode())
    key.update(platform.machine().encode())
    library = cache_dir() / f"{key.hexdigest()[:16]}-{isa}" / "cpu_kernels.so"
    if library.exists():
        return library
    library.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=library.parent) as scratch:
        built = Path(scratch) / library.name
        log.info("compiling the native CPU kernels (%s) into %s", isa, library)
        result = subprocess.run(_command(compiler, built, isa), capture_output=True, text=True, check=False,
                                timeout=600)
        if result.returncode != 0:
            raise KernelUnavailable(f"compiling {SOURCE.name} for {isa} failed:\n{result.stderr[-2000:]}")
        os.replace(built, library)  # atomic: a concurrent process sees the whole file or none
    return library


_LOCK = threading.Lock()
_LIBRARIES: dict[str, Any] = {}  # isa -> loaded library (the registered functions live in it)


def _target(name: str, isa: str) -> str:
    return f"{name}_{isa}"


@functools.cache
def _load(isa: str) -> str | None:
    """Build, load and register the ``isa`` copy once per process; None when ready, else why not."""
    import jax

    if platform.system() != "Linux" and platform.system() != "Darwin":
        return f"native kernels are built on Linux and macOS only, not {platform.system()}"
    if isa not in ISAS:
        return f"unknown instruction set {isa!r}: choose one of {', '.join(ISAS)}"
    if isa not in supported_isas():
        return f"this CPU ({cpu_model()}) cannot run the {isa} kernels; it runs {', '.join(supported_isas())}"
    try:
        library = ctypes.cdll.LoadLibrary(str(_build(isa)))
        if not library.fixit_runnable():
            return f"this CPU lacks an instruction the {isa} kernels use (the library's own check)"
        for target, symbol in _TARGETS.items():
            jax.ffi.register_ffi_target(_target(target, isa), jax.ffi.pycapsule(getattr(library, symbol)),
                                        platform="cpu")
    except (KernelUnavailable, OSError, AttributeError, subprocess.SubprocessError) as exc:
        return str(exc)
    library.fixit_set_narrow_rows(_narrow_rows)
    _LIBRARIES[isa] = library
    return None


def kernel_status(isa: str | None = None) -> str | None:
    """None when the ``isa`` copy (default :func:`selected_isa`) is built and registered (building it now
    if need be), else the reason it cannot be."""
    try:
        chosen = isa or selected_isa()
    except KernelUnavailable as exc:
        return str(exc)
    with _LOCK:
        return _load(chosen)


def _library(isa: str | None) -> tuple[str, Any]:
    chosen = isa or selected_isa()
    status = kernel_status(chosen)
    if status is not None:
        raise KernelUnavailable(status)
    return chosen, _LIBRARIES[chosen]


def library_path(isa: str | None = None) -> Path:
    """The loaded shared library (KernelUnavailable when there is none)."""
    return Path(_library(isa)[1]._name)


def vector_decode(isa: str | None = None) -> bool:
    """Whether the kernels widen block weights with vector instructions (AVX-512 or AVX2); the ``scalar``
    copy widens them by plain loops: exact, but slow."""
    return bool(_library(isa)[1].fixit_vector_decode())


def product_type(isa: str | None = None) -> str:
    """What the matmul kernels multiply in: ``bfloat16`` (``avx512bf16``: activations and weights rounded
    to bfloat16, sums in float32, as XLA's bfloat16 dot) or ``float32`` (every other copy)."""
    function = _library(isa)[1].fixit_product_type
    function.restype = ctypes.c_char_p
    return str(function().decode())


def exact_q4(isa: str | None = None) -> bool:
    """Whether a decode batch's ``q4`` products multiply the 4-bit integers exactly (``avx512bf16``, which
    needs VBMI: bfloat16 ``128 + q`` times the bfloat16-rounded activations, scale and offset applied in
    float32) rather than the weights rounded to :func:`product_type` first."""
    return bool(_library(isa)[1].fixit_exact_q4())


_FORMAT_BITS = {"q8": 1, "q4": 2, "q6": 4}  # fixit_int16_rows' bit of each block format


def int16_rows(isa: str | None = None, fmt: str = "q4") -> bool:
    """Whether a decode batch's ``fmt`` products round each row to int16 per block of 32
    (:func:`~inference.formats.block_formats.quantize_activations` with ``levels=32767``) and multiply the
    weights' integers exactly: q4, q6 and q8 on the ``avx2`` copy, whose float32 products were bound by
    widening the weights to floats; q8 on the ``avx512`` copy."""
    return bool(_library(isa)[1].fixit_int16_rows() & _FORMAT_BITS[fmt])


def int16_prefill(isa: str | None = None) -> bool:
    """Whether a prefill's block products (more rows than a decode batch) round each row to int16 per block
    of 32 as :func:`int16_rows` does and multiply the weights' integers exactly: every block format on the
    ``avx2`` copy, whose float32 outer products ran at its FMAs' rate (a madd multiplies twice as many)."""
    return bool(_library(isa)[1].fixit_int16_prefill())


def decode_activations(isa: str | None = None) -> str:
    """What a decode batch's ``q4`` products round the activations to: ``bfloat16`` (:func:`exact_q4`),
    ``int16`` (:func:`int16_rows`) or ``float32`` (kept as they are)."""
    if exact_q4(isa):
        return "bfloat16"
    return "int16" if int16_rows(isa) else "float32"


def prefill_activations(isa: str | None = None) -> str:
    """What a prefill's block products round the activations to: ``int16`` (:func:`int16_prefill`), else
    :func:`product_type`'s type (``bfloat16`` or ``float32``)."""
    return "int16" if int16_prefill(isa) else product_type(isa)


def _require(isa: str | None) -> str:
    return _library(isa)[0]


def q8_matmul(x: Any, values: Any, scales: Any, *, rows: Any = None, isa: str | None = None,
              int8_activations: bool = False) -> Any:
    """``x (M, K) · W(N, K)ᵀ`` -> ``(M, N)`` float32 for q8 weights (``values`` int8 ``(N, K)``, ``scales``
    float16 ``(N, K/32)``), through the native kernel (KernelUnavailable where it cannot be built).

    ``rows`` (an int32 scalar, may be traced): only the first ``rows`` rows are real (a prompt padded
    to its bucket); the rest are skipped and come back zero. ``isa``: which compiled copy (default
    :func:`selected_isa`). ``int8_activations``: each row's blocks of 32 are rounded to int8 with one
    float scale (:func:`~inference.formats.block_formats.quantize_activations`) and multiplied as integers, as
    llama.cpp does."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    chosen = _require(isa)
    result = jax.ShapeDtypeStruct((x.shape[0], values.shape[0]), jnp.float32)
    call = jax.ffi.ffi_call(_target("fixit_q8_matmul", chosen), result)
    return call(x.astype(jnp.float32), _rows(x, rows), values, scales,
                int8_activations=np.int64(int8_activations))


def q4_matmul(x: Any, packed: Any, scales: Any, offsets: Any, *, rows: Any = None,
              isa: str | None = None, int8_activations: bool = False) -> Any:
    """The same for q4 weights: ``packed`` uint8 ``(N, K/2)``, ``scales`` and ``offsets`` float16
    ``(N, K/32)``."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    chosen = _require(isa)
    result = jax.ShapeDtypeStruct((x.shape[0], packed.shape[0]), jnp.float32)
    call = jax.ffi.ffi_call(_target("fixit_q4_matmul", chosen), result)
    return call(x.astype(jnp.float32), _rows(x, rows), packed, scales, offsets,
                int8_activations=np.int64(int8_activations))


def q6_matmul(x: Any, low: Any, high: Any, scales: Any, *, rows: Any = None, isa: str | None = None) -> Any:
    """The same for q6 weights: ``low`` uint8 ``(N, K/2)`` (each block's low nibbles, laid out as q4's),
    ``high`` uint8 ``(N, K/4)`` (the 2 high bits: byte j of a block's 8 holds elements j, j+8, j+16,
    j+24), ``scales`` float16 ``(N, K/16)``. A decode batch on the ``avx512bf16`` copy multiplies the
    6-bit integers exactly, as q4's (:func:`exact_q4`); the float copies multiply ``d·q`` (exact in
    float32) and subtract ``32·d·Σx`` per group, as they sum q4's as ``d·Σq·x + m·Σx``."""
    import jax
    import jax.numpy as jnp

    chosen = _require(isa)
    result = jax.ShapeDtypeStruct((x.shape[0], low.shape[0]), jnp.float32)
    call = jax.ffi.ffi_call(_target("fixit_q6_matmul", chosen), result)
    return call(x.astype(jnp.float32), _rows(x, rows), low, high, scales)


def _rows(x: Any, rows: Any) -> Any:
    import jax.numpy as jnp

    return jnp.asarray(x.shape[0] if rows is None else rows, dtype=jnp.int32)


def candidates(logits: Any, temperatures: Any, *, k: int, isa: str | None = None) -> tuple[Any, Any, Any]:
    """Each row's ``k`` largest logits (float32 ``(B, k)``, largest first, equal values lower id first,
    as ``jax.lax.top_k`` orders them), their ids (int32 ``(B, k)``) and the row's
    ``logsumexp(logits / temperature)`` (``(B,)``), for logits ``(B, V)`` and ``temperatures`` ``(B,)``:
    one pass over the vocabulary a row instead of a partial sort."""
    import jax
    import jax.numpy as jnp

    chosen = _require(isa)
    batch = logits.shape[0]
    shapes = (jax.ShapeDtypeStruct((batch, k), jnp.float32), jax.ShapeDtypeStruct((batch, k), jnp.int32),
              jax.ShapeDtypeStruct((batch,), jnp.float32))
    call = jax.ffi.ffi_call(_target("fixit_candidates", chosen), shapes)
    values, ids, normalizer = call(logits.astype(jnp.float32), temperatures.astype(jnp.float32))
    return values, ids, normalizer


def attention(q: Any, k_new: Any, v_new: Any, index: Any, keys: Any, values: Any, *, layer: int | None = None,
              valid: Any = None,
              window: int | None, scale: float, soft_cap: float | None,
              isa: str | None = None) -> tuple[Any, Any, Any]:
    """T new tokens per row: queries ``q (B, T, H, hd)`` (RoPE applied, unscaled) and their
    ``k_new``/``v_new`` ``(B, T, KV, hd)``, written from slot ``index[b]`` of ``keys``/``values``
    ``(B, KV, S, hd)``, or layer ``layer`` of every layer's ``(layers, B, KV, S, hd)``, float32 or
    float16 (in place when the caller donates them; float16 keeps the new
    keys/values rounded as XLA's convert rounds them); each query at position p attends over
    slots ``(p - window, p]``. ``valid`` (int32 scalar, may be traced): tokens from it on are padding,
    neither written nor computed (outputs zero). Returns ``(out (B, T, H, hd), keys, values)``; the
    reference is the decoder's own XLA path."""
    import jax
    import numpy as np

    chosen = _require(isa)
    if keys.dtype != values.dtype or keys.dtype.name not in ("float32", "float16"):
        raise ValueError(f"attention: the cache must be float32 or float16, not {keys.dtype}/{values.dtype}")
    if (layer is None) != (keys.ndim == 4):
        raise ValueError("attention: a (B, KV, S, hd) cache takes no layer, a stacked one needs one")
    stacked = (keys, values) if layer is not None else (keys[None], values[None])
    name = "fixit_attention" if keys.dtype.name == "float32" else "fixit_attention_f16"
    shapes = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in (q, *stacked)]
    call = jax.ffi.ffi_call(_target(name, chosen), shapes, input_output_aliases={5: 1, 6: 2})
    out, keys_out, values_out = call(q, k_new, v_new, index.astype("int32"), _rows(q[0], valid), *stacked,
                                     layer=np.int64(layer or 0), window=np.int64(window or 0),
                                     scale=np.float32(scale), soft_cap=np.float32(soft_cap or 0.0))
    if layer is None:
        return out, keys_out[0], values_out[0]
    return out, keys_out, values_out
