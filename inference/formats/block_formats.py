"""The weights' block formats in plain XLA: quantizing a float matrix to them, the float matrix they stand
for, and their products with activations (the same arithmetic as :mod:`inference.engine.kernels`' native
products, on any backend and sharding; the native copies are tested against these).

- ``q8``: int8, one float16 scale per 32 weights (llama.cpp's Q8_0);
- ``q4``: 4-bit, a float16 scale and offset per 32 weights (Q4_1), packed two a byte, element j in the low
  nibble and j + 16 in the high one of a block's byte j;
- ``q6``: 6-bit, ``w = d·(q − 32)`` with a float16 ``d`` per 16 weights (what a Q6_K file's values are):
  the low nibbles laid out as q4's, the two high bits of elements j, j+8, j+16, j+24 in a block's byte j.

Every function here is jit-able and imports JAX only when called.
"""

from __future__ import annotations

from typing import Any

BLOCK = 32  # weights per scale
Q6_GROUP = 16  # q6 weights per scale
# q6_quantize tries the group's largest weight at each level from 32 down to this one: a group whose
# largest is at level j < 16 is the same grid at level 2j, 4j ... (a half, quarter ... step), one of which
# is in 16..30; level 16 itself stays, since ±16 doubled would be ±32, which 6 bits cannot both hold.
Q6_LOWEST_TOP = 16
# q4_quantize's grid fit: a block that spans j steps of its 4-bit grid (j = 1..15) has span/j as its step,
# and so does span/(a multiple of j); every j up to 15 has a multiple in 8..15, so those eight are tried.
Q4_SPANS = tuple(range(15, 7, -1))


def q8_dequantize(values: Any, scales: Any) -> Any:
    """q8 blocks -> the float32 ``(N, K)`` matrix they stand for (jit-able, any backend)."""
    import jax.numpy as jnp

    n, k = values.shape
    blocks = values.reshape(n, k // BLOCK, BLOCK).astype(jnp.float32)
    return (blocks * scales.astype(jnp.float32)[:, :, None]).reshape(n, k)


def q4_dequantize(packed: Any, scales: Any, offsets: Any) -> Any:
    """q4 blocks -> the float32 ``(N, K)`` matrix they stand for."""
    import jax.numpy as jnp

    n, half = packed.shape
    pairs = packed.reshape(n, half * 2 // BLOCK, BLOCK // 2)
    q = jnp.concatenate([pairs & 15, pairs >> 4], axis=-1).astype(jnp.float32)  # element j, then j+16
    weights = q * scales.astype(jnp.float32)[:, :, None] + offsets.astype(jnp.float32)[:, :, None]
    return weights.reshape(n, half * 2)


def q6_dequantize(low: Any, high: Any, scales: Any) -> Any:
    """q6 blocks -> the float32 ``(N, K)`` matrix they stand for."""
    import jax.numpy as jnp

    n, half = low.shape
    blocks = half * 2 // BLOCK
    pairs = low.reshape(n, blocks, BLOCK // 2)
    nibbles = jnp.concatenate([pairs & 15, pairs >> 4], axis=-1).astype(jnp.int32)  # element j, then j+16
    bits = high.reshape(n, blocks, 1, BLOCK // 4).astype(jnp.int32)
    tops = (bits >> (2 * jnp.arange(4, dtype=jnp.int32))[None, None, :, None]) & 3  # (.., t, j): element 8t+j
    q = (nibbles + 16 * tops.reshape(n, blocks, BLOCK) - 32).astype(jnp.float32)
    groups = q.reshape(n, blocks * BLOCK // Q6_GROUP, Q6_GROUP) * scales.astype(jnp.float32)[:, :, None]
    return groups.reshape(n, half * 2)


def quantize_activations(x: Any, levels: int = 127) -> Any:
    """``x (M, K)`` float32 as the integer kernels see it: per block of 32 along K,
    ``round(x · levels/amax)`` times ``amax/levels`` (the same float operations as the C++, so the same
    integers). ``levels``: 127 (int8, the ``a8`` formats) or 32767 (int16, :func:`int16_rows`)."""
    import jax.numpy as jnp

    m, k = x.shape
    top = jnp.float32(levels)
    blocks = x.astype(jnp.float32).reshape(m, k // BLOCK, BLOCK)
    amax = jnp.max(jnp.abs(blocks), axis=-1, keepdims=True)
    inverse = jnp.where(amax > 0, top / jnp.where(amax > 0, amax, 1.0), 0.0)
    q = jnp.clip(jnp.round(blocks * inverse), -levels, levels)
    return (q * (amax / top)).reshape(m, k)


def q8_matmul_reference(x: Any, values: Any, scales: Any, *, int8_activations: bool = False) -> Any:
    """:func:`q8_matmul` in plain XLA: dequantize, then one dot."""
    import jax.numpy as jnp

    x = quantize_activations(x) if int8_activations else x.astype(jnp.float32)
    return jnp.dot(x, q8_dequantize(values, scales).T)


def q4_matmul_reference(x: Any, packed: Any, scales: Any, offsets: Any, *,
                        int8_activations: bool = False) -> Any:
    """:func:`q4_matmul` in plain XLA."""
    import jax.numpy as jnp

    x = quantize_activations(x) if int8_activations else x.astype(jnp.float32)
    return jnp.dot(x, q4_dequantize(packed, scales, offsets).T)


def q6_matmul_reference(x: Any, low: Any, high: Any, scales: Any) -> Any:
    """:func:`q6_matmul` in plain XLA."""
    import jax.numpy as jnp

    return jnp.dot(x.astype(jnp.float32), q6_dequantize(low, high, scales).T)


def _q6_scales(groups: Any) -> Any:
    """Each group's signed float16 ``d`` (see :func:`q6_quantize`) for ``groups (G, 16)``."""
    import jax
    import jax.numpy as jnp

    largest = jnp.max(jnp.abs(groups), axis=-1)

    def candidate(i: Any, best: tuple[Any, Any]) -> tuple[Any, Any]:
        scale, best_error = best
        step = (largest / (32 - i).astype(jnp.float32)).astype(jnp.float16)  # level 32, then 31 ... 16
        wide = step.astype(jnp.float32)[:, None]
        levels = jnp.round(groups / jnp.where(wide == 0, 1.0, wide))
        error = jnp.max(jnp.abs(levels * wide - groups), axis=-1)
        low, high = jnp.min(levels, axis=-1), jnp.max(levels, axis=-1)
        upright = (low >= -32) & (high <= 31)  # else -d, whose levels are these negated: [-31, 32]
        error = jnp.where(upright | ((low >= -31) & (high <= 32)), error, jnp.inf)
        better = error < best_error  # ties keep the finer grid
        signed = jnp.where(upright, step, -step)
        return jnp.where(better, signed, scale), jnp.where(better, error, best_error)

    start = (jnp.zeros(largest.shape, jnp.float16), jnp.full(largest.shape, jnp.inf, jnp.float32))
    return jax.lax.fori_loop(0, 32 - Q6_LOWEST_TOP + 1, candidate, start)[0]


def q6_quantize(matrix: Any, *, chunk: int = 1 << 16) -> tuple[Any, Any, Any]:
    """``(N, K)`` float -> q6 ``(low, high, scales)``: per group of 16 along K, ``w ≈ d·(q − 32)`` with q in
    0..63 and d float16 (jit-able; K a multiple of 32).

    ``d`` is whichever of ``±max|w| / j``, j = 32 .. :data:`Q6_LOWEST_TOP`, reproduces the group best with
    ``q − 32`` inside the 6-bit range -32 .. 31: a group of a Q6_K file (d = super-block scale × int8
    scale, of either sign, and its largest weight some level) comes back to the float16 rounding of d (a
    group topped by a lower level, at a fraction of its step). Anything else gets the nearest such grid,
    far from the matrix (the converter then keeps q8). The 17 trials run ``chunk`` groups at a time (a
    151936 x 1536 head at once asked XLA for 32 GB); all 32 levels took 9.3 s on that head."""
    import jax
    import jax.numpy as jnp

    n, k = matrix.shape
    groups = matrix.astype(jnp.float32).reshape(-1, Q6_GROUP)
    count = groups.shape[0]
    padded = -(-count // chunk) * chunk
    parts = jnp.pad(groups, ((0, padded - count), (0, 0))).reshape(-1, chunk, Q6_GROUP)
    scale = jax.lax.map(_q6_scales, parts).reshape(-1)[:count]
    wide = scale.astype(jnp.float32)[:, None]
    q = (jnp.clip(jnp.round(groups / jnp.where(wide == 0, 1.0, wide)), -32, 31) + 32).astype(jnp.uint8)
    q = q.reshape(n, k // BLOCK, BLOCK)
    low = (q[:, :, : BLOCK // 2] & 15) | ((q[:, :, BLOCK // 2 :] & 15) << 4)
    tops = (q >> 4).reshape(n, k // BLOCK, 4, BLOCK // 4)  # (.., t, j): element 8t + j
    high = tops[:, :, 0] | (tops[:, :, 1] << 2) | (tops[:, :, 2] << 4) | (tops[:, :, 3] << 6)
    return low.reshape(n, k // 2), high.reshape(n, k // 4), scale.reshape(n, k // Q6_GROUP)


def q8_quantize(matrix: Any) -> tuple[Any, Any]:
    """``(N, K)`` float -> int8 values ``(N, K)`` and float16 scales ``(N, K/32)``: symmetric, one scale per
    block of 32 along K, as llama.cpp's Q8_0 (jit-able; K must be a multiple of 32)."""
    import jax.numpy as jnp

    n, k = matrix.shape
    blocks = matrix.astype(jnp.float32).reshape(n, k // BLOCK, BLOCK)
    scale = (jnp.max(jnp.abs(blocks), axis=-1) / 127.0).astype(jnp.float16)
    wide = scale.astype(jnp.float32)
    safe = jnp.where(wide == 0, 1.0, wide)
    values = jnp.clip(jnp.round(blocks / safe[:, :, None]), -127, 127).astype(jnp.int8)
    return values.reshape(n, k), scale


def q4_quantize(matrix: Any, *, grid: bool = False) -> tuple[Any, Any, Any]:
    """``(N, K)`` float -> packed uint8 ``(N, K/2)``, float16 scales and offsets ``(N, K/32)``: per block of
    32 along K, ``w ≈ d·q + m`` with q in 0..15 (llama.cpp's Q4_1 layout), jit-able (``grid`` static).

    ``m`` is the block's smallest weight and ``d`` the range over 15 (the Q4_1 fit: a block from a Q4_1
    file comes back to float16 rounding). With ``grid``, ``d`` is whichever of range/j, j in
    :data:`Q4_SPANS`, reproduces the block best. That recovers the grid of a block whose values do not
    span all 16 levels, which is what a sub-block of a Q4_K file is (d = super-block scale × 6-bit scale,
    m likewise): such a matrix comes back to the float16 rounding of d and m, as a Q4_1 file's does,
    whichever levels its blocks use (one on levels {0, 11, 14} has range/14 as its step). (The smallest
    gap between two values, tried before, missed such a block and cost 32x32 differences a block.)
    """
    import jax.numpy as jnp

    n, k = matrix.shape
    blocks = matrix.astype(jnp.float32).reshape(n, k // BLOCK, BLOCK)
    low, high = jnp.min(blocks, axis=-1), jnp.max(blocks, axis=-1)
    offset = low.astype(jnp.float16)
    base = offset.astype(jnp.float32)[:, :, None]
    scale = _best_step(blocks, base, high - low, Q4_SPANS if grid else (15,))  # the range fit first
    wide = scale.astype(jnp.float32)[:, :, None]
    q = jnp.clip(jnp.round((blocks - base) / jnp.where(wide == 0, 1.0, wide)), 0, 15).astype(jnp.uint8)
    packed = q[:, :, : BLOCK // 2] | (q[:, :, BLOCK // 2 :] << 4)
    return packed.reshape(n, k // 2), scale, offset


def _best_step(blocks: Any, base: Any, span: Any, divisors: tuple[int, ...]) -> Any:
    """Of the steps ``span / j`` for j in ``divisors`` (``span`` shaped like ``blocks`` without its last
    axis), the float16 one that reproduces each block best from ``base`` (ties keep the earlier). One
    candidate at a time (a loop, not unrolled): eight at once held eight copies of Qwen2.5-Coder-1.5B's
    151936 x 1536 embedding's temporaries and ran out of 24 GB."""
    import jax
    import jax.numpy as jnp

    steps = jnp.asarray(divisors, jnp.float32)

    def body(i: Any, state: tuple[Any, Any]) -> tuple[Any, Any]:
        scale, best_error = state
        candidate = (span / steps[i]).astype(jnp.float16)
        wide = candidate.astype(jnp.float32)[..., None]
        levels = jnp.round((blocks - base) / jnp.where(wide == 0, 1.0, wide))
        error = jnp.max(jnp.abs(jnp.clip(levels, 0, 15) * wide + base - blocks), axis=-1)
        error = jnp.where(jnp.max(levels, axis=-1) <= 15, error, jnp.inf)  # the grid must fit 4 bits
        better = error < best_error
        return jnp.where(better, candidate, scale), jnp.where(better, error, best_error)

    start = (jnp.zeros(blocks.shape[:-1], jnp.float16), jnp.full(blocks.shape[:-1], jnp.inf, jnp.float32))
    scale, _ = jax.lax.fori_loop(0, len(divisors), body, start)
    return scale
