"""Gemma 3 GGUF files onto ``Gemma3Backbone`` (text only).

What the GGUF does not say, and how it is filled in:

- llama.cpp stores every RMS-norm weight with +1 folded in (it computes ``x * w``); keras-hub, like
  Hugging Face, computes ``x * (1 + w)``. Each norm - including the per-head query/key norms - gets
  1 subtracted. Forgetting it doubles every activation scale.
- The 5-local : 1-global layer pattern and the 10k (local) / 1M (global) RoPE bases are fixed in
  keras-hub's Gemma 3; we check the file's global base and pattern agree instead of trusting them.
- The query scale: llama.cpp uses 1/sqrt(head_dim) except for the 27B model (62 layers), which uses
  1/sqrt(hidden/heads); keras-hub's ``query_head_dim_normalize`` expresses the same choice.
- No Q/K row reordering (unlike Llama): Gemma's converter writes rotary rows as they are.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from inference.families.base import LoadedModel
from inference.families.gemma3.tokenizer import SentencePieceTokenizer
from inference.families.gguf_weights import assign, check_dtype, file_metadata, heads_first
from inference.formats.gguf_reader import GGUFError, GGUFFile

_KERAS_GLOBAL_ROPE_BASE = 1_000_000.0
_KERAS_SLIDING_PATTERN = 6  # keras-hub: layer i is local when i % 6 < 5
_GEMMA3_27B_LAYERS = 62


def gemma3_config(gguf: GGUFFile) -> dict[str, Any]:
    """``Gemma3Backbone`` keyword arguments from the file's ``gemma3.*`` metadata."""
    name = gguf.path.name
    if gguf.architecture != "gemma3":
        raise GGUFError(f"{name}: architecture {gguf.architecture!r} is not gemma3")
    layers = int(gguf.get("gemma3.block_count"))
    hidden = int(gguf.get("gemma3.embedding_length"))
    heads = int(gguf.get("gemma3.attention.head_count"))
    key_length = int(gguf.get("gemma3.attention.key_length", hidden // heads))
    value_length = int(gguf.get("gemma3.attention.value_length", key_length))
    if value_length != key_length:
        raise GGUFError(f"{name}: key length {key_length} != value length {value_length}")
    rope_base = float(gguf.get("gemma3.rope.freq_base", _KERAS_GLOBAL_ROPE_BASE))
    if rope_base != _KERAS_GLOBAL_ROPE_BASE:
        raise GGUFError(f"{name}: global RoPE base {rope_base} differs from keras-hub's fixed 1e6")
    pattern = gguf.get("gemma3.attention.sliding_window_pattern", None)
    if pattern is not None and not _matches_keras_pattern(pattern, layers):
        raise GGUFError(f"{name}: sliding-window layer pattern {pattern!r} differs from keras-hub's 5:1")
    window = gguf.get("gemma3.attention.sliding_window", None)
    return {
        "vocabulary_size": int(gguf.get("gemma3.vocab_size", len(gguf.get("tokenizer.ggml.tokens")))),
        "image_size": None,
        "num_layers": layers,
        "num_query_heads": heads,
        "num_key_value_heads": int(gguf.get("gemma3.attention.head_count_kv", heads)),
        "hidden_dim": hidden,
        "intermediate_dim": int(gguf.get("gemma3.feed_forward_length")),
        "head_dim": key_length,
        "query_head_dim_normalize": layers != _GEMMA3_27B_LAYERS,
        "use_query_key_norm": True,
        "use_post_ffw_norm": True,
        "use_post_attention_norm": True,
        "attention_logit_soft_cap": None,
        "final_logit_soft_cap": None,
        "use_sliding_window_attention": window is not None,
        "sliding_window_size": int(window) if window is not None else 4096,
        "global_rope_scaling_factor": float(gguf.get("gemma3.rope.scaling.factor", 1.0)),
        "layer_norm_epsilon": float(gguf.get("gemma3.attention.layer_norm_rms_epsilon", 1e-6)),
    }


def _matches_keras_pattern(pattern: Any, layers: int) -> bool:
    if isinstance(pattern, int):
        return pattern == _KERAS_SLIDING_PATTERN
    flags = [bool(x) for x in pattern]  # per layer: True = sliding
    return flags == [i % _KERAS_SLIDING_PATTERN < _KERAS_SLIDING_PATTERN - 1 for i in range(layers)]


def load_gemma3(gguf: GGUFFile, *, dtype: str = "float32") -> LoadedModel:
    """Build a ``Gemma3Backbone`` from ``gguf`` with every weight copied in, plus its tokenizer."""
    from keras_hub.models import Gemma3Backbone

    config = gemma3_config(gguf)
    tokenizer = SentencePieceTokenizer.from_gguf(gguf)
    backbone = Gemma3Backbone(**config, dtype=check_dtype(dtype))
    _copy_weights(backbone, gguf, config)
    return LoadedModel(
        family="gemma3",
        backbone=backbone,
        tokenizer=tokenizer,
        context_length=int(gguf.get("gemma3.context_length", 8192)),
        metadata=file_metadata(gguf, config=config, backbone=backbone, tokenizer=tokenizer, dtype=dtype),
    )


def _norm(weight: np.ndarray) -> np.ndarray:
    """llama.cpp's ``w`` -> keras-hub's ``scale`` with ``x * (1 + scale)``."""
    return weight - np.float32(1.0)


def _projection(weight: np.ndarray, *, heads: int) -> np.ndarray:
    """Q/K/V ``(heads*head_dim, hidden)`` -> keras-hub's ``(heads, hidden, head_dim)``."""
    return heads_first(weight, heads=heads).transpose(0, 2, 1)


def _copy_weights(backbone: Any, gguf: GGUFFile, config: dict[str, Any]) -> None:
    heads, kv_heads = config["num_query_heads"], config["num_key_value_heads"]
    assign(
        backbone.get_layer("token_embedding").embeddings,
        gguf.tensor("token_embd.weight"),
        tensor="token_embd.weight",
    )
    for i in range(config["num_layers"]):
        block = backbone.get_layer(f"decoder_block_{i}")
        attention = block.attention

        def put(variable: Any, name: str, convert: Any, *, i: int = i) -> None:
            key = f"blk.{i}.{name}.weight"
            assign(variable, convert(gguf.tensor(key)), tensor=key)

        put(block.pre_attention_norm.scale, "attn_norm", _norm)
        put(block.post_attention_norm.scale, "post_attention_norm", _norm)
        put(block.pre_ffw_norm.scale, "ffn_norm", _norm)
        put(block.post_ffw_norm.scale, "post_ffw_norm", _norm)
        put(attention.query_norm.scale, "attn_q_norm", _norm)
        put(attention.key_norm.scale, "attn_k_norm", _norm)
        # (heads*head_dim, hidden) -> (heads, hidden, head_dim)
        put(attention.query_dense.kernel, "attn_q", lambda w: _projection(w, heads=heads))
        put(attention.key_dense.kernel, "attn_k", lambda w: _projection(w, heads=kv_heads))
        put(attention.value_dense.kernel, "attn_v", lambda w: _projection(w, heads=kv_heads))
        # (hidden, heads*head_dim) -> (heads, head_dim, hidden)
        put(attention.output_dense.kernel, "attn_output", lambda w: heads_first(w.T, heads=heads))
        put(block.gating_ffw.kernel, "ffn_gate", lambda w: w.T)
        put(block.gating_ffw_2.kernel, "ffn_up", lambda w: w.T)
        put(block.ffw_linear.kernel, "ffn_down", lambda w: w.T)
    norm = backbone.get_layer("final_normalization")
    assign(norm.scale, _norm(gguf.tensor("output_norm.weight")), tensor="output_norm.weight")
