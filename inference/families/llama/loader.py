"""Llama-architecture GGUF files (SmolLM2, Llama 2/3, Mistral in GGUF form) onto ``Llama3Backbone``.

Two things differ from a plain transpose of the Hugging Face weights:

- llama.cpp's converter reorders the rows of the Q and K projections, per head, from the
  "rotate halves" rotary layout of Hugging Face to the interleaved one llama.cpp computes with.
  keras-hub rotates halves, so :func:`unpermute_rotary` undoes it (per head count: 9 for SmolLM2's
  queries, 3 for its keys). Without it the model still runs and emits fluent-looking garbage.
- A file without ``output.weight`` ties the output projection to the token embedding.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from inference.families.base import LoadedModel
from inference.families.gguf_weights import assign, check_dtype, file_metadata
from inference.families.llama.tokenizer import ByteLevelBPETokenizer
from inference.formats.gguf_reader import GGUFError, GGUFFile


def unpermute_rotary(weight: np.ndarray, *, heads: int) -> np.ndarray:
    """Undo llama.cpp's Q/K row permutation: rows seen as (heads, head_dim/2, 2) -> (heads, 2, head_dim/2)."""
    rows = weight.shape[0]
    if rows % (2 * heads):
        raise GGUFError(f"{rows} rows cannot be {heads} rotary heads")
    half = rows // heads // 2
    return weight.reshape(heads, half, 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def llama_config(gguf: GGUFFile) -> dict[str, Any]:
    """``Llama3Backbone`` keyword arguments from the file's ``llama.*`` metadata."""
    arch = gguf.architecture
    hidden = int(gguf.get(f"{arch}.embedding_length"))
    heads = int(gguf.get(f"{arch}.attention.head_count"))
    rope_dims = gguf.get(f"{arch}.rope.dimension_count", None)
    if rope_dims is not None and int(rope_dims) != hidden // heads:
        raise GGUFError(f"{gguf.path.name}: partial rotary embeddings ({rope_dims} dims) are not supported")
    scaling = gguf.get(f"{arch}.rope.scaling.type", "none")
    if scaling not in ("none", None):
        raise GGUFError(f"{gguf.path.name}: rope scaling {scaling!r} is not supported by this loader")
    vocabulary = gguf.get(f"{arch}.vocab_size", None)
    if vocabulary is None:
        vocabulary = len(gguf.get("tokenizer.ggml.tokens"))
    return {
        "vocabulary_size": int(vocabulary),
        "num_layers": int(gguf.get(f"{arch}.block_count")),
        "num_query_heads": heads,
        "num_key_value_heads": int(gguf.get(f"{arch}.attention.head_count_kv", heads)),
        "hidden_dim": hidden,
        "intermediate_dim": int(gguf.get(f"{arch}.feed_forward_length")),
        "rope_max_wavelength": float(gguf.get(f"{arch}.rope.freq_base", 10_000.0)),
        "layer_norm_epsilon": float(gguf.get(f"{arch}.attention.layer_norm_rms_epsilon")),
        "tie_word_embeddings": not gguf.has_tensor("output.weight"),
    }


def load_llama(gguf: GGUFFile, *, dtype: str = "float32") -> LoadedModel:
    """Build a ``Llama3Backbone`` from ``gguf`` with every weight copied in, plus its tokenizer."""
    from keras_hub.models import Llama3Backbone

    config = llama_config(gguf)
    tokenizer = ByteLevelBPETokenizer.from_gguf(gguf)
    backbone = Llama3Backbone(**config, dtype=check_dtype(dtype))
    copy_weights(backbone, gguf, config)
    arch = gguf.architecture
    return LoadedModel(
        family="llama",
        backbone=backbone,
        tokenizer=tokenizer,
        context_length=int(gguf.get(f"{arch}.context_length", 2048)),
        metadata=file_metadata(gguf, config=config, backbone=backbone, tokenizer=tokenizer, dtype=dtype),
    )


def copy_weights(backbone: Any, gguf: GGUFFile, config: dict[str, Any], *, reorder_rotary: bool = True,
                 qkv_bias: bool = False) -> None:
    """Every tensor of a Llama-shaped file into a Llama-shaped keras-hub backbone (``QwenBackbone`` too).

    ``reorder_rotary``: undo llama.cpp's Q/K row permutation (Llama; not Qwen2). ``qkv_bias``: copy the
    q/k/v biases (``blk.N.attn_q.bias`` ... into keras-hub's ``(heads, head_dim)``; Qwen2).
    """
    heads, kv_heads = config["num_query_heads"], config["num_key_value_heads"]
    hidden = config["hidden_dim"]
    head_dim = hidden // heads
    embedding = backbone.get_layer("token_embedding")
    assign(embedding.embeddings, gguf.tensor("token_embd.weight"), tensor="token_embd.weight")
    if not config["tie_word_embeddings"]:
        assign(embedding.reverse_embeddings, gguf.tensor("output.weight").T, tensor="output.weight")
    for i in range(config["num_layers"]):
        layer = backbone.get_layer(f"transformer_layer_{i}")
        attention = layer._self_attention_layer

        def put(variable: Any, name: str, convert: Any, *, i: int = i, kind: str = "weight") -> None:
            key = f"blk.{i}.{name}.{kind}"
            assign(variable, convert(gguf.tensor(key)), tensor=key)

        put(layer._self_attention_layernorm.scale, "attn_norm", lambda w: w)
        put(layer._feedforward_layernorm.scale, "ffn_norm", lambda w: w)
        projections = ((attention._query_dense, "attn_q", heads, reorder_rotary),
                       (attention._key_dense, "attn_k", kv_heads, reorder_rotary),
                       (attention._value_dense, "attn_v", kv_heads, False))
        for dense, name, n, reorder in projections:
            # (n*head_dim, hidden) -> (hidden, n, head_dim); a bias (n*head_dim,) -> (n, head_dim)
            def kernel(w: Any, n: int = n, reorder: bool = reorder) -> Any:
                return (unpermute_rotary(w, heads=n) if reorder else w).T.reshape(hidden, n, head_dim)

            put(dense.kernel, name, kernel)
            if qkv_bias:
                put(dense.bias, name, lambda b, n=n: b.reshape(n, head_dim), kind="bias")
        # (hidden, heads*head_dim) -> (heads, head_dim, hidden)
        put(attention._output_dense.kernel, "attn_output", lambda w: w.T.reshape(heads, head_dim, hidden))
        put(layer._feedforward_gate_dense.kernel, "ffn_gate", lambda w: w.T)
        put(layer._feedforward_intermediate_dense.kernel, "ffn_up", lambda w: w.T)
        put(layer._feedforward_output_dense.kernel, "ffn_down", lambda w: w.T)
    norm = backbone.get_layer("sequence_output_layernorm")
    assign(norm.scale, gguf.tensor("output_norm.weight"), tensor="output_norm.weight")
