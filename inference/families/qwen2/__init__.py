"""Qwen2 family (Qwen2, Qwen2.5, Qwen2.5-Coder): GGUF loader onto keras-hub's ``QwenBackbone`` (q/k/v
biases), byte-level BPE tokenizer with the ``qwen2`` pre-tokenizer, the file's own chat template (ChatML
by hand where a file has none), Llama's layout rules and fast-decoder recipe plus the biases, a tiny
test config."""

from __future__ import annotations

from inference.families.base import DecoderRecipe, Family, TinyConfig
from inference.families.llama.decoder import LLAMA_LAYER, llama_spec
from inference.families.llama.layout import weight_rules
from inference.families.qwen2.loader import load_qwen2
from inference.families.qwen2.tokenizer import qwen2_tokenizer

QWEN2_LAYER = {
    **LLAMA_LAYER,
    "q_bias": ("_self_attention_layer._query_dense.bias", "n_h"),
    "k_bias": ("_self_attention_layer._key_dense.bias", "n_h"),
    "v_bias": ("_self_attention_layer._value_dense.bias", "n_h"),
}

FAMILY = Family(
    name="qwen2",
    aliases=("qwen",),
    backbones=(("QwenBackbone", "QwenCausalLM"),),
    gguf_architectures=("qwen2",),
    load_gguf=lambda gguf, dtype: load_qwen2(gguf, dtype=dtype),
    load_tokenizer=qwen2_tokenizer,
    weight_rules=lambda config: weight_rules(config, family="qwen2"),
    decoder=DecoderRecipe(
        spec=lambda backbone, config, fmt: llama_spec(backbone, config, fmt, family="qwen2", qkv_bias=True),
        layer_weights=QWEN2_LAYER,
    ),
    tiny=TinyConfig(
        # Qwen2.5-Coder-0.5B's ratio: 7 query heads per key-value head; RoPE base 1e6; untied head.
        backbone={"num_layers": 2, "num_query_heads": 7, "num_key_value_heads": 1, "hidden_dim": 224,
                  "intermediate_dim": 128, "rope_max_wavelength": 1_000_000, "layer_norm_epsilon": 1e-6,
                  "tie_word_embeddings": False},
        bos=None, eos="<|im_end|>", kernel_scale=8.0,
        shardings={"vocabulary_size": 96, "num_layers": 2, "num_query_heads": 7, "num_key_value_heads": 1,
                   "hidden_dim": 56, "intermediate_dim": 64, "tie_word_embeddings": False},
    ),
)
