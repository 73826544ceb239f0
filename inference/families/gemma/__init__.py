"""Gemma 1/2 and CodeGemma (keras-hub presets only): Gemma 3's weight paths (FFN kernels half as wide)
and its chat template; no GGUF loader and no fast-decoder recipe (keras-hub's forward pass serves)."""

from __future__ import annotations

from inference.families.base import Family
from inference.families.gemma3.layout import weight_rules

FAMILY = Family(
    name="gemma",
    backbones=(("GemmaBackbone", "GemmaCausalLM"),),
    weight_rules=lambda config: weight_rules(config, family="gemma"),
)
