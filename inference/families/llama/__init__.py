"""Llama family (SmolLM2, Llama 3, and GGUF files of the same architecture): loader, tokenizer, templates
(ChatML, Llama 3, Vicuna), layout rules, the fast decoder's recipe, a tiny test config."""

from __future__ import annotations

from inference.families.base import Family, TinyConfig
from inference.families.llama.decoder import LLAMA_DECODER
from inference.families.llama.layout import weight_rules
from inference.families.llama.loader import load_llama
from inference.families.llama.template import CHATML, LLAMA3
from inference.families.llama.tokenizer import ByteLevelBPETokenizer
from inference.families.llama.vicuna import VICUNA

FAMILY = Family(
    name="llama",
    aliases=("llama3",),
    backbones=(("Llama3Backbone", "Llama3CausalLM"), ("LlamaBackbone", "LlamaCausalLM")),
    gguf_architectures=("llama",),  # Mistral GGUF files say "llama" and load as such
    load_gguf=lambda gguf, dtype: load_llama(gguf, dtype=dtype),
    load_tokenizer=ByteLevelBPETokenizer.from_gguf,
    templates=(CHATML, LLAMA3, VICUNA),
    weight_rules=lambda config: weight_rules(config, family="llama"),
    decoder=LLAMA_DECODER,
    tiny=TinyConfig(
        backbone={"num_layers": 2, "num_query_heads": 4, "num_key_value_heads": 2, "hidden_dim": 64,
                  "intermediate_dim": 128, "rope_max_wavelength": 10_000, "tie_word_embeddings": True},
        bos="<|im_start|>", eos="<|im_end|>", kernel_scale=8.0,
        shardings={"vocabulary_size": 96, "num_layers": 2, "num_query_heads": 3, "num_key_value_heads": 1,
                   "hidden_dim": 24, "intermediate_dim": 64, "tie_word_embeddings": True},
    ),
)
