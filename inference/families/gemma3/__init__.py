"""Gemma 3 family: GGUF loader onto ``Gemma3Backbone``, SentencePiece tokenizer, chat template, layout
rules, the fast decoder's recipe, a tiny test config."""

from __future__ import annotations

from inference.families.base import Family, TinyConfig
from inference.families.gemma3.decoder import GEMMA3_DECODER
from inference.families.gemma3.layout import weight_rules
from inference.families.gemma3.loader import load_gemma3
from inference.families.gemma3.template import GEMMA
from inference.families.gemma3.tokenizer import SentencePieceTokenizer

_TINY_VISION = {"image_size": 16, "vision_encoder": None}

FAMILY = Family(
    name="gemma3",
    backbones=(("Gemma3Backbone", "Gemma3CausalLM"),),
    gguf_architectures=("gemma3",),
    load_gguf=lambda gguf, dtype: load_gemma3(gguf, dtype=dtype),
    load_tokenizer=SentencePieceTokenizer.from_gguf,
    templates=(GEMMA,),
    weight_rules=lambda config: weight_rules(config, family="gemma3"),
    decoder=GEMMA3_DECODER,
    kv_cache="per_layer",
    tiny=TinyConfig(
        backbone={**_TINY_VISION, "num_layers": 3, "num_query_heads": 2, "num_key_value_heads": 1,
                  "hidden_dim": 64, "intermediate_dim": 128, "head_dim": 32, "use_post_ffw_norm": True,
                  "use_post_attention_norm": True, "use_sliding_window_attention": True,
                  "sliding_window_size": 16},  # small: decoding past it exercises the local-attention mask
        bos="<bos>", eos="<eos>", kernel_scale=2.0, norm_std=3.0,
        shardings={**_TINY_VISION, "vocabulary_size": 128, "num_layers": 2, "num_query_heads": 4,
                   "num_key_value_heads": 1, "hidden_dim": 32, "intermediate_dim": 64, "head_dim": 16,
                   "use_post_ffw_norm": True, "use_post_attention_norm": True,
                   "use_sliding_window_attention": True, "sliding_window_size": 16},
    ),
)
