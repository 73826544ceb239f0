"""The fast engine's view of keras-hub's ``Gemma3Backbone`` (text only): per-layer sliding windows and
RoPE bases, query/key norms, post-norms, and where each weight sits in a decoder block."""

from __future__ import annotations

from typing import Any

from inference.families.base import DecoderRecipe, DecoderSpec, LayerSpec, UnsupportedModel

GEMMA3_LAYER: dict[str, tuple[str, str]] = {
    "attn_norm": ("pre_attention_norm.scale", "vector"),
    "post_attn_norm": ("post_attention_norm.scale", "vector"),
    "q": ("attention.query_dense.kernel", "n_d_h"),
    "k": ("attention.key_dense.kernel", "n_d_h"),
    "v": ("attention.value_dense.kernel", "n_d_h"),
    "q_norm": ("attention.query_norm.scale", "vector"),
    "k_norm": ("attention.key_norm.scale", "vector"),
    "o": ("attention.output_dense.kernel", "n_h_d"),
    "ffn_norm": ("pre_ffw_norm.scale", "vector"),
    "post_ffn_norm": ("post_ffw_norm.scale", "vector"),
    "gate": ("gating_ffw.kernel", "in_out"),
    "up": ("gating_ffw_2.kernel", "in_out"),
    "down": ("ffw_linear.kernel", "in_out"),
}


def gemma3_spec(backbone: Any, config: dict[str, Any], weight_format: str) -> DecoderSpec:
    if config.get("vision_encoder") is not None or config.get("use_bidirectional_attention"):
        raise UnsupportedModel("the fast decoder runs text-only, causal Gemma 3")
    layers = []
    for block in backbone.transformer_layers:
        attention = block.attention
        window = int(attention.sliding_window_size) if attention.use_sliding_window_attention else None
        rope = float(attention.rope_wavelength), float(attention.rope_scaling_factor)
        layers.append(LayerSpec(window, *rope))
    hidden, heads = int(config["hidden_dim"]), int(config["num_query_heads"])
    head_dim = int(config["head_dim"])
    query_scale = head_dim**-0.5 if config["query_head_dim_normalize"] else (hidden // heads) ** -0.5
    soft_cap = config.get("attention_logit_soft_cap")
    final_cap = config.get("final_logit_soft_cap")
    return DecoderSpec(
        family="gemma3", vocabulary_size=int(config["vocabulary_size"]), hidden_dim=hidden,
        num_query_heads=heads, num_kv_heads=int(config["num_key_value_heads"]), head_dim=head_dim,
        norm_eps=float(config["layer_norm_epsilon"]), layers=tuple(layers), query_scale=float(query_scale),
        embedding_scale=float(hidden) ** 0.5, norm_offset=1.0, qk_norm=bool(config["use_query_key_norm"]),
        post_norms=bool(config["use_post_attention_norm"]),
        activation="gelu_tanh", attention_soft_cap=float(soft_cap) if soft_cap else None,
        final_soft_cap=float(final_cap) if final_cap else None,
        weight_format=weight_format,  # type: ignore[arg-type]  # checked by decoder_spec
    )


GEMMA3_DECODER = DecoderRecipe(
    spec=gemma3_spec, layer_weights=GEMMA3_LAYER,
    optional=("q_norm", "k_norm", "post_attn_norm", "post_ffn_norm"),  # per Gemma 3's config
)
