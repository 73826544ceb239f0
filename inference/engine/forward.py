"""A decoder-only transformer forward pass in plain JAX, with a KV cache whose rows move independently.

keras-hub's ``call_with_cache`` writes every row of a batch at one shared cache index, which forces a
batch into lockstep. Here each row ``b`` has its own write index ``index[b]``: its new keys/values go
to slots ``index[b] .. index[b]+T-1`` of its own cache row (one in-place ``dynamic_update_slice`` per
row, not a scatter), its tokens get RoPE positions from the same index, and its queries see exactly the
slots ``<= position`` (and inside the sliding window on local layers). A row therefore computes what it
would compute alone, whatever the other rows are doing; stale slots past a row's length are masked.

Everything here is a pure function of (spec, params, cache, inputs): ``jax.jit`` it with the spec
static. Matrices may be float32, bfloat16, int8 or q8/q4 blocks (:mod:`inference.engine.weights`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import inference.engine.kernels as kernels
from inference.families.base import DecoderSpec, LayerSpec
from inference.formats import block_formats
from inference.formats.matrices import (
    Q4Blocks,
    Q6Blocks,
    Q8Blocks,
    QuantizedMatrix,
    StackedBlocks,
)

Cache = tuple[Any, Any]  # (keys, values), each (layers, batch, kv_heads, slots, head_dim)


def empty_cache(spec: DecoderSpec, *, batch: int, slots: int) -> Cache:
    """Zeros of ``spec.kv_dtype``; whatever it is, attention computes in float32. Every layer's keys are
    one array (and values another): a step's program takes and gives back two cache arrays, not two a
    layer (each array an argument costs the jitted call's dispatch time, donated ones the most)."""
    import jax.numpy as jnp

    shape = (spec.num_layers, batch, spec.num_kv_heads, slots, spec.head_dim)
    return jnp.zeros(shape, spec.kv_dtype), jnp.zeros(shape, spec.kv_dtype)


def matmul(x: Any, w: Any, native: bool = False, rows: Any = None, a8: bool = False) -> Any:
    """``x @ w`` for x ``(..., in)`` float32 and a float32 / bfloat16 / int8 ``(in, out)`` matrix or q8/q4/q6
    ``(out, in)`` blocks or a stack of them (``native``: through the CPU kernels, which skip the flattened
    rows from ``rows`` on: padding whose results nobody reads; ``a8``: blocks times activations rounded to
    int8)."""
    import jax
    import jax.numpy as jnp

    if isinstance(w, StackedBlocks):  # output rows in parts of different formats: products side by side
        return jnp.concatenate([matmul(x, part, native, rows, a8) for part in w.parts], axis=-1)
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1])
    if isinstance(w, Q8Blocks):
        y = (kernels.q8_matmul(x2, *w, rows=rows, int8_activations=a8) if native
             else block_formats.q8_matmul_reference(x2, *w, int8_activations=a8))
    elif isinstance(w, Q4Blocks):
        y = (kernels.q4_matmul(x2, *w, rows=rows, int8_activations=a8) if native
             else block_formats.q4_matmul_reference(x2, *w, int8_activations=a8))
    elif isinstance(w, Q6Blocks):  # never with a8: the converter keeps q8 for the 8-bit-activation formats
        y = kernels.q6_matmul(x2, *w, rows=rows) if native else block_formats.q6_matmul_reference(x2, *w)
    elif isinstance(w, QuantizedMatrix):
        # Dynamic per-row activation scale (keras' int8 scheme): int8 x int8 -> int32, rescaled.
        x_scale = jnp.max(jnp.abs(x2), axis=-1, keepdims=True) / 127.0
        x_scale = jnp.where(x_scale == 0, 1.0, x_scale)
        xq = jnp.clip(jnp.round(x2 / x_scale), -127, 127).astype("int8")
        acc = jax.lax.dot(xq, w.values, preferred_element_type=jnp.int32)
        y = acc.astype("float32") * x_scale * w.scale
    elif w.dtype == jnp.bfloat16:
        y = jnp.dot(x2.astype(jnp.bfloat16), w, preferred_element_type=jnp.float32)
    else:
        y = jnp.dot(x2, w)
    return y.reshape(*lead, y.shape[-1])


# A block-format embedding table's rows, back to float32
_DEQUANTIZE: dict[type, Callable[..., Any]] = {
    Q8Blocks: block_formats.q8_dequantize, Q4Blocks: block_formats.q4_dequantize,
    Q6Blocks: block_formats.q6_dequantize,
}


def embed(spec: DecoderSpec, table: Any, tokens: Any) -> Any:
    import jax.numpy as jnp

    if isinstance(table, QuantizedMatrix):
        x = table.values[tokens].astype("float32") * table.scale[tokens][..., None]
    elif isinstance(table, Q8Blocks | Q4Blocks | Q6Blocks):
        x = _DEQUANTIZE[type(table)](*(part[tokens.reshape(-1)] for part in table)).reshape(*tokens.shape, -1)
    else:
        x = table[tokens].astype("float32")
    return x * jnp.float32(spec.embedding_scale) if spec.embedding_scale != 1.0 else x


def output_logits(spec: DecoderSpec, params: dict[str, Any], x: Any) -> Any:
    """``x (B, d)`` -> float32 ``(B, vocab)``: the tied embedding (or the untied head), soft-capped."""
    import jax
    import jax.numpy as jnp

    if "head" in params:
        return _soft_cap(spec, matmul(x, params["head"], spec.native_kernels, a8=spec.int8_activations))
    table = params["embedding"]
    if isinstance(table, (Q8Blocks, Q4Blocks, Q6Blocks)):  # already (vocab, d): what the kernels multiply
        return _soft_cap(spec, matmul(x, table, spec.native_kernels, a8=spec.int8_activations))

    contract = (((1,), (1,)), ((), ()))
    if isinstance(table, QuantizedMatrix):
        x_scale = jnp.max(jnp.abs(x), axis=-1, keepdims=True) / 127.0
        x_scale = jnp.where(x_scale == 0, 1.0, x_scale)
        xq = jnp.clip(jnp.round(x / x_scale), -127, 127).astype("int8")
        acc = jax.lax.dot_general(xq, table.values, contract, preferred_element_type=jnp.int32)
        logits = acc.astype("float32") * x_scale * table.scale
    else:
        logits = jax.lax.dot_general(x.astype(table.dtype), table, contract,
                                     preferred_element_type=jnp.float32)
    return _soft_cap(spec, logits)


def _soft_cap(spec: DecoderSpec, logits: Any) -> Any:
    import jax.numpy as jnp

    if spec.final_soft_cap:
        return jnp.tanh(logits / spec.final_soft_cap) * spec.final_soft_cap
    return logits


def rms_norm(spec: DecoderSpec, x: Any, scale: Any) -> Any:
    import jax
    import jax.numpy as jnp

    variance = jnp.mean(x * x, axis=-1, keepdims=True)
    return x * jax.lax.rsqrt(variance + spec.norm_eps) * (scale + spec.norm_offset)


def rope_angles(positions: Any, layer: LayerSpec, head_dim: int, slots: int) -> tuple[Any, Any]:
    """cos and sin ``(B, T, 1, hd/2)`` of the rotary angles at ``positions (B, T)`` (each below ``slots``),
    looked up in a table of every slot's, computed once at trace time: XLA fused sin and cos into each of
    their uses, one of each for every rotated element of every layer (2.4-2.6 % of SmolLM2's 100-token
    prefill in ``sincosf``), and an optimization barrier did not keep them apart."""
    import jax.numpy as jnp

    half = head_dim // 2
    inverse = 1.0 / (layer.rope_wavelength ** (np.arange(0, half, dtype=np.float32) * 2 / head_dim))
    steps = np.arange(slots, dtype=np.float32) / np.float32(layer.rope_scaling)
    angles = steps[:, None] * inverse  # (slots, half), float32 as the table's former per-call computation
    cos, sin = jnp.asarray(np.cos(angles)), jnp.asarray(np.sin(angles))
    return cos[positions][:, :, None, :], sin[positions][:, :, None, :]


def rope(x: Any, angles: tuple[Any, Any]) -> Any:
    """Rotary embedding as keras-hub applies it (rotate halves); x ``(B, T, heads, hd)``, ``angles`` from
    :func:`rope_angles`."""
    import jax.numpy as jnp

    cos, sin = angles
    half = x.shape[-1] // 2
    first, second = x[..., :half], x[..., half:]
    return jnp.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)


def write_rows(cache: Any, update: Any, index: Any, layer: int | None = None) -> Any:
    """Write ``update (B, kv, T, hd)`` into ``cache (B, kv, S, hd)`` at each row's own slot ``index[b]``
    (``layer``: into layer ``layer`` of a stacked ``(layers, B, kv, S, hd)`` cache, in place)."""
    import jax

    update = update.astype(cache.dtype)
    for b in range(update.shape[0]):
        if layer is None:
            cache = jax.lax.dynamic_update_slice(cache, update[b : b + 1], (b, 0, index[b], 0))
        else:
            cache = jax.lax.dynamic_update_slice(cache, update[None, b : b + 1], (layer, b, 0, index[b], 0))
    return cache


def attention_mask(positions: Any, slots: int, window: int | None) -> Any:
    """``(B, T, S)``: slot s is visible to the query at ``positions[b, t]`` (causal, optional window)."""
    import jax.numpy as jnp

    slot = jnp.arange(slots)[None, None, :]
    query = positions[:, :, None]
    visible = slot <= query
    if window is not None:
        visible &= slot > query - window
    return visible


def attend(spec: DecoderSpec, q: Any, keys: Any, values: Any, mask: Any) -> Any:
    """Grouped-query attention of q ``(B, T, H, hd)`` over a cache row ``(B, kv, S, hd)``."""
    import jax
    import jax.numpy as jnp

    batch, length = q.shape[0], q.shape[1]
    keys, values = keys.astype("float32"), values.astype("float32")  # a float16 cache computes as float32
    groups = spec.num_query_heads // spec.num_kv_heads
    q = q.reshape(batch, length, spec.num_kv_heads, groups, spec.head_dim) * spec.query_scale
    if length == 1:  # decode: no query-time axis, so XLA-CPU batches the small products well (~1.5x)
        scores = jnp.einsum("bkgh,bksh->bkgs", q[:, 0], keys)[:, :, :, None, :]
    else:
        scores = jnp.einsum("btkgh,bksh->bkgts", q, keys)
    if spec.attention_soft_cap:
        scores = jnp.tanh(scores / spec.attention_soft_cap) * spec.attention_soft_cap
    scores = jnp.where(mask[:, None, None], scores, -1e30)
    weights = jax.nn.softmax(scores, axis=-1)
    if length == 1:
        out = jnp.einsum("bkgs,bksh->bkgh", weights[:, :, :, 0], values)[:, None]
    else:
        out = jnp.einsum("bkgts,bksh->btkgh", weights, values)
    return out.reshape(batch, length, spec.num_query_heads * spec.head_dim)


def forward(
    spec: DecoderSpec, params: dict[str, Any], cache: Cache, tokens: Any, index: Any, *, valid: Any = None
) -> tuple[Any, Cache]:
    """Run ``tokens (B, T)`` written from slot ``index (B,)`` of each row: hidden states and the new cache.

    ``valid`` (one prompt, B = 1): only its first ``valid`` tokens are real; the native kernels skip the
    padding after them (its hidden states and cache slots are then meaningless, and masked as ever)."""
    import jax
    import jax.numpy as jnp

    batch, length = tokens.shape
    positions = index[:, None] + jnp.arange(length, dtype=index.dtype)[None, :]
    keys, values = cache
    slots = keys.shape[3]
    x = embed(spec, params["embedding"], tokens)
    masks: dict[int | None, Any] = {}
    rotations: dict[tuple[float, float], tuple[Any, Any]] = {}
    for layer, (layer_spec, weights) in enumerate(zip(spec.layers, params["layers"], strict=True)):
        if layer_spec.sliding_window not in masks and not spec.native_kernels:
            masks[layer_spec.sliding_window] = attention_mask(positions, slots, layer_spec.sliding_window)
        h = rms_norm(spec, x, weights["attn_norm"])
        qkv = matmul(h, weights["qkv"], spec.native_kernels, valid, spec.int8_activations)
        if spec.qkv_bias:
            qkv = qkv + weights["qkv_bias"]
        q_end = spec.num_query_heads * spec.head_dim
        k_end = q_end + spec.num_kv_heads * spec.head_dim
        q = qkv[..., :q_end].reshape(batch, length, spec.num_query_heads, spec.head_dim)
        k = qkv[..., q_end:k_end].reshape(batch, length, spec.num_kv_heads, spec.head_dim)
        v = qkv[..., k_end:].reshape(batch, length, spec.num_kv_heads, spec.head_dim)
        if spec.qk_norm:
            q = rms_norm(spec, q, weights["q_norm"])
            k = rms_norm(spec, k, weights["k_norm"])
        kind = (layer_spec.rope_wavelength, layer_spec.rope_scaling)
        if kind not in rotations:
            rotations[kind] = rope_angles(positions, layer_spec, spec.head_dim, max(slots, length))
        q, k = rope(q, rotations[kind]), rope(k, rotations[kind])
        if spec.native_kernels:  # cache write + attention in one native call
            heads, keys, values = kernels.attention(
                q, k, v, index, keys, values, layer=layer, valid=valid, window=layer_spec.sliding_window,
                scale=spec.query_scale, soft_cap=spec.attention_soft_cap)
            heads = heads.reshape(batch, length, -1)
        else:
            keys = write_rows(keys, jnp.swapaxes(k, 1, 2), index, layer)
            values = write_rows(values, jnp.swapaxes(v, 1, 2), index, layer)
            heads = attend(spec, q, keys[layer], values[layer], masks[layer_spec.sliding_window])
        attended = matmul(heads, weights["o"], spec.native_kernels, valid, spec.int8_activations)
        if spec.post_norms:
            attended = rms_norm(spec, attended, weights["post_attn_norm"])
        x = x + attended
        h = rms_norm(spec, x, weights["ffn_norm"])
        gate_up = matmul(h, weights["gate_up"], spec.native_kernels, valid, spec.int8_activations)
        gate, up = jnp.split(gate_up, 2, axis=-1)
        gate = jax.nn.silu(gate) if spec.activation == "silu" else jax.nn.gelu(gate, approximate=True)
        ffn = matmul(gate * up, weights["down"], spec.native_kernels, valid, spec.int8_activations)
        if spec.post_norms:
            ffn = rms_norm(spec, ffn, weights["post_ffn_norm"])
        x = x + ffn
    return rms_norm(spec, x, params["final_norm"]), (keys, values)
