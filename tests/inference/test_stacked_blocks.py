"""Fused matrices whose parts need different block formats (inference.formats.matrices.StackedBlocks):
a qkv whose q and k lie on a 4-bit grid and v on a 6-bit one is served q4 + q6, not all of it in q8."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from inference.engine import kernels
from inference.engine.forward import empty_cache, forward, matmul, output_logits
from inference.engine.weights import (
    Q4_TOLERANCE,
    _as_matrix,
    _attribute,
    decoder_spec,
    extract_params,
    matrix_formats,
    weight_bytes,
)
from inference.families import family
from inference.formats import block_formats
from inference.formats.matrices import Q4Blocks, Q6Blocks, Q8Blocks, StackedBlocks
from inference.tiny import load_tiny

PROMPT = [int(t) for t in np.random.default_rng(4).integers(3, 200, 24)]


def _on_grid(matrix: np.ndarray, kind: str) -> np.ndarray:
    """An ``(in, out)`` matrix moved onto a q4 (Q4_K-like: ``grid=True``) or q6 grid of its own rows."""
    rows = jnp.asarray(matrix.T)
    if kind == "q4":
        back = block_formats.q4_dequantize(*block_formats.q4_quantize(rows, grid=True))
    else:
        back = block_formats.q6_dequantize(*block_formats.q6_quantize(rows))
    return np.asarray(back).T


@pytest.fixture(scope="module")
def mixed() -> Any:
    """A tiny Llama whose q, k and gate lie on q4 grids and v on a q6 grid; up and the rest stay random."""
    loaded = load_tiny("llama", dtype="float32", context_length=128)
    recipe = family("llama").decoder
    assert recipe is not None
    for block in loaded.backbone.transformer_layers:
        for name, kind in (("q", "q4"), ("k", "q4"), ("v", "q6"), ("gate", "q4")):
            attribute, layout = recipe.layer_weights[name]
            variable = _attribute(block, attribute)
            matrix = np.asarray(_as_matrix(variable.value, layout))
            variable.assign(_on_grid(matrix, kind).reshape(tuple(variable.shape)))
    return loaded.backbone


def _logits(backbone: Any, weights: str, native: bool = False) -> np.ndarray:
    spec = decoder_spec(backbone, weights, native_kernels=native)  # type: ignore[arg-type]
    params = extract_params(backbone, spec)
    cache = empty_cache(spec, batch=1, slots=64)
    hidden, _ = jax.jit(lambda p, c, t: forward(spec, p, c, t, jnp.zeros((1,), "int32")))(
        params, cache, jnp.asarray([PROMPT], "int32"))
    return np.asarray(output_logits(spec, params, hidden[:, -1]))[0]


def test_each_part_takes_the_format_that_reproduces_it(mixed: Any) -> None:
    spec = decoder_spec(mixed, "q4")
    params = extract_params(mixed, spec)
    layers = len(mixed.transformer_layers)
    for layer in params["layers"]:
        qkv, gate_up = layer["qkv"], layer["gate_up"]
        assert isinstance(qkv, StackedBlocks) and [type(p) for p in qkv.parts] == [Q4Blocks, Q6Blocks]
        q_and_k = (spec.num_query_heads + spec.num_kv_heads) * spec.head_dim
        assert qkv.parts[0][0].shape[0] == q_and_k  # q and k joined into one q4 part
        assert isinstance(gate_up, StackedBlocks) and [type(p) for p in gate_up.parts] == [Q4Blocks, Q8Blocks]
        assert isinstance(layer["o"], Q8Blocks)
    assert matrix_formats(params) == {"q4": 2 * layers, "q6": layers, "q8": 3 * layers + 1}
    # Fewer bytes than one q8 matrix for each fused one
    assert weight_bytes(params) < weight_bytes(extract_params(mixed, decoder_spec(mixed, "q8")))
    # Formats with no 6-bit path or no fitting keep one format per matrix
    eight = extract_params(mixed, decoder_spec(mixed, "q8"))
    assert all(isinstance(layer["qkv"], Q8Blocks) for layer in eight["layers"])
    a8 = extract_params(mixed, decoder_spec(mixed, "q4a8"))
    assert [type(p) for p in a8["layers"][0]["qkv"].parts] == [Q4Blocks, Q8Blocks]


def _dequantized(blocks: Any) -> np.ndarray:
    """The ``(out, in)`` float32 matrix a block matrix (or a stack of them) stands for."""
    if isinstance(blocks, StackedBlocks):
        return np.concatenate([_dequantized(part) for part in blocks.parts], axis=0)
    if isinstance(blocks, Q4Blocks):
        return np.asarray(block_formats.q4_dequantize(*blocks))
    if isinstance(blocks, Q6Blocks):
        return np.asarray(block_formats.q6_dequantize(*blocks))
    return np.asarray(block_formats.q8_dequantize(*blocks))


def test_the_stack_reproduces_the_fused_matrix_and_multiplies_it_in_order(mixed: Any) -> None:
    spec = decoder_spec(mixed, "q4")
    params = extract_params(mixed, spec)
    recipe = family("llama").decoder
    assert recipe is not None
    block = mixed.transformer_layers[0]
    fused = np.concatenate([np.asarray(_as_matrix(_attribute(block, recipe.layer_weights[n][0]).value,
                                                  recipe.layer_weights[n][1])) for n in "qkv"], axis=1).T
    qkv = params["layers"][0]["qkv"]
    q_and_k = qkv.parts[0].packed.shape[0]
    # q|k and v come back to float16 rounding of their block scales (the grids' own tolerance)
    error = np.abs(_dequantized(qkv) - fused)
    assert float(error[:q_and_k].max()) <= Q4_TOLERANCE * float(np.abs(fused).max())
    assert float(error[q_and_k:].max()) <= Q4_TOLERANCE * float(np.abs(fused).max())
    x = jnp.asarray(np.random.default_rng(5).normal(size=(3, fused.shape[1])), "float32")
    want = np.asarray(x) @ _dequantized(qkv).T
    got = np.asarray(jax.jit(lambda x: matmul(x, qkv))(x))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * float(np.abs(want).max()))
    if kernels.kernel_status() is None:
        # bfloat16 products round x: 2^-8 relative; int16 rows (the avx2 copy's decode batches) round each
        # value by at most 1/65534 of its block's largest (~2e-5 of the products' norm); else float32 sums
        native = np.asarray(jax.jit(lambda x: matmul(x, qkv, True))(x))
        bound = {"bfloat16": 2.0**-7, "int16": 1e-4}.get(kernels.decode_activations(), 1e-5)
        assert float(np.linalg.norm(native - want) / np.linalg.norm(want)) < bound
        assert float(np.linalg.norm(native[:, -8:] - want[:, -8:]) / np.linalg.norm(want[:, -8:])) < bound


def test_a_model_with_stacked_matrices_runs_natively_as_in_xla(mixed: Any) -> None:
    if kernels.kernel_status() is not None:
        pytest.skip(f"native kernels unavailable: {kernels.kernel_status()}")
    xla, native = _logits(mixed, "q4"), _logits(mixed, "q4", native=True)
    assert float(np.max(np.abs(xla))) > 0.05
    # bfloat16 or int16 rounding of the rows (a prompt this short is a decode batch), over the layers, plus
    # the native path's float16 KV cache (native_serving; XLA's keeps float32): each key and value rounded
    # by up to 2^-11 of itself, once a layer. Without that term a copy whose rows stay float32 (scalar,
    # avx512) failed here: 5.7e-4 against 1e-4 (ARENA_KERNEL_ISA=scalar, AMD Zen 3).
    rows = {"bfloat16": 2.0**-5, "int16": 1e-3}.get(kernels.decode_activations(), 1e-4)
    bound = rows + len(mixed.transformer_layers) * 2.0**-11
    assert float(np.linalg.norm(native - xla) / np.linalg.norm(xla)) < bound
