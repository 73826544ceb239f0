"""Which Gemma 3 weights are split over the ``model`` mesh axis, and on which dimension.

keras-hub's ``Gemma3Backbone`` has no layout map (and its Gemma map splits the head dimension, which
Gemma 3 270M's 4 query / 1 key-value heads cannot give 8 devices). Attention kernels are stored
(heads, hidden, head_dim): split the heads when the axis divides them, else the hidden size (640),
then the head size (256). The MLP splits its FFN dimension, the embedding its vocabulary (262144).
``GemmaBackbone`` (Gemma 1/2) has the same variable paths; its FFN kernels are ``intermediate_dim // 2``
wide, so ``family="gemma"`` covers it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inference.families.base import WeightRule, weight_rule

_BLOCK = r"decoder_block_\d+"


def weight_rules(config: Mapping[str, Any], *, family: str = "gemma3") -> list[WeightRule]:
    """The large weights of a Gemma-family backbone built from ``config`` (``backbone.get_config()``)."""
    vocab = int(config["vocabulary_size"])
    hidden = int(config["hidden_dim"])
    heads = int(config["num_query_heads"])
    kv_heads = int(config["num_key_value_heads"])
    head_dim = int(config["head_dim"])
    ffn = int(config["intermediate_dim"])
    if family == "gemma":
        ffn //= 2  # GemmaBackbone halves it for its two gating kernels
    return [
        weight_rule("token embedding", "token_embedding/embeddings",
                    [("vocabulary_size", vocab), ("hidden_dim", hidden)], prefer=["vocabulary_size"]),
        weight_rule("query kernel", rf"{_BLOCK}/attention/query/kernel",
                    [("num_query_heads", heads), ("hidden_dim", hidden), ("head_dim", head_dim)],
                    prefer=["num_query_heads", "hidden_dim"]),
        weight_rule("key/value kernels", rf"{_BLOCK}/attention/(key|value)/kernel",
                    [("num_key_value_heads", kv_heads), ("hidden_dim", hidden), ("head_dim", head_dim)],
                    prefer=["num_key_value_heads", "hidden_dim"]),
        weight_rule("attention output kernel", rf"{_BLOCK}/attention/attention_output/kernel",
                    [("num_query_heads", heads), ("head_dim", head_dim), ("hidden_dim", hidden)],
                    prefer=["num_query_heads", "hidden_dim"]),
        weight_rule("MLP gating kernels", rf"{_BLOCK}/ffw_gating(_2)?/kernel",
                    [("hidden_dim", hidden), ("intermediate_dim", ffn)], prefer=["intermediate_dim"]),
        weight_rule("MLP output kernel", rf"{_BLOCK}/ffw_linear/kernel",
                    [("intermediate_dim", ffn), ("hidden_dim", hidden)], prefer=["intermediate_dim"]),
    ]
