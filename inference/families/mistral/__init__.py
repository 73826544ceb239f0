"""Mistral instruct (keras-hub presets): Llama's weight paths and decoder, an untied head, its template."""

from __future__ import annotations

from inference.families.base import DecoderRecipe, Family
from inference.families.llama.decoder import LLAMA_DECODER, llama_spec
from inference.families.llama.layout import weight_rules
from inference.families.mistral.template import MISTRAL

FAMILY = Family(
    name="mistral",
    backbones=(("MistralBackbone", "MistralCausalLM"),),
    templates=(MISTRAL,),
    weight_rules=lambda config: weight_rules(config, family="mistral"),
    decoder=DecoderRecipe(
        spec=lambda backbone, config, fmt: llama_spec(backbone, config, fmt, family="mistral"),
        layer_weights=LLAMA_DECODER.layer_weights,
    ),
)
