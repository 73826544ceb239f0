"""The native CPU kernels (inference/engine/kernels): block matmuls equal to their plain-XLA reference,
rows computed the same whatever the batch, q4 that reproduces a 4-bit grid exactly and steps aside for
anything else, decode attention equal to the decoder's own XLA path (cache written in place), a tiny
model served natively that answers like its XLA twin, and the fallback when nothing can be compiled.

Every copy of the kernels this CPU can run is tested (``isa``: avx512bf16, avx512, avx2, scalar), so an
AVX-512 machine and an AVX2-only one each test every path they have; the others skip with the reason."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from inference.builder import build_chat_model
from inference.catalogue import load_catalogue
from inference.engine import TokenTrace, kernels
from inference.engine.batcher import SlotScheduler
from inference.engine.forward import (
    attend,
    attention_mask,
    empty_cache,
    forward,
    output_logits,
    write_rows,
)
from inference.engine.weights import Q4_TOLERANCE, _blocks
from inference.formats import block_formats
from inference.formats.matrices import Q4Blocks, Q6Blocks, Q8Blocks
from inference.local import LocalChatModel
from inference.protocol import GenerationParams
from tests.inference.conftest import TINY_CATALOGUE, reordered_sum_bound

ROOT = Path(__file__).resolve().parents[2]

if kernels.kernel_status() is not None:  # pragma: no cover - every CI machine has g++
    pytest.skip(f"native kernels unavailable: {kernels.kernel_status()}", allow_module_level=True)


@pytest.fixture(params=kernels.ISAS)
def isa(request: pytest.FixtureRequest) -> str:
    """Each compiled copy of the kernels this CPU runs."""
    status = kernels.kernel_status(request.param)
    if status is not None:
        pytest.skip(status)
    return str(request.param)


BLOCK_FORMATS = ["q8", "q4", "q6", "q8a8", "q4a8"]  # a8: activations rounded to int8 blocks (integer ones)


def _q6_k_matrix(n: int, k: int, seed: int) -> np.ndarray:
    """What llama.cpp's Q6_K dequantizes to: per 256 weights a float16 d, per 16 an int8 scale, and
    w = d·sc·(q − 32) with q in 0..63, each group's largest level wherever the quantizer put it."""
    rng = np.random.default_rng(seed)
    d = rng.uniform(0.0002, 0.002, size=(n, k // 256, 1)).astype("float16").astype("float32")
    sc = rng.integers(-128, 128, size=(n, k // 256, 16)).astype("float32")
    q = rng.integers(0, 64, size=(n, k // 256, 16, 16))
    q[:, :, ::3] = rng.integers(20, 44, size=q[:, :, ::3].shape)  # some groups far from the extremes
    return ((q - 32) * (d * sc)[..., None]).reshape(n, k).astype("float32")


def _weights(fmt: str, n: int, k: int, seed: int = 0) -> tuple[Any, ...]:
    if fmt == "q6":  # any 6-bit grid serves the products; a Q6_K-like one when k holds whole super-blocks
        matrix = _q6_k_matrix(n, k, seed) if k % 256 == 0 else np.random.default_rng(seed).normal(size=(n, k))
        return tuple(jax.jit(block_formats.q6_quantize)(jnp.asarray(matrix.astype("float32"))))
    matrix = jnp.asarray(np.random.default_rng(seed).normal(size=(n, k)).astype("float32") * 0.1)
    quantize = block_formats.q8_quantize if fmt.startswith("q8") else block_formats.q4_quantize
    return tuple(jax.jit(quantize)(matrix))


def _kernel(fmt: str) -> Any:
    return {"q8": kernels.q8_matmul, "q4": kernels.q4_matmul, "q6": kernels.q6_matmul}[fmt[:2]]


def _native(fmt: str, isa: str | None = None) -> Any:
    kernel = _kernel(fmt)
    if fmt == "q6":
        return jax.jit(lambda x, *w: kernel(x, *w, isa=isa))
    return jax.jit(lambda x, *w: kernel(x, *w, isa=isa, int8_activations=fmt.endswith("a8")))


def _reference(fmt: str) -> Any:
    if fmt == "q6":
        return jax.jit(block_formats.q6_matmul_reference)
    kernel = block_formats.q8_matmul_reference if fmt.startswith("q8") else block_formats.q4_matmul_reference
    return jax.jit(lambda x, *w: kernel(x, *w, int8_activations=fmt.endswith("a8")))


def _dequantize(fmt: str) -> Any:
    formats = block_formats
    return {"q8": formats.q8_dequantize, "q4": formats.q4_dequantize, "q6": formats.q6_dequantize}[fmt[:2]]


def _dense(fmt: str, weights: tuple[Any, ...]) -> np.ndarray:
    return np.asarray(_dequantize(fmt)(*weights))


def _exact(fmt: str, isa: str) -> bool:
    """Whether a decode batch multiplies this format's integers exactly on this copy."""
    return fmt in ("q4", "q6") and kernels.exact_q4(isa)


def _int16(fmt: str, isa: str) -> bool:
    """Whether a decode batch rounds this format's rows to int16 blocks (q4, q6, q8 on the avx2 copy; q8 on
    the avx512 copy)."""
    return fmt in ("q4", "q6", "q8") and kernels.int16_rows(isa, fmt)


def _int16_prefill(fmt: str, isa: str) -> bool:
    """Whether a prefill rounds this format's rows to int16 blocks as a decode batch does (the avx2 copy)."""
    return fmt in ("q4", "q6", "q8") and kernels.int16_prefill(isa)


def _split(fmt: str, isa: str) -> bool:
    """Whether a decode batch sums this format's products as d·Σq·x + m·Σx instead of Σ(d·q + m)·x: the
    exact integer path, q4 and q6 on a copy whose products are float32, or any int16 decode row."""
    return (_exact(fmt, isa) or _int16(fmt, isa)
            or (fmt in ("q4", "q6") and kernels.product_type(isa) == "float32"))


@pytest.mark.parametrize("fmt", BLOCK_FORMATS)
# rows: one (4-output tiles), three (an odd tile), nine (a chunk of 8 with 2-output tiles, then 1), 40 (a
# prefill's panels); every copy of the kernels runs every case, so each one added costs 20 tests
@pytest.mark.parametrize("rows", [1, 3, 9, 40])
@pytest.mark.parametrize("k", [96, 608])  # 3 blocks of 32; 19 (more than one 16-block chunk of scales)
def test_block_matmul_equals_its_xla_reference(fmt: str, rows: int, k: int, isa: str) -> None:
    weights = _weights(fmt, n=37, k=k)  # 37 outputs: the kernels' 4- and 2-wide tiles leave a remainder
    # (x is a 2-D array: rows of a decode batch up to 16, a prefill's beyond)
    x = jnp.asarray(np.random.default_rng(rows).normal(size=(rows, k)).astype("float32"))
    got = np.asarray(_native(fmt, isa)(x, *weights))
    exact = np.asarray(_reference(fmt)(x, *weights))
    scale = float(np.max(np.abs(exact)))
    assert scale > 0.1
    xs = np.asarray(block_formats.quantize_activations(x) if fmt.endswith("a8") else x)
    magnitudes = np.abs(_dense(fmt, weights))
    if rows <= 16 and _exact(fmt, isa):
        # A decode batch's exact 4- or 6-bit products: the bfloat16-rounded rows times the stored weights,
        # as d·Σ(128 + q)·x + (m − 128·d)·Σx (q6: m = −32·d), whose terms are up to (|m| + 271·d)·|x|
        # each (q4), (160 + 191)·d·|x| (q6).
        xs = np.asarray(x.astype(jnp.bfloat16).astype(jnp.float32))
        want = xs @ _dense(fmt, weights).T
        if fmt == "q6":
            magnitudes = 351 * np.abs(np.repeat(np.asarray(weights[2], "float32"), 16, axis=1))
        else:
            d = np.repeat(np.asarray(weights[1], "float32"), 32, axis=1)
            magnitudes = np.abs(np.repeat(np.asarray(weights[2], "float32"), 32, axis=1)) + 271 * d
    elif (rows <= 16 and _int16(fmt, isa)) or (rows > 16 and _int16_prefill(fmt, isa)):
        # The rows rounded to int16 per block (the same integers as the kernel's, a decode batch's or a
        # prefill's), times the stored weights: integer sums per block (q6: per group), each scaled once;
        # q4 adds m·dx·Σqx, so its terms are up to 15·d·|x| and |m|·|x| for each weight.
        xs = np.asarray(block_formats.quantize_activations(x, levels=32767))
        want = xs @ _dense(fmt, weights).T
        if fmt == "q4":
            d = np.repeat(np.asarray(weights[1], "float32"), 32, axis=1)
            magnitudes = np.abs(np.repeat(np.asarray(weights[2], "float32"), 32, axis=1)) + 15 * d
        plain = np.asarray(x) @ _dense(fmt, weights).T  # the rounding costs ~1e-5 of the products' size
        assert float(np.sqrt(np.mean((got - plain) ** 2)) / np.sqrt(np.mean(plain**2))) < 1e-4
    elif rows <= 16 and _split(fmt, isa):
        # float32 products as d·Σq·x + m·Σx: terms up to 15·d·|x| and |m|·|x| for each weight (q4), or
        # Σ(d·q)·x − 32·d·Σx with q in 0..63, (63 + 32)·d·|x| (q6)
        if fmt == "q6":
            magnitudes = 95 * np.abs(np.repeat(np.asarray(weights[2], "float32"), 16, axis=1))
        else:
            d = np.repeat(np.asarray(weights[1], "float32"), 32, axis=1)
            magnitudes = np.abs(np.repeat(np.asarray(weights[2], "float32"), 32, axis=1)) + 15 * d
        want = exact
    elif kernels.product_type(isa) == "bfloat16" and not fmt.endswith("a8"):  # as if both were rounded first
        w = _dequantize(fmt)(*weights).astype(jnp.bfloat16).astype(jnp.float32)
        want = np.asarray(x.astype(jnp.bfloat16).astype(jnp.float32) @ w.T)
        assert float(np.max(np.abs(got - exact))) <= 2e-2 * scale
    else:
        want = exact
    # The same k float32 products as XLA's, summed in another order (each copy its own vector width);
    # a8: the reference rounds the activations to the same int8 blocks, the kernel multiplies them exactly.
    bound = reordered_sum_bound(np.abs(xs) @ magnitudes.T, terms=k)
    assert np.all(np.abs(got - want) <= bound)
    if fmt.endswith("a8"):  # the price of 8-bit activations: a small error against float32 activations
        plain = np.asarray(x) @ _dense(fmt, weights).T
        error = float(np.sqrt(np.mean((got - plain) ** 2)) / np.sqrt(np.mean(plain**2)))
        assert 1e-4 < error < 1e-2


@pytest.mark.parametrize("fmt", BLOCK_FORMATS)
def test_rows_past_the_valid_count_are_skipped_and_zero(fmt: str, isa: str) -> None:
    weights = _weights(fmt, n=20, k=64, seed=2)
    x = jnp.asarray(np.random.default_rng(5).normal(size=(40, 64)).astype("float32"))
    kernel = _kernel(fmt)
    extra = {} if fmt == "q6" else {"int8_activations": fmt.endswith("a8")}
    call = jax.jit(lambda x, rows, *w: kernel(x, *w, rows=rows, isa=isa, **extra))
    full = np.asarray(call(x, jnp.int32(40), *weights))
    part = np.asarray(call(x, jnp.int32(7), *weights))  # the same compiled program: rows is traced
    # the valid rows are computed as those rows alone are (a decode batch's path, below 16 rows)
    np.testing.assert_array_equal(part[:7], np.asarray(_native(fmt, isa)(x[:7], *weights)))
    assert not part[7:].any() and full[7:].any()


@pytest.mark.parametrize("fmt", BLOCK_FORMATS)
def test_a_row_gets_the_same_bits_whatever_the_batch(fmt: str, isa: str) -> None:
    weights = _weights(fmt, n=50, k=64, seed=3)
    x = jnp.asarray(np.random.default_rng(4).normal(size=(40, 64)).astype("float32"))
    prefill = np.asarray(_native(fmt, isa)(x, *weights))  # 40 rows: a prefill's panel path
    # Decode batches (weights decoded in registers) agree with each other to the bit, so a reply is what
    # it would be alone; and with a prefill to the bit too, except where a decode batch sums the products
    # as d·Σq·x + m·Σx (the exact integer path, float32 q4): the same products, in another arrangement.
    batch = np.asarray(_native(fmt, isa)(x[:16], *weights))
    if not _split(fmt, isa):
        np.testing.assert_array_equal(batch, prefill[:16])
    else:
        np.testing.assert_allclose(batch, prefill[:16], atol=2e-2 * float(np.max(np.abs(prefill))))
    for size in (1, 5, 8, 11):
        np.testing.assert_array_equal(np.asarray(_native(fmt, isa)(x[:size], *weights)), batch[:size])


@pytest.mark.parametrize("fmt", ["q8", "q4", "q6"])
def test_a_prefill_row_gets_the_same_bits_whatever_rows_come_with_it(fmt: str, isa: str) -> None:
    # A prefill's register tiles take rows in groups (six on the avx2 copy, whose last group repeats a row
    # into a spare sum) and k in slices: each (row, output) still sums its products in order of k, so a
    # row's place in the prompt's batch of rows changes no bits. 608 = 2 slices of 256 and a part.
    weights = _weights(fmt, n=50, k=608, seed=7)
    x = jnp.asarray(np.random.default_rng(8).normal(size=(40, 608)).astype("float32"))
    product = _native(fmt, isa)
    whole = np.asarray(product(x, *weights))
    for start, stop in ((11, 40), (3, 23), (0, 17)):
        np.testing.assert_array_equal(np.asarray(product(x[start:stop], *weights)), whole[start:stop],
                                      err_msg=f"rows {start}..{stop}")


@pytest.mark.parametrize(("batch", "vocab", "k"), [(1, 37, 37), (2, 1000, 64), (3, 50_001, 64)])
def test_candidates_equal_xla_top_k_and_logsumexp(batch: int, vocab: int, k: int, isa: str) -> None:
    # (3, 50001): rows split over threads and a vocabulary that is no multiple of the vector width; ties
    # (logits rounded to a coarse grid) must come lower id first, as lax.top_k orders them.
    rng = np.random.default_rng(vocab)
    logits = jnp.asarray(np.round(rng.normal(size=(batch, vocab)) * 4).astype("float32") * 2.5)
    temperatures = jnp.asarray(np.linspace(0.3, 1.7, batch).astype("float32"))
    native = jax.jit(lambda x, t: kernels.candidates(x, t, k=k, isa=isa))
    values, ids, normalizer = native(logits, temperatures)
    want_values, want_ids = jax.lax.top_k(logits, k)
    np.testing.assert_array_equal(np.asarray(ids), np.asarray(want_ids))
    np.testing.assert_array_equal(np.asarray(values), np.asarray(want_values))
    want = jax.nn.logsumexp(logits / temperatures[:, None], axis=-1)
    np.testing.assert_allclose(np.asarray(normalizer), np.asarray(want), rtol=2e-6)


@pytest.fixture
def narrow_tiles_restored() -> Any:
    yield
    kernels.set_narrow_rows(0)


@pytest.mark.parametrize("fmt", BLOCK_FORMATS)
def test_narrow_decode_tiles_change_no_bits(fmt: str, isa: str, narrow_tiles_restored: Any) -> None:
    # One output at a time (narrow) or four interleaved (wide) is only an order of reading the weights:
    # each output's sums run in the same order, so auto may pick either by speed alone.
    weights = _weights(fmt, n=50, k=608, seed=5)  # 50 outputs: a partial tile at the end of each part
    x = jnp.asarray(np.random.default_rng(6).normal(size=(8, 608)).astype("float32"))
    product = _native(fmt, isa)
    kernels.set_narrow_rows(0)
    wide = [np.asarray(product(x[:rows], *weights)) for rows in range(1, 9)]
    kernels.set_narrow_rows(kernels.NARROW_ROWS)
    assert kernels.narrow_rows(isa) == kernels.NARROW_ROWS  # the library itself reports the setting
    for rows in range(1, 9):
        np.testing.assert_array_equal(np.asarray(product(x[:rows], *weights)), wide[rows - 1],
                                      err_msg=f"{rows} rows")
    with pytest.raises(ValueError, match="narrow rows"):
        kernels.set_narrow_rows(kernels.NARROW_ROWS + 1)


@pytest.mark.parametrize("fmt", ["q8a8", "q4a8"])
def test_integer_products_give_the_same_bits_on_every_vector_copy(fmt: str) -> None:
    # The a8 products are exact integers (VNNI's dpbusd on the avx512bf16 copy, maddubs + madd on the
    # others) summed in floats in one order, so every vector copy the CPU runs must agree to the bit.
    copies = [isa for isa in kernels.supported_isas() if isa != "scalar"]
    if len(copies) < 2:
        pytest.skip("this CPU runs one vector copy of the kernels")
    weights = _weights(fmt, n=40, k=128, seed=9)
    x = jnp.asarray(np.random.default_rng(11).normal(size=(9, 128)).astype("float32"))
    for rows in (1, 4, 9):
        want = np.asarray(_native(fmt, "avx2")(x[:rows], *weights))
        for isa in copies:
            got = np.asarray(_native(fmt, isa)(x[:rows], *weights))
            np.testing.assert_array_equal(got, want, err_msg=isa)


def test_q6_reproduces_a_q6_k_matrix_and_the_converter_keeps_it_in_6_bits() -> None:
    matrix = _q6_k_matrix(24, 512, seed=12)
    largest = float(np.max(np.abs(matrix)))
    low, high, scales = jax.jit(block_formats.q6_quantize)(jnp.asarray(matrix))
    assert (low.shape, high.shape, scales.shape) == ((24, 256), (24, 128), (24, 32))
    assert low.dtype == high.dtype == jnp.uint8 and scales.dtype == jnp.float16
    back = np.asarray(block_formats.q6_dequantize(low, high, scales))
    # to the float16 rounding of each group's d·sc: at most 2^-11 of a weight of 32 levels
    assert float(np.max(np.abs(back - matrix))) <= 2.0**-11 * largest
    assert isinstance(_blocks(jnp.asarray(matrix), "q4"), Q6Blocks)
    assert isinstance(_blocks(jnp.asarray(matrix), "q4", "q8"), Q8Blocks)  # where q8 multiplies faster
    assert isinstance(_blocks(jnp.asarray(matrix), "q4a8"), Q8Blocks)  # no 6-bit integer-product path
    assert isinstance(_blocks(jnp.asarray(matrix), "q8"), Q8Blocks)
    noise = jnp.asarray(np.random.default_rng(3).normal(size=(24, 512)).astype("float32"))
    assert isinstance(_blocks(noise, "q4"), Q8Blocks)


@pytest.mark.parametrize("top", [1, 3, 5, 8, 15, 16, 17, 31])
def test_q6_finds_the_grid_of_groups_topped_by_any_level(top: int) -> None:
    """A Q6_K group whose largest weight is at level ``top`` (both signs present): the fit tries the
    levels 32 .. 16 only, so a lower top must come back as the same grid at a multiple of its level (the
    step halved, quartered ...); 16 itself is tried, since ±16 doubled would need both -32 and +32."""
    rng = np.random.default_rng(top)
    d = rng.uniform(0.001, 0.01, size=(4, 32, 1)).astype("float16").astype("float32")
    q = rng.integers(-top, top + 1, size=(4, 32, 16))
    q[:, :, 0], q[:, :, 1] = top, -top
    matrix = (q * d).reshape(4, 512).astype("float32")
    back = np.asarray(block_formats.q6_dequantize(*jax.jit(block_formats.q6_quantize)(jnp.asarray(matrix))))
    assert float(np.max(np.abs(back - matrix))) <= 2.0**-11 * float(np.max(np.abs(matrix)))


def test_q6_blocks_lay_out_each_weights_bits_as_documented() -> None:
    """Element e of a block: low nibble in byte e (e < 16) or the high nibble of byte e - 16; high bits
    in byte e % 8 at bits 2·(e // 8). One weight at a time, so a swapped position cannot hide."""
    for e in (0, 5, 15, 16, 23, 31):
        row = np.zeros((1, 32), "float32")
        row[0, 16 * (e // 16) + (e + 1) % 16] = -32.0  # the group's scale comes out 1 (level -32: q = 0)
        row[0, e] = 27.0  # q = 59 = 0b11_1011
        low, high, scales = (np.asarray(a) for a in block_formats.q6_quantize(jnp.asarray(row)))
        assert scales[0, e // 16] == 1.0 and scales[0, 1 - e // 16] == 0.0
        nibble = low[0, e] & 15 if e < 16 else low[0, e - 16] >> 4
        assert nibble == 11
        assert (high[0, e % 8] >> (2 * (e // 8))) & 3 == 3
        back = block_formats.q6_dequantize(jnp.asarray(low), jnp.asarray(high), jnp.asarray(scales))
        np.testing.assert_array_equal(np.asarray(back), row)


def test_q6_matmul_refuses_mismatched_shapes() -> None:
    low, high, scales = block_formats.q6_quantize(jnp.asarray(_q6_k_matrix(8, 256, seed=1)))
    x = jnp.ones((2, 256), "float32")
    with pytest.raises(Exception, match="q6 matmul"):
        np.asarray(kernels.q6_matmul(x, low, high[:, :32], scales))
    with pytest.raises(Exception, match="q6 matmul"):
        np.asarray(kernels.q6_matmul(x, low, high, scales[:, :8]))


def test_q4_reproduces_a_4_bit_grid_and_gives_way_to_q8_otherwise() -> None:
    rng = np.random.default_rng(7)
    n, k = 24, 128
    # What a Q4_1 file holds: per 32 weights, float16 scale d and offset m, and w = d*q + m, q in 0..15.
    d = rng.uniform(0.001, 0.02, size=(n, k // 32)).astype("float16").astype("float32")
    m = rng.uniform(-0.2, 0.0, size=(n, k // 32)).astype("float16").astype("float32")
    q = rng.integers(0, 16, size=(n, k // 32, 32))
    q[:, :, 0], q[:, :, 1] = 0, 15  # the quantizer's grid spans the block
    grid = jnp.asarray((q * d[:, :, None] + m[:, :, None]).reshape(n, k).astype("float32"))
    packed = block_formats.q4_quantize(grid)
    assert packed[0].dtype == jnp.uint8 and packed[0].shape == (n, k // 2)
    assert float(jnp.max(jnp.abs(block_formats.q4_dequantize(*packed) - grid))) < 1e-6
    assert isinstance(_blocks(grid, "q4"), Q4Blocks)
    noise = jnp.asarray(rng.normal(size=(n, k)).astype("float32"))
    assert isinstance(_blocks(noise, "q4"), Q8Blocks)  # 4 bits would lose it: 8-bit blocks instead
    q8 = block_formats.q8_quantize(noise)
    error = float(jnp.max(jnp.abs(block_formats.q8_dequantize(*q8) - noise)) / jnp.max(jnp.abs(noise)))
    assert 0 < error < 1 / 127


def test_q4_reproduces_a_q4_k_matrix_whose_blocks_do_not_span_16_levels() -> None:
    """What llama.cpp's Q4_K dequantizes to: per 256 weights a float16 d and dmin, per 32 a 6-bit scale
    and min, w = d·sc·q − dmin·mn with q in 0..15, and most sub-blocks use only some of the 16 levels
    (here 3..12, or every other level). The range/15 fit misses those grids by ~4 %; the grid fit
    (range/j) finds them, to the float16 rounding of d·sc and the offset."""
    rng = np.random.default_rng(8)
    n, k = 16, 512
    d = rng.uniform(0.0005, 0.003, size=(n, k // 256, 1)).astype("float16").astype("float32")
    dmin = rng.uniform(0.001, 0.01, size=(n, k // 256, 1)).astype("float16").astype("float32")
    sc = rng.integers(1, 64, size=(n, k // 256, 8)).astype("float32")
    mn = rng.integers(0, 64, size=(n, k // 256, 8)).astype("float32")
    q = rng.integers(3, 13, size=(n, k // 256, 8, 32))
    q[:, 0, 0] = 2 * rng.integers(0, 8, size=(n, 32))  # one sub-block per row on every other level
    scale, offset = (d * sc)[..., None], (dmin * mn)[..., None]
    matrix = jnp.asarray((q * scale - offset).reshape(n, k).astype("float32"))
    largest = float(jnp.max(jnp.abs(matrix)))
    fit = block_formats.q4_quantize(matrix, grid=True)
    error = float(jnp.max(jnp.abs(block_formats.q4_dequantize(*fit) - matrix))) / largest
    assert error <= Q4_TOLERANCE
    assert isinstance(_blocks(matrix, "q4"), Q4Blocks)
    blocks = matrix.reshape(n, k // 32, 32)
    low, high = jnp.min(blocks, axis=-1, keepdims=True), jnp.max(blocks, axis=-1, keepdims=True)
    step = (high - low) / 15
    range_fit = jnp.round((blocks - low) / step) * step + low
    assert float(jnp.max(jnp.abs(range_fit - blocks))) / largest > 10 * Q4_TOLERANCE  # why the grid fit
    # the range fit alone: the same miss
    without = block_formats.q4_dequantize(*block_formats.q4_quantize(matrix))
    assert float(jnp.max(jnp.abs(without - matrix))) / largest > 10 * Q4_TOLERANCE


def test_q4_finds_the_grid_of_a_block_whose_closest_values_are_three_steps_apart() -> None:
    """Qwen2.5-Coder-1.5B's ffn_gate+up has a Q4_K sub-block on levels {0, 11, 14} only: no two of its
    values are one or two steps apart, so the smallest gap (the fit tried before) is not its step;
    range/14 is. Three such blocks among ordinary ones must not send the matrix to q8."""
    rng = np.random.default_rng(13)
    n, k = 8, 256
    d = rng.uniform(0.001, 0.05, size=(n, k // 32, 1)).astype("float16").astype("float32")
    m = rng.uniform(0.0, 0.5, size=(n, k // 32, 1)).astype("float16").astype("float32")
    q = rng.integers(0, 16, size=(n, k // 32, 32)).astype("float32")
    for row, block, levels in [(0, 1, (0, 11, 14)), (3, 5, (2, 6, 13)), (7, 7, (0, 15))]:
        q[row, block] = rng.choice(levels, size=32)
        q[row, block, : len(levels)] = levels  # every level present
    matrix = jnp.asarray((q * d - m).reshape(n, k))
    largest = float(jnp.max(jnp.abs(matrix)))
    fit = block_formats.q4_quantize(matrix, grid=True)
    error = float(jnp.max(jnp.abs(block_formats.q4_dequantize(*fit) - matrix))) / largest
    assert error <= Q4_TOLERANCE
    assert isinstance(_blocks(matrix, "q4"), Q4Blocks)
    closest = np.diff(np.unique(np.asarray(matrix).reshape(n, k // 32, 32)[0, 1]))
    assert np.min(closest) > 2.5 * float(d[0, 1, 0])  # the smallest gap over 1 or 2 is not the step


@pytest.mark.parametrize("kv_dtype", ["float32", "float16"])
@pytest.mark.parametrize(("tokens", "valid"), [(1, None), (5, None), (5, 3)])
@pytest.mark.parametrize(("window", "soft_cap"), [(None, None), (8, None), (None, 5.0)])
def test_attention_equals_the_decoders_xla_path(
    tokens: int, valid: int | None, window: int | None, soft_cap: float | None, kv_dtype: str, isa: str
) -> None:
    rng = np.random.default_rng(11)
    batch, heads, kv_heads, slots, hd = 4, 6, 2, 40, 32
    spec = SimpleNamespace(num_query_heads=heads, num_kv_heads=kv_heads, head_dim=hd, query_scale=hd**-0.5,
                           attention_soft_cap=soft_cap)

    def normal(*shape: int) -> Any:
        return jnp.asarray(rng.normal(size=shape).astype("float32"))

    q, k_new, v_new = (normal(batch, tokens, h, hd) for h in (heads, kv_heads, kv_heads))
    keys, values = (normal(batch, kv_heads, slots, hd).astype(kv_dtype) for _ in range(2))
    index = jnp.asarray([0, 5, 17, 31], "int32")  # rows at different positions; stale slots after each
    real = tokens if valid is None else valid

    def xla(keys: Any, values: Any) -> tuple[Any, Any, Any]:
        # Only the real tokens are written (the native call leaves padding out of the cache).
        keys = write_rows(keys, jnp.swapaxes(k_new[:, :real], 1, 2), index)
        values = write_rows(values, jnp.swapaxes(v_new[:, :real], 1, 2), index)
        positions = index[:, None] + jnp.arange(tokens)[None, :]
        out = attend(spec, q, keys, values, attention_mask(positions, slots, window))  # type: ignore[arg-type]
        return out.reshape(batch, tokens, heads, hd), keys, values

    def native(keys: Any, values: Any) -> tuple[Any, Any, Any]:
        return kernels.attention(q, k_new, v_new, index, keys, values, valid=valid, window=window,
                                 scale=spec.query_scale, soft_cap=soft_cap, isa=isa)

    want = [np.asarray(a) for a in jax.jit(xla)(keys, values)]
    got = [np.asarray(a) for a in jax.jit(native, donate_argnums=(0, 1))(jnp.copy(keys), jnp.copy(values))]
    np.testing.assert_allclose(got[0][:, :real], want[0][:, :real], atol=2e-5, rtol=1e-5)
    assert not got[0][:, real:].any()  # padding is not computed
    # The new keys/values went to each row's own slots, a float16 cache's rounded as XLA rounds them.
    assert got[1].dtype == got[2].dtype == np.dtype(kv_dtype)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[2], want[2])


def test_attention_on_a_stacked_cache_reads_and_writes_its_own_layer_only(isa: str) -> None:
    rng = np.random.default_rng(5)
    layers, batch, heads, kv_heads, slots, hd = 3, 2, 4, 2, 24, 16

    def normal(*shape: int) -> Any:
        return jnp.asarray(rng.normal(size=shape).astype("float32"))

    q, k_new, v_new = (normal(batch, 1, h, hd) for h in (heads, kv_heads, kv_heads))
    keys, values = (normal(layers, batch, kv_heads, slots, hd).astype("float16") for _ in range(2))
    index = jnp.asarray([3, 11], "int32")

    def call(keys: Any, values: Any, layer: int | None) -> tuple[Any, Any, Any]:
        return kernels.attention(q, k_new, v_new, index, keys, values, layer=layer, window=None, scale=0.25,
                                 soft_cap=None, isa=isa)

    alone = [np.asarray(a) for a in jax.jit(partial(call, layer=None))(keys[1], values[1])]
    out, new_keys, new_values = (np.asarray(a) for a in
                                 jax.jit(partial(call, layer=1), donate_argnums=(0, 1))(jnp.copy(keys),
                                                                                        jnp.copy(values)))
    np.testing.assert_array_equal(out, alone[0])
    np.testing.assert_array_equal(new_keys[1], alone[1])
    np.testing.assert_array_equal(new_values[1], alone[2])
    for other in (0, 2):  # the other layers' caches are untouched
        np.testing.assert_array_equal(new_keys[other], np.asarray(keys[other]))
        np.testing.assert_array_equal(new_values[other], np.asarray(values[other]))
    with pytest.raises(ValueError, match="stacked one needs one"):
        call(keys, values, None)


@pytest.fixture(scope="module", params=["tiny-llama", "tiny-gemma3"])
def native_twins(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[LocalChatModel, Any]:
    """A tiny model served natively in q8, and its decoder run as plain XLA on the same blocks."""
    entry = {e.slug: e for e in load_catalogue(TINY_CATALOGUE)}[request.param]
    built = build_chat_model(dataclasses.replace(entry, weights="q8"), cache_dir=tmp_path_factory.mktemp("k"),
                             warm_up=False)
    assert isinstance(built, LocalChatModel) and built.engine is not None
    assert built.weight_format == "q8" and built.engine.spec.native_kernels
    assert built.engine.spec.kv_dtype == "float16"  # served natively: a float16 cache (its twin keeps it)
    return built, dataclasses.replace(built.engine.spec, native_kernels=False)


def test_a_model_served_natively_stays_close_to_its_xla_twin(
    native_twins: tuple[LocalChatModel, Any],
) -> None:
    model, xla_spec = native_twins
    assert model.engine is not None
    params, native_spec = model.engine.params, model.engine.spec
    prompt = model.loaded.tokenizer.encode("A prompt long enough to pass the sliding window of tiny Gemma 3")

    def logits(spec: Any) -> np.ndarray:
        """Next-token logits after the (padded) prompt, then after three single-token steps."""
        run = jax.jit(lambda c, t, i, valid: forward(spec, params, c, t, i, valid=valid))
        head = jax.jit(lambda h: output_logits(spec, params, h))
        cache = empty_cache(spec, batch=1, slots=128)
        padded = jnp.asarray([prompt + [0] * (64 - len(prompt))], "int32")
        hidden, cache = run(cache, padded, jnp.zeros((1,), "int32"), jnp.int32(len(prompt)))
        out = [head(hidden[:, len(prompt) - 1])]
        for i, token in enumerate([5, 17, 9]):
            index = jnp.asarray([len(prompt) + i], "int32")
            hidden, cache = run(cache, jnp.asarray([[token]], "int32"), index, None)
            out.append(head(hidden[:, 0]))
        return np.concatenate([np.asarray(o) for o in out])

    native, xla = logits(native_spec), logits(xla_spec)
    scale = float(np.max(np.abs(xla)))
    assert scale > 0.1
    # Both multiply the same blocks; the kernels may round the products to bfloat16 (kernels.product_type),
    # or a step's activations to int16 per block (at most 1/65534 of a block's largest value, through
    # every layer: 1.2e-4 of the logits' scale seen on tiny Llama), for any of the model's formats (the
    # avx512 copy rounds only q8's: 1.2e-4 there too, through the tiny model's q8 matrices).
    if kernels.product_type() == "float32":
        int16 = any(kernels.int16_rows(fmt=fmt) for fmt in ("q4", "q6", "q8"))
        tolerance = 1e-3 if int16 else 1e-4
    else:
        tolerance = 5e-2
    assert float(np.max(np.abs(native - xla))) <= tolerance * scale


def test_natively_served_requests_batched_equal_each_alone(native_twins: tuple[LocalChatModel, Any]) -> None:
    model, _ = native_twins
    prompts = [model.loaded.tokenizer.encode(t) for t in ("Hi there", "A longer prompt, by some way", "Mid")]
    greedy = GenerationParams(max_new_tokens=10, temperature=0.0)
    alone = []
    for prompt in prompts:
        trace = TokenTrace(ids=[])
        list(model.stream_ids(prompt, greedy, trace=trace))
        alone.append(trace.ids)
    assert all(alone)
    scheduler = SlotScheduler(model.engine, model.loaded.tokenizer)  # type: ignore[arg-type]
    traces = [TokenTrace(ids=[]) for _ in prompts]
    for prompt, trace in zip(prompts, traces, strict=True):
        scheduler.submit(prompt, greedy, stop_ids=model.stop_ids, emit=lambda event: None, trace=trace)
    while scheduler.busy:
        scheduler.tick()
    assert [t.ids for t in traces] == alone  # a row gets the same bits whatever the batch


def test_kernels_command_reports_the_built_library(capsys: pytest.CaptureFixture[str]) -> None:
    from commands.inference import main

    assert main(["kernels", "--json"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["ready"] is True and report["reason"] is None
    assert Path(report["library"]).is_file() and report["library"].startswith(report["cache_dir"])
    assert report["products"] in ("bfloat16", "float32") and isinstance(report["vector_decode"], bool)
    assert report["decode_activations"] == kernels.decode_activations()
    by_copy = {"avx512bf16": "bfloat16", "avx2": "int16"}
    assert report["decode_activations"] == by_copy.get(report["isa"], "float32")
    # a prefill: int16 on the avx2 copy, the products' own type elsewhere
    assert report["prefill_activations"] == ("int16" if report["isa"] == "avx2" else report["products"])
    assert report["isa"] == kernels.selected_isa() and report["isa"] in report["isas"]
    assert report["isa"] in Path(report["library"]).parent.name  # one copy per instruction set
    auto = report["auto"]
    assert auto["format"] in ("q4", "q8", "float32", "bfloat16") and auto["why"]
    assert {c["format"] for c in auto["candidates"]} == {"q4", "q8", "float32", "bfloat16"}
    assert auto["six_bit"] in ("q6", "q8") and auto["six_bit_why"]
    assert {c["six_bit"] for c in auto["candidates"]} == {None, "q6", "q8"}
    assert main(["kernels"]) == 0
    text = capsys.readouterr().out
    assert "ready" in text and (f"6-bit matrices in {auto['six_bit']}" in text) == (auto["format"] == "q4")


def test_the_cpu_decides_which_copy_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels, "_preferred", None)  # before weights = "auto" has measured the copies
    flags = kernels.cpu_flags()
    expected = "avx2" if {"avx2", "fma", "f16c"} <= flags else "scalar"
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        expected = "avx512bf16" if {"avx512_bf16", "avx512_vnni", "avx512vbmi"} <= flags else "avx512"
    assert kernels.selected_isa() == expected or "ARENA_KERNEL_ISA" in os.environ
    assert kernels.vector_decode("scalar") is False
    monkeypatch.setenv("ARENA_KERNEL_ISA", "scalar")
    assert kernels.selected_isa() == "scalar"
    monkeypatch.setenv("ARENA_KERNEL_ISA", "avx9")
    assert "ARENA_KERNEL_ISA='avx9'" in (kernels.kernel_status() or "")
    missing = [isa for isa in kernels.ISAS if isa not in kernels.supported_isas()]
    for isa in missing:  # a copy this CPU cannot run is refused before it is loaded, never run
        assert "cannot run" in (kernels.kernel_status(isa) or "")


def test_a_forced_copy_the_cpu_lacks_leaves_the_model_on_xla(tmp_path: Path) -> None:
    missing = [isa for isa in kernels.ISAS if isa not in kernels.supported_isas()]
    if not missing:
        pytest.skip("this CPU runs every copy of the kernels")
    env = {**os.environ, "ARENA_KERNEL_ISA": missing[0], "ARENA_KERNEL_CACHE": str(tmp_path),
           "KERAS_BACKEND": "jax"}
    env.pop("XLA_FLAGS", None)
    script = ("import json; from inference.engine.weight_policy import choose_weights; "
              "print(json.dumps(choose_weights('q4')))")
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120, check=True)
    fmt, native, why = json.loads(run.stdout.strip().splitlines()[-1])
    assert (fmt, native) == ("q4", False) and "cannot run" in why


def _candidate(fmt: str, one: float, eight: float, error: float = 1e-3) -> Any:
    from inference.engine.weight_policy import Candidate

    return Candidate(fmt, fmt in ("q4", "q8"), {1: one, 8: eight}, error)  # type: ignore[arg-type]


def test_auto_keeps_the_fastest_format_whose_products_pass() -> None:
    from inference.engine.format_timing import PRODUCT_TOLERANCE
    from inference.engine.weight_policy import decide

    best, why = decide((_candidate("q4", 2.0, 6.0), _candidate("q8", 3.0, 6.0),
                        _candidate("float32", 4.0, 8.0), _candidate("bfloat16", 2.5, 50.0)))
    assert best.format == "q4" and "q4 2.00/6.00 ms" in why
    # 1.2x faster at one row outweighs 1.1x slower at eight (their sum would have picked q8: AMD Zen 4)
    best, _ = decide((_candidate("q4", 4.81, 15.13), _candidate("q8", 5.79, 13.79)))
    assert best.format == "q4"
    best, _ = decide((_candidate("q4", 9.0, 30.0), _candidate("float32", 4.0, 8.0)))  # a scalar CPU's q4
    assert best.format == "float32"
    # a heavier format must be HEAVIER_MARGIN better: q8 scoring 6% better (AMD Zen 4, 2026-12-03) is not
    best, why = decide((_candidate("q4", 3.79, 13.85), _candidate("q8", 4.72, 9.85)))
    assert best.format == "q4" and "within 1.20x of q8" in why
    best, _ = decide((_candidate("q4", 5.0, 20.0), _candidate("q8", 4.0, 12.0)))  # 1.44x better: served
    assert best.format == "q8"
    # compared with the fastest, not chained: bfloat16 within the margin of float32, q4 within it of bfloat16
    best, _ = decide((_candidate("float32", 5.0, 5.0), _candidate("bfloat16", 5.9, 5.9),
                      _candidate("q4", 7.0, 7.0)))
    assert best.format == "bfloat16"
    best, _ = decide((_candidate("bfloat16", 7.39, 177.4), _candidate("float32", 14.08, 43.8)))  # no kernels
    assert best.format == "float32"
    best, why = decide((_candidate("q4", 1.0, 1.0, error=2 * PRODUCT_TOLERANCE), _candidate("q8", 3.0, 6.0)))
    assert best.format == "q8" and "q4 failed the product check" in why
    with pytest.raises(ValueError):
        decide((_candidate("q4", 1.0, 1.0, error=1.0),))


def _six_bit(kind: str, one: float, eight: float, isa: str = "avx2", narrow: int = 0,
             error: float = 1e-3) -> Any:
    from inference.engine.weight_policy import Candidate

    return Candidate("q4", True, {1: one, 8: eight}, error, isa, narrow, kind)


def test_auto_serves_6_bit_matrices_in_q8_only_where_q8_is_that_much_faster() -> None:
    from inference.engine.format_timing import PRODUCT_TOLERANCE
    from inference.engine.weight_policy import decide, decide_six_bit

    # AMD Zen 3 (AVX2): widening 6 bits cost more than reading 8
    zen3 = (_six_bit("q6", 1.9, 5.6), _six_bit("q8", 1.3, 3.0))
    six_bit, why = decide_six_bit(zen3, "avx2", 0)
    assert six_bit == "q8" and "as fast as q6 on avx2" in why and "q6 1.90/5.60 ms" in why
    assert decide_six_bit(zen3, "avx512", 0)[0] == "q6"  # timed on another copy only: kept as they are
    assert decide_six_bit(zen3, "avx2", 4)[0] == "q6"  # ... or with other tiles
    six_bit, why = decide_six_bit((_six_bit("q6", 1.0, 4.0), _six_bit("q8", 0.9, 3.6)), "avx2", 0)
    assert six_bit == "q6" and "not 1.20x" in why  # 1.1x: not worth re-quantizing and 1.2x the bytes
    failing = (_six_bit("q6", 1.9, 5.6), _six_bit("q8", 1.3, 3.0, error=2 * PRODUCT_TOLERANCE))
    assert decide_six_bit(failing, "avx2", 0)[0] == "q6"
    # the 6-bit timings are not formats: decide never serves one, however fast
    best, _ = decide((_candidate("q4", 2.0, 6.0), _candidate("q8", 3.0, 6.0), _six_bit("q8", 0.1, 0.1)))
    assert best.format == "q4" and best.six_bit is None


def test_auto_measures_once_per_machine_then_reads_the_verdict(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from inference.engine import weight_policy

    monkeypatch.setenv("ARENA_KERNEL_CACHE", str(tmp_path))
    calls: list[bool] = []

    def small(*, native: bool, isas: tuple[str, ...]) -> Any:
        calls.append(native)
        return weight_policy.measure(native=native, isas=isas, size=256, matrices=2, repeats=2)

    monkeypatch.setattr(kernels, "_preferred", None)
    first = weight_policy.auto_verdict(measure_fn=small)
    assert calls == [True] and not first.cached
    assert {c.format for c in first.candidates} == {"q4", "q8", "float32", "bfloat16"}
    measured = {(c.format, c.isa) for c in first.candidates if c.native}  # q4 and q8 on every vector copy
    assert measured == {(f, isa) for f in ("q4", "q8") for isa in weight_policy.copies_to_measure()}
    assert first.isa == weight_policy.fastest_copy(first.candidates, first.format) == kernels.selected_isa()
    tiles = {(c.format, c.isa, c.narrow_rows) for c in first.candidates if c.native}  # wide and narrow
    assert tiles == {(f, isa, n) for f, isa in measured for n in (0, kernels.NARROW_ROWS)}
    fastest = weight_policy.fastest_native(first.candidates, first.format)
    assert fastest is not None and first.narrow_rows == fastest.narrow_rows == kernels.narrow_rows()
    served = [c for c in first.candidates if c.native and c.format == first.format]
    assert fastest.format == first.format or not served
    for c in first.candidates:  # real timings, and products that agree with float64 on the same weights
        assert all(t > 0 for t in c.ms.values()) and c.product_error < 1e-2
    assert first.format == weight_policy.decide(first.candidates)[0].format
    sixes = {(c.six_bit, c.isa, c.narrow_rows) for c in first.candidates if c.six_bit}  # q4's 6-bit quarter
    assert sixes == {(s, isa, n) for s in ("q6", "q8") for _, isa, n in tiles}
    assert (first.six_bit, first.six_bit_why) == weight_policy.decide_six_bit(
        first.candidates, first.isa, first.narrow_rows)
    assert weight_policy.served_six_bit("q4", True) == first.six_bit
    assert weight_policy.served_six_bit("q4", False) == weight_policy.served_six_bit("q8", True) == "q6"
    again = weight_policy.auto_verdict(measure_fn=small)
    assert calls == [True] and again.cached and again.format == first.format  # read, not measured
    assert (again.six_bit, again.six_bit_why) == (first.six_bit, first.six_bit_why)
    assert [c.six_bit for c in again.candidates] == [c.six_bit for c in first.candidates]
    assert weight_policy.choose_weights("auto")[0] == first.format
    assert list(tmp_path.glob("weights-auto-*.json"))


def test_kernels_measure_replaces_the_cached_verdict(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from commands.inference import main
    from inference.engine import weight_policy

    monkeypatch.setenv("ARENA_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(kernels, "_preferred", None)
    measure = weight_policy.measure
    calls: list[int] = []

    def small(*, native: bool, isas: tuple[str, ...]) -> Any:
        calls.append(len(calls))
        return measure(native=native, isas=isas, size=256, matrices=2, repeats=2)

    monkeypatch.setattr(weight_policy, "measure", small)

    def report(*args: str) -> dict[str, Any]:
        assert main(["kernels", "--json", *args]) == 0
        return dict(json.loads(capsys.readouterr().out.strip().splitlines()[-1])["auto"])

    first = report()
    assert len(calls) == 1 and not first["cached"]
    assert report()["cached"] and len(calls) == 1  # read back
    again = report("--measure")
    assert len(calls) == 2 and not again["cached"]
    read = report()
    assert len(calls) == 2 and read["cached"]
    assert [c["ms"] for c in read["candidates"]] == [c["ms"] for c in again["candidates"]]  # the new one
    assert [c["ms"] for c in read["candidates"]] != [c["ms"] for c in first["candidates"]]


def test_two_starts_at_once_measure_once_and_the_later_reads_the_verdict(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Starts measuring side by side would time each other: the later one waits for the first's verdict
    (threads here; each opens the lock file itself, as processes do)."""
    import logging
    import threading

    from inference.engine import weight_policy

    monkeypatch.setenv("ARENA_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(kernels, "_preferred", None)
    second_waits = threading.Event()

    class Waiting(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "another start is measuring" in record.getMessage():
                second_waits.set()

    handler = Waiting()
    logger = logging.getLogger("inference.engine.weight_policy")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    calls: list[str] = []

    def small(*, native: bool, isas: tuple[str, ...]) -> Any:
        calls.append(threading.current_thread().name)
        assert second_waits.wait(timeout=120)  # the other start is at the lock while this one measures
        return weight_policy.measure(native=native, isas=isas, size=256, matrices=2, repeats=2)

    verdicts: dict[str, Any] = {}

    def start() -> None:
        verdicts[threading.current_thread().name] = weight_policy.auto_verdict(measure_fn=small)

    try:
        first = threading.Thread(target=start, name="first")
        first.start()
        for _ in range(1200):  # until the first measures (it holds the lock from then on)
            if calls:
                break
            time.sleep(0.05)
        second = threading.Thread(target=start, name="second")
        second.start()
        first.join(timeout=300)
        second.join(timeout=300)
    finally:
        second_waits.set()
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert calls == ["first"]
    assert not verdicts["first"].cached and verdicts["second"].cached
    assert verdicts["second"].format == verdicts["first"].format
    got, want = verdicts["second"].candidates, verdicts["first"].candidates  # the cache rounds the times
    assert [(c.format, c.isa, c.narrow_rows, c.six_bit) for c in got] == \
        [(c.format, c.isa, c.narrow_rows, c.six_bit) for c in want]
    assert [c.ms for c in got] == [{rows: round(ms, 3) for rows, ms in c.ms.items()} for c in want]


def test_auto_times_q4_as_served_with_a_quarter_of_its_matrices_in_q6() -> None:
    from inference.engine import format_timing, weight_policy

    rng = np.random.default_rng(3)
    dense = [jnp.asarray(rng.normal(0, 0.05, size=(64, 128)).astype("float32")) for _ in range(8)]
    workloads = format_timing.block_workloads(dense)
    assert [m.kind for m in workloads["q4"]] == ["q4"] * 6 + ["q6"] * 2
    assert [m.kind for m in workloads["q8"]] == ["q8"] * 8
    assert [m.kind for m in format_timing.block_workloads(dense[:2])["q4"]] == ["q4", "q6"]
    sixes = format_timing.six_bit_workloads(workloads)  # the 6-bit quarter alone, as q6 and as q8
    assert [m.kind for m in sixes["q6"]] == ["q6", "q6"] and [m.kind for m in sixes["q8"]] == ["q8", "q8"]
    for six, eight in zip(sixes["q6"], sixes["q8"], strict=True):  # the same matrices
        values = [np.asarray(m.dequantize(m.stored)) for m in (six, eight)]
        assert np.max(np.abs(values[0] - values[1])) < 1e-2  # rounding apart (different matrices: ~0.3)
    probe = rng.normal(size=(8, 128))
    for copy in weight_policy.copies_to_measure():
        served = format_timing.on_copy(workloads["q4"], copy)
        assert format_timing.product_error_of(served, probe) < 1e-2
        # the q6 matrices' products are checked too: a kernel wrong at 6 bits fails the candidate
        six = served[6]  # the first q6 matrix, the one checked
        wrong = dataclasses.replace(six, product=lambda x, w, six=six: -six.product(x, w))
        broken = [*served[:6], wrong, served[7]]
        assert format_timing.product_error_of(broken, probe) > 1.0


def test_auto_times_the_kernels_in_rounds_of_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    from inference.engine import format_timing, weight_policy

    groups: list[list[bool]] = []
    timed = format_timing.time_rounds

    def spy(runs: list[Any], inputs: dict[int, Any], repeats: int) -> list[dict[int, float]]:
        groups.append([run.native for run in runs])
        return timed(runs, inputs, repeats)

    monkeypatch.setattr(format_timing, "time_rounds", spy)
    copies = weight_policy.copies_to_measure()
    candidates = format_timing.measure(native=True, isas=copies, size=256, matrices=2, repeats=1)
    # XLA's two dots; the kernels' runs: q4 and q8, and q4's 6-bit quarter as q6 and q8, each wide and narrow
    assert sorted(groups) == [[False] * 2, [True] * (8 * len(copies))]
    assert len(candidates) == 2 + 8 * len(copies) and all(t > 0 for c in candidates for t in c.ms.values())


def test_a_verdict_is_measured_again_when_any_line_of_the_kernels_changes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from inference.engine import weight_policy

    for path in kernels.sources():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    monkeypatch.setattr(kernels, "SOURCE", tmp_path / kernels.SOURCE.name)
    isas = weight_policy.copies_to_measure()
    paths = [weight_policy._verdict_path(isas)]
    for name in (kernels.SOURCE.name, "attention.h"):  # the unit itself and one of its parts
        part = tmp_path / name
        part.write_text(part.read_text() + "\n// a change at the end of the file\n")  # past any prefix
        paths.append(weight_policy._verdict_path(isas))
    assert len(set(paths)) == 3


def test_the_kernels_use_the_copy_auto_measured_fastest(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from inference.engine import weight_policy
    from inference.engine.weight_policy import Candidate

    copies = weight_policy.copies_to_measure()
    if len(copies) < 2:
        pytest.skip("this CPU runs one vector copy of the kernels")
    monkeypatch.setenv("ARENA_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(kernels, "_preferred", None)
    slowest_first = list(reversed(copies))  # the least capable copy measured fastest, as avx512 on Intel

    def measured(*, native: bool, isas: tuple[str, ...]) -> Any:
        assert native and isas == copies
        return tuple(Candidate(fmt, True, {1: 1.0 + i + (fmt == "q8"), 8: 4.0 + i}, 1e-3, isa)  # type: ignore[arg-type]
                     for i, isa in enumerate(slowest_first) for fmt in ("q4", "q8")) + (
            Candidate("float32", False, {1: 9.0, 8: 9.0}, 1e-7),)

    verdict = weight_policy.auto_verdict(measure_fn=measured)
    assert (verdict.format, verdict.isa) == ("q4", slowest_first[0])
    assert f"q4/{slowest_first[0]} 1.00/4.00 ms" in verdict.why
    assert kernels.selected_isa() == slowest_first[0] != kernels.supported_isas()[0]
    monkeypatch.setattr(kernels, "_preferred", None)  # a new process asking for q4 explicitly
    assert weight_policy.choose_weights("q4")[:2] == ("q4", True)
    assert kernels.selected_isa() == slowest_first[0]  # read from the cached verdict, not measured
    monkeypatch.setenv("ARENA_KERNEL_ISA", copies[0])
    assert kernels.selected_isa() == copies[0]  # a forced copy still wins
    monkeypatch.setattr(kernels, "_preferred", None)


def _verdict_on_one_copy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, blocks: tuple[tuple[str, float, float, int], ...],
    float32: tuple[float, float],
) -> tuple[Any, str]:
    """``auto``'s verdict, in a fresh cache, on these measurements: block formats as (format, batch-1 ms,
    batch-8 ms, narrow rows) on the first copy measured, and float32's two times; and that copy."""
    from inference.engine import weight_policy
    from inference.engine.weight_policy import Candidate

    monkeypatch.setenv("ARENA_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(kernels, "_preferred", None)
    copy = weight_policy.copies_to_measure()[0]

    def measured(*, native: bool, isas: tuple[str, ...]) -> Any:
        return tuple(Candidate(fmt, True, {1: one, 8: eight}, 1e-3, copy, narrow)  # type: ignore[arg-type]
                     for fmt, one, eight, narrow in blocks) + (
            Candidate("float32", False, {1: float32[0], 8: float32[1]}, 1e-7),)

    return weight_policy.auto_verdict(measure_fn=measured), copy


def test_the_kernels_use_the_tiles_auto_measured_fastest(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, narrow_tiles_restored: Any
) -> None:
    from inference.engine import weight_policy

    verdict, copy = _verdict_on_one_copy(monkeypatch, tmp_path, (
        ("q4", 3.0, 8.0, 0), ("q4", 2.0, 8.0, kernels.NARROW_ROWS), ("q8", 2.5, 9.0, kernels.NARROW_ROWS)),
        float32=(9.0, 9.0))
    assert (verdict.format, verdict.narrow_rows) == ("q4", kernels.NARROW_ROWS)
    assert f"q4/{copy}/narrow 2.00/8.00 ms" in verdict.why
    assert kernels.narrow_rows(copy) == kernels.NARROW_ROWS
    assert verdict.as_json()["narrow_rows"] == kernels.NARROW_ROWS
    kernels.set_narrow_rows(0)  # a new process asking for q4 explicitly reads the cached verdict
    assert weight_policy.choose_weights("q4")[:2] == ("q4", True)
    assert kernels.narrow_rows(copy) == kernels.NARROW_ROWS


def test_the_kernels_use_the_served_formats_tiles_not_a_faster_heavier_ones(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, narrow_tiles_restored: Any
) -> None:
    verdict, copy = _verdict_on_one_copy(monkeypatch, tmp_path, (  # q8 narrow scores best, within the margin
        ("q4", 3.8, 13.9, 0), ("q4", 4.4, 14.5, kernels.NARROW_ROWS), ("q8", 4.7, 9.9, kernels.NARROW_ROWS)),
        float32=(14.0, 43.8))
    assert (verdict.format, verdict.narrow_rows) == ("q4", 0)
    assert kernels.narrow_rows(copy) == 0


def test_on_a_sharded_mesh_auto_never_uses_the_native_kernels() -> None:
    from inference.engine.weight_policy import choose_weights
    from inference.sharding import family_distribution, make_mesh

    if len(jax.devices()) < 2:
        pytest.skip("needs XLA_FLAGS=--xla_force_host_platform_device_count=8 (tests/conftest.py sets it)")
    with family_distribution("llama", make_mesh()).scope():
        weights, native, why = choose_weights("auto")
        assert weights in ("float32", "bfloat16") and native is False and "sharded" in why
        assert choose_weights("q4")[:2] == ("q4", False)  # the same blocks, multiplied by plain XLA


def test_without_a_compiler_auto_measures_the_xla_formats(tmp_path: Path) -> None:
    env = {**os.environ, "CXX": "/bin/false", "ARENA_KERNEL_CACHE": str(tmp_path), "KERAS_BACKEND": "jax"}
    env.pop("XLA_FLAGS", None)
    script = ("import json; from inference.engine.weight_policy import choose_weights; "
              "print(json.dumps([choose_weights('auto'), choose_weights('q4')]))")
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300, check=True)
    auto, q4 = json.loads(run.stdout.strip().splitlines()[-1])
    assert auto[0] in ("float32", "bfloat16") and auto[1] is False and "failed" in auto[2]
    assert q4[:2] == ["q4", False]  # asked for explicitly: the same blocks, multiplied by plain XLA
    cli = subprocess.run([sys.executable, "-m", "inference", "kernels", "--json"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    assert cli.returncode == 1
    report = json.loads(cli.stdout.strip().splitlines()[-1])
    assert report["ready"] is False and "failed" in report["reason"] and report["library"] is None
    # measured again, not read from a cache: a build that failed may work next start (a compiler installed)
    assert report["auto"]["format"] in ("float32", "bfloat16") and report["auto"]["cached"] is False
    assert not list(tmp_path.glob("weights-auto-*.json"))


def test_kernel_bench_times_every_copy_beside_xla() -> None:
    from inference.engine import kernel_bench

    out = kernel_bench.run_kernel_bench(repeats=2, rows=(1, 3), shapes=((64, 32), (32, 64)))  # x: 64 wide
    paths = {row["path"] for row in out["results"]}
    assert {"float32/xla", "bfloat16/xla"} <= paths
    for isa in out["isas"]:  # every copy this CPU runs, each block format with and without a8
        assert {f"{fmt}/{isa}" for fmt in ("q4", "q6", "q8", "q4a8", "q8a8")} <= paths
    assert out["weights"] == 64 * 32 + 32 * 64
    assert all(row["ms"] > 0 and row["gweights_s"] > 0 for row in out["results"])


def test_kernel_bench_cli_runs_the_named_workload(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from commands.inference import main
    from inference.engine import kernel_bench

    monkeypatch.setitem(kernel_bench.WORKLOADS, "qwen2.5-1.5b", ((48, 64), (64, 96)))  # Qwen's, shrunk
    monkeypatch.setattr(kernel_bench, "ROWS", (1,))
    assert main(["kernels", "--bench", "--shapes", "qwen2.5-1.5b", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["weights"] == 48 * 64 + 64 * 96 and {row["rows"] for row in out["results"]} == {1}
    with pytest.raises(SystemExit):
        main(["kernels", "--bench", "--shapes", "llama-70b"])
