"""The fast engine's view of a keras-hub backbone: one spec of the architecture (a
:class:`~inference.families.base.DecoderSpec`, from its family's decoder recipe), and its weights as plain
2-D matrices in the chosen format (the names and containers: :mod:`inference.formats.matrices`).

keras-hub's layers hold their kernels in einsum layouts (``(d, heads, head_dim)``, Gemma's ``(heads, d,
head_dim)``…); the fast decoder (:mod:`inference.engine.forward`) wants every projection as one
``(in, out)`` matrix so a token's work is a short chain of GEMMs. The conversion runs as jitted array
programs, so a weight sharded over a device mesh stays sharded (XLA propagates the variable's sharding).

Formats: ``float32`` (the variables as loaded), ``bfloat16`` (half the bytes; XLA-CPU multiplies it fast
from two rows up), ``int8`` (per-output-channel symmetric weights with per-row dynamic activation
scales, keras' own ``quantize("int8")`` scheme), and llama.cpp's block layouts for the native CPU
kernels (:mod:`inference.engine.kernels`): ``q8`` (int8 with a float16 scale per 32 weights, Q8_0)
and ``q4`` (4-bit with a float16 scale and offset per 32 weights, Q4_1) -- ``q4`` keeps a matrix in
4 bits only where that reproduces it (a matrix the GGUF file stored as Q4_1 comes back exactly, a Q4_K
one to float16 rounding of its per-32 scales), in 6 bits (``Q6Blocks``: ``d·(q − 32)``, a float16 ``d``
per 16 weights) where that does (a Q6_K matrix), and uses ``q8`` for the others; ``q8a8`` and ``q4a8``
store the same blocks and round the activations to int8 blocks inside each product, as llama.cpp does
(integer dot products). Block matrices are kept ``(out, in)``, each output's weights contiguous; the
others ``(in, out)``. Norm scales, the KV cache, activations and every accumulation stay float32
(inside a product, the kernels may round to bfloat16: :func:`inference.engine.kernels.product_type`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from inference.families.base import DecoderSpec, UnsupportedModel
from inference.formats.matrices import (
    BLOCK_FORMATS,
    INT8_ACTIVATION_FORMATS,
    SIX_BIT_FORMATS,
    WEIGHT_FORMATS,
    Q4Blocks,
    Q6Blocks,
    Q8Blocks,
    QuantizedMatrix,
    SixBit,
    StackedBlocks,
    WeightFormat,
)

# q4 is used for a matrix only if it reproduces it to this fraction of the matrix's largest weight: twice
# float16's unit roundoff (2^-11), what rounding a block's scale and offset to float16 alone can cost
# (|Δw| ≤ u·(15·|d| + |m|)). A Q4_K file's sub-blocks need it (d = its float16 scale × a 6-bit scale);
# anything that is not a 4-bit grid misses it by far (a Q6_K or Q8_0 matrix by ~3e-2).
Q4_TOLERANCE = 2.0**-10
GRID_SAMPLE_ROWS = 64  # rows a matrix's q4 grid fit is tried on before the whole matrix


def decoder_spec(backbone: Any, weight_format: WeightFormat, *, native_kernels: bool = False,
                 six_bit: SixBit = "q6") -> DecoderSpec:
    """The spec of a backbone whose family (:mod:`inference.families`) has a decoder recipe;
    UnsupportedModel otherwise.

    ``native_kernels``: run block formats through :mod:`inference.engine.kernels` (CPU, one device);
    without it they run as plain XLA (any backend, any sharding; slower). ``six_bit``: the format of a
    ``q4`` model's 6-bit matrices (:data:`SIX_BIT_FORMATS`; other formats ignore it)."""
    from inference.families import family_of_backbone

    if weight_format not in WEIGHT_FORMATS:
        raise ValueError(f"weight format {weight_format!r}: choose one of {', '.join(WEIGHT_FORMATS)}")
    if six_bit not in SIX_BIT_FORMATS:
        raise ValueError(f"six_bit {six_bit!r}: choose one of {', '.join(SIX_BIT_FORMATS)}")
    record = family_of_backbone(backbone)
    if record is None or record.decoder is None:
        raise UnsupportedModel(f"the fast decoder has no {type(backbone).__name__}")
    spec: DecoderSpec = record.decoder.spec(backbone, backbone.get_config(), weight_format)
    if weight_format in BLOCK_FORMATS:
        widths = {spec.hidden_dim, spec.num_query_heads * spec.head_dim, _ffn_dim(backbone)}
        if any(width % 32 for width in widths):
            raise UnsupportedModel(f"{weight_format} needs inputs in multiples of 32, not {sorted(widths)}")
    int8 = weight_format in INT8_ACTIVATION_FORMATS
    six_bit = six_bit if weight_format == "q4" else "q6"
    return native_serving(dataclasses.replace(spec, int8_activations=int8, six_bit=six_bit), native_kernels)


def native_serving(spec: DecoderSpec, native_kernels: bool) -> DecoderSpec:
    """``spec`` run through the native CPU kernels (block formats only) or as plain XLA. Natively the KV
    cache holds float16: a decode step reads every cached key and value of its rows, at long contexts
    more bytes than the weights, and the native attention widens them as it reads (llama.cpp's default
    cache type too). The XLA path keeps float32, the reference ``bench --fidelity`` measures against."""
    native = native_kernels and spec.weight_format in BLOCK_FORMATS
    return dataclasses.replace(spec, native_kernels=native, kv_dtype="float16" if native else "float32")


def _ffn_dim(backbone: Any) -> int:
    config = backbone.get_config()
    return int(config.get("intermediate_dim") or config.get("ffw_hidden_dim") or config["hidden_dim"])


# ---- weights ------------------------------------------------------------------------------------------


def extract_params(backbone: Any, spec: DecoderSpec) -> dict[str, Any]:
    """``{"embedding", "final_norm", "layers": [{name: matrix | vector}], "head"?}`` in the spec's format.

    ``embedding`` is the ``(vocab, d)`` table, also the output head unless the model has its own
    ``head`` ``(d, vocab)`` (untied; int8 scales are per vocabulary entry either way). Where the family
    has q/k/v biases (Qwen2) they are one float32 ``qkv_bias`` vector per layer.
    """
    from inference.families import family

    recipe = family(spec.family).decoder
    if recipe is None:
        raise UnsupportedModel(f"family {spec.family!r} has no decoder recipe")
    layers = []
    for i, block in enumerate(backbone.transformer_layers):
        layer: dict[str, Any] = {}
        for name, (attribute, layout) in recipe.layer_weights.items():
            variable = _attribute(block, attribute)
            if variable is None:
                if name in recipe.optional:
                    continue
                raise UnsupportedModel(f"layer {i} has no {attribute}")
            value = variable.value
            layer[name] = _float32(value) if layout in ("vector", "n_h") else _as_matrix(value, layout)
        layers.append(_fuse_and_convert(layer, spec.weight_format, spec.six_bit))
    embedding_layer = backbone.token_embedding
    params = {
        "embedding": _convert_matrix(embedding_layer.embeddings.value, spec.weight_format, axis=1,
                                     six_bit=spec.six_bit),
        "final_norm": _float32(backbone.layer_norm.scale.value),
        "layers": layers,
    }
    if not getattr(embedding_layer, "tie_weights", True):  # a separate output head, (d, vocab)
        params["head"] = _convert_matrix(embedding_layer.reverse_embeddings.value, spec.weight_format, axis=0,
                                         six_bit=spec.six_bit)
    return params


def _attribute(block: Any, dotted: str) -> Any:
    value = block
    for part in dotted.split("."):
        value = getattr(value, part, None)
        if value is None:
            return None
    return value


def _fuse_and_convert(
    layer: dict[str, Any], weight_format: WeightFormat, six_bit: SixBit = "q6"
) -> dict[str, Any]:
    """One ``qkv`` and one ``gate_up`` matrix per layer (fewer, larger GEMMs), then the weight format."""
    fused_away = ("q", "k", "v", "gate", "up", "q_bias", "k_bias", "v_bias")
    fused = {name: value for name, value in layer.items() if name not in fused_away}
    if "q_bias" in layer:  # (heads, head_dim) each -> one (q + k + v widths,) vector, like qkv's columns
        flat = _program("flatten", None)
        fused["qkv_bias"] = _program("concat", 0)(*(flat(layer.pop(f"{n}_bias")) for n in "qkv"))
    fused["qkv"] = _fused_matrix([layer.pop(n) for n in "qkv"], weight_format, six_bit)
    fused["gate_up"] = _fused_matrix([layer.pop("gate"), layer.pop("up")], weight_format, six_bit)
    for name in ("o", "down"):
        fused[name] = _convert_matrix(fused[name], weight_format, axis=0, six_bit=six_bit)
    return fused


def _fused_matrix(parts: list[Any], weight_format: WeightFormat, six_bit: SixBit = "q6") -> Any:
    """``(in, out)`` matrices side by side as one matrix in ``weight_format``. In a block format each
    part takes the format that reproduces it (:func:`_blocks`) and neighbours of one format are joined,
    so the result is one block matrix, or a :class:`StackedBlocks` where the parts' formats differ."""
    if weight_format not in BLOCK_FORMATS:
        return _convert_matrix(_program("concat", 1)(*parts), weight_format, axis=0)
    transpose, join = _program("transpose", None), _program("concat", 0)
    runs: list[Q8Blocks | Q4Blocks | Q6Blocks] = []
    for part in parts:
        blocks = _blocks(transpose(part), weight_format, six_bit)
        if runs and type(runs[-1]) is type(blocks):
            runs[-1] = type(blocks)(*(join(a, b) for a, b in zip(runs[-1], blocks, strict=True)))
        else:
            runs.append(blocks)
    return runs[0] if len(runs) == 1 else StackedBlocks(tuple(runs))


def _convert_matrix(matrix: Any, weight_format: WeightFormat, *, axis: int, six_bit: SixBit = "q6") -> Any:
    """``axis``: the input (reduced) axis, so the int8 scales are per output channel."""
    if weight_format == "int8":
        return QuantizedMatrix(*_program("quantize", axis)(matrix))
    if weight_format in BLOCK_FORMATS:
        return _blocks(matrix if axis == 1 else _program("transpose", None)(matrix), weight_format, six_bit)
    return _cast(matrix, weight_format)


def _blocks(
    matrix: Any, weight_format: WeightFormat, six_bit: SixBit = "q6"
) -> Q8Blocks | Q4Blocks | Q6Blocks:
    """An ``(out, in)`` matrix in q4 where that reproduces it, else (``q4`` only: the 8-bit-activation
    kernels have no 6-bit path; and ``six_bit`` q6 only: where q8 is measured faster, it serves these
    too) in q6 where that does, else q8.

    The range fit first (a Q4_1 matrix), then the grid fit (a Q4_K one; it costs ~10x as much), then the
    6-bit fit (a Q6_K one), each tried on the whole matrix only if its first :data:`GRID_SAMPLE_ROWS` rows
    pass: a Q8_0 matrix is turned down after those. Every check is against the whole matrix's largest
    weight."""
    if weight_format in ("q4", "q4a8"):
        bound = Q4_TOLERANCE * float(_program("largest", None)(matrix))
        fits: list[tuple[str, Any]] = [("q4", False), ("q4", True)]
        if weight_format == "q4" and six_bit == "q6":
            fits.append(("q6", None))
        for kind, arg in fits:
            if arg is not False and _error(matrix[:GRID_SAMPLE_ROWS], kind, arg)[0] > bound:
                continue
            error, blocks = _error(matrix, kind, arg)
            if error <= bound:
                return blocks
    return Q8Blocks(*_program("q8", None)(matrix))


def _error(matrix: Any, kind: str, arg: Any) -> tuple[float, Q4Blocks | Q6Blocks]:
    """``matrix`` in ``kind`` (q4 with ``grid`` = arg, or q6) and the largest round-trip error of any
    weight."""
    if kind == "q6":
        q6 = Q6Blocks(*_program("q6", None)(matrix))
        return float(_program("q6_error", None)(matrix, *q6)), q6
    q4 = Q4Blocks(*_program("q4", arg)(matrix))
    return float(_program("q4_error", None)(matrix, *q4)), q4


def _as_matrix(value: Any, layout: str) -> Any:
    return value if layout == "in_out" else _program("reshape", layout)(value)


def _float32(value: Any) -> Any:
    return _cast(value, "float32")


def _cast(value: Any, dtype: str) -> Any:
    return value if str(value.dtype) == dtype else _program("cast", dtype)(value)


@functools.cache
def _program(kind: str, arg: Any) -> Any:
    """One jitted conversion per (kind, static argument): every layer of the same shape reuses it,
    so converting a 30-layer model compiles a handful of programs, not hundreds."""
    import jax
    import jax.numpy as jnp

    def reshape(w: Any) -> Any:
        if arg == "d_n_h":  # (d, heads, head_dim) -> (d, heads*head_dim)
            return w.reshape(w.shape[0], -1)
        if arg == "n_d_h":  # (heads, d, head_dim) -> (d, heads*head_dim)
            return jnp.transpose(w, (1, 0, 2)).reshape(w.shape[1], -1)
        return w.reshape(-1, w.shape[-1])  # n_h_d: (heads, head_dim, d) -> (heads*head_dim, d)

    def quantize(w: Any) -> tuple[Any, Any]:
        """Symmetric int8, one scale per output channel (``arg`` is the axis reduced over)."""
        w = w.astype("float32")
        scale = jnp.max(jnp.abs(w), axis=arg, keepdims=True) / 127.0
        scale = jnp.where(scale == 0, 1.0, scale)
        values = jnp.clip(jnp.round(w / scale), -127, 127).astype("int8")
        return values, jnp.squeeze(scale, arg)

    from inference.formats import block_formats

    def q4_error(w: Any, *q4: Any) -> Any:
        """The largest q4 round-trip error of any weight."""
        return jnp.max(jnp.abs(block_formats.q4_dequantize(*q4) - w.astype("float32")))

    def q6_error(w: Any, *q6: Any) -> Any:
        return jnp.max(jnp.abs(block_formats.q6_dequantize(*q6) - w.astype("float32")))

    programs: dict[str, Callable[..., Any]] = {
        "concat": lambda *ms: jnp.concatenate(ms, axis=arg),
        "flatten": lambda w: w.astype("float32").reshape(-1),
        "transpose": lambda w: w.T,
        "q8": block_formats.q8_quantize,
        "q4": functools.partial(block_formats.q4_quantize, grid=arg),
        "q4_error": q4_error,
        "q6": block_formats.q6_quantize,
        "q6_error": q6_error,
        "largest": lambda w: jnp.max(jnp.abs(w.astype("float32"))),
        "cast": lambda w: w.astype(arg),
        "reshape": reshape,
        "quantize": quantize,
    }
    return jax.jit(programs[kind])


def matrix_formats(params: dict[str, Any]) -> dict[str, int]:
    """How many matrices ended up in each format (``{"q4": 169, "q8": 29}``; a :class:`StackedBlocks`
    counts once per part): ``q4`` serves a matrix only where it reproduces it (a Q4_1 or Q4_K matrix;
    ``q6`` a Q6_K or Q5_0 one, whose values fit its 6-bit grid), so a file's Q8_0 matrices come out ``q8``
    (a re-quantization, never silent: the engine logs these counts and the fidelity bench reports them)."""
    counts: dict[str, int] = {}

    def visit(value: Any) -> None:
        if isinstance(value, StackedBlocks):
            for part in value.parts:
                visit(part)
            return
        if isinstance(value, Q4Blocks):
            kind = "q4"
        elif isinstance(value, Q6Blocks):
            kind = "q6"
        elif isinstance(value, Q8Blocks):
            kind = "q8"
        elif isinstance(value, QuantizedMatrix):
            kind = "int8"
        elif getattr(value, "ndim", 0) == 2:
            kind = str(value.dtype)
        else:
            return
        counts[kind] = counts.get(kind, 0) + 1

    for layer in params["layers"]:
        for value in layer.values():
            visit(value)
    for name in ("embedding", "head"):
        if name in params:
            visit(params[name])
    return counts


def weight_bytes(params: dict[str, Any]) -> int:
    """Bytes the converted weights occupy (every leaf of the pytree)."""
    import jax

    return int(sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(params)))
