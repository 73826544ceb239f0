"""Which Llama weights are split over the ``model`` mesh axis, and on which dimension.

Covers keras-hub's ``LlamaBackbone``/``Llama3Backbone`` (SmolLM2) and ``MistralBackbone``, which use the
same variable paths. The preference order follows Megatron-style tensor parallelism: attention on the
head dimension and the MLP on its FFN dimension, so each device holds whole heads and whole FFN columns.
When the axis does not divide the preferred size (SmolLM2: 9 query / 3 key-value heads on 8 devices),
the next dimension is used (the hidden size, 576) and XLA inserts the reduction; when none divides,
:func:`inference.sharding.plan_layout` replicates the weight and logs why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inference.families.base import WeightRule, weight_rule

_LAYER = r"transformer_layer_\d+"


def weight_rules(config: Mapping[str, Any], *, family: str = "llama") -> list[WeightRule]:
    """The large weights of a Llama-family backbone built from ``config`` (``backbone.get_config()``)."""
    vocab = int(config["vocabulary_size"])
    hidden = int(config["hidden_dim"])
    heads = int(config["num_query_heads"])
    kv_heads = int(config["num_key_value_heads"])
    ffn = int(config["intermediate_dim"])
    head_dim = int(config.get("head_dim") or hidden // heads)  # Mistral may set it; Llama derives it
    rules = [
        weight_rule("token embedding", "token_embedding/embeddings",
                    [("vocabulary_size", vocab), ("hidden_dim", hidden)], prefer=["vocabulary_size"]),
        weight_rule("query kernel", rf"{_LAYER}/self_attention/query/kernel",
                    [("hidden_dim", hidden), ("num_query_heads", heads), ("head_dim", head_dim)],
                    prefer=["num_query_heads", "hidden_dim"]),
        weight_rule("key/value kernels", rf"{_LAYER}/self_attention/(key|value)/kernel",
                    [("hidden_dim", hidden), ("num_key_value_heads", kv_heads), ("head_dim", head_dim)],
                    prefer=["num_key_value_heads", "hidden_dim"]),
        weight_rule("attention output kernel", rf"{_LAYER}/self_attention/attention_output/kernel",
                    [("num_query_heads", heads), ("head_dim", head_dim), ("hidden_dim", hidden)],
                    prefer=["num_query_heads", "hidden_dim"]),
        weight_rule("MLP gate/up kernels", rf"{_LAYER}/feedforward_(gate|intermediate)_dense/kernel",
                    [("hidden_dim", hidden), ("intermediate_dim", ffn)], prefer=["intermediate_dim"]),
        weight_rule("MLP down kernel", rf"{_LAYER}/feedforward_output_dense/kernel",
                    [("intermediate_dim", ffn), ("hidden_dim", hidden)], prefer=["intermediate_dim"]),
    ]
    untied = family == "mistral" or not config.get("tie_word_embeddings", False)
    if untied:  # an untied output projection is as large as the embedding
        rules.append(weight_rule("output embedding", "token_embedding/reverse_embeddings",
                                 [("hidden_dim", hidden), ("vocabulary_size", vocab)],
                                 prefer=["vocabulary_size"]))
    return rules
