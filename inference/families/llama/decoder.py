"""The fast engine's view of keras-hub's Llama/Llama 3/Mistral backbones (and Qwen2's, which adds
q/k/v biases): the static spec and where each weight sits in a decoder block."""

from __future__ import annotations

from typing import Any

from inference.families.base import DecoderRecipe, DecoderSpec, LayerSpec, UnsupportedModel

# our name -> (attribute path from the decoder block, einsum layout). Attributes, not variable paths:
# the paths depend on where keras built the model; the attributes are keras-hub's code.
LLAMA_LAYER: dict[str, tuple[str, str]] = {
    "attn_norm": ("_self_attention_layernorm.scale", "vector"),
    "q": ("_self_attention_layer._query_dense.kernel", "d_n_h"),
    "k": ("_self_attention_layer._key_dense.kernel", "d_n_h"),
    "v": ("_self_attention_layer._value_dense.kernel", "d_n_h"),
    "o": ("_self_attention_layer._output_dense.kernel", "n_h_d"),
    "ffn_norm": ("_feedforward_layernorm.scale", "vector"),
    "gate": ("_feedforward_gate_dense.kernel", "in_out"),
    "up": ("_feedforward_intermediate_dense.kernel", "in_out"),
    "down": ("_feedforward_output_dense.kernel", "in_out"),
}


def llama_spec(backbone: Any, config: dict[str, Any], weight_format: str, *, family: str = "llama",
               qkv_bias: bool = False) -> DecoderSpec:
    """The :class:`DecoderSpec` of a Llama-shaped backbone built from ``config``."""
    if config.get("rope_frequency_adjustment_factor") is not None:
        raise UnsupportedModel("Llama 3.1 RoPE frequency adjustment is not implemented in the fast decoder")
    heads, hidden = int(config["num_query_heads"]), int(config["hidden_dim"])
    head_dim = hidden // heads
    scaling = config.get("rope_position_scaling_factor") or config.get("rope_scaling_factor") or 1.0
    window = config.get("sliding_window")  # Mistral
    if config.get("use_sliding_window_attention"):  # Qwen2
        window = config.get("sliding_window_size")
    layer = LayerSpec(int(window) if window else None, float(config["rope_max_wavelength"]), float(scaling))
    return DecoderSpec(
        family=family, vocabulary_size=int(config["vocabulary_size"]), hidden_dim=hidden,
        num_query_heads=heads, num_kv_heads=int(config["num_key_value_heads"]), head_dim=head_dim,
        norm_eps=float(config["layer_norm_epsilon"]), layers=(layer,) * int(config["num_layers"]),
        query_scale=head_dim**-0.5, embedding_scale=1.0, norm_offset=0.0, qk_norm=False, post_norms=False,
        activation="silu", attention_soft_cap=None, final_soft_cap=None,
        weight_format=weight_format,  # type: ignore[arg-type]  # checked by decoder_spec
        qkv_bias=qkv_bias,
    )


LLAMA_DECODER = DecoderRecipe(spec=llama_spec, layer_weights=LLAMA_LAYER)
