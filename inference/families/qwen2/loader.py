"""Qwen2-architecture GGUF files (Qwen2 / Qwen2.5, Qwen2.5-Coder) onto keras-hub's ``QwenBackbone``.

What differs from the Llama loader:

- q/k/v projections carry biases (``blk.N.attn_q.bias`` ...), one per output: reshaped to keras-hub's
  ``(heads, head_dim)``;
- no Q/K row reordering: llama.cpp runs Qwen2 with NEOX-style (rotate-halves) RoPE, which is what
  keras-hub computes, so the converter writes the rows as Hugging Face has them;
- RoPE base 1e6 and RMS eps 1e-6 come from the file; the head is untied when ``output.weight`` exists
  (Qwen2.5-Coder-0.5B's file has one although the Hugging Face model ties it).
"""

from __future__ import annotations

from typing import Any

from inference.families.base import LoadedModel
from inference.families.gguf_weights import check_dtype, file_metadata
from inference.families.llama.loader import copy_weights, llama_config
from inference.families.qwen2.tokenizer import qwen2_tokenizer
from inference.formats.gguf_reader import GGUFError, GGUFFile


def qwen2_config(gguf: GGUFFile) -> dict[str, Any]:
    """``QwenBackbone`` keyword arguments from the file's ``qwen2.*`` metadata (the same keys as Llama's)."""
    if gguf.architecture != "qwen2":
        raise GGUFError(f"{gguf.path.name}: architecture {gguf.architecture!r} is not qwen2")
    config = llama_config(gguf)
    if gguf.get("qwen2.rope.freq_base", None) is None:
        config["rope_max_wavelength"] = 1_000_000.0  # Qwen2's own default, not Llama's 10k
    return config


def load_qwen2(gguf: GGUFFile, *, dtype: str = "float32") -> LoadedModel:
    """Build a ``QwenBackbone`` from ``gguf`` with every weight copied in, plus its tokenizer."""
    from keras_hub.models import QwenBackbone

    config = qwen2_config(gguf)
    tokenizer = qwen2_tokenizer(gguf)
    backbone = QwenBackbone(**config, dtype=check_dtype(dtype))
    copy_weights(backbone, gguf, config, reorder_rotary=False, qkv_bias=True)
    return LoadedModel(
        family="qwen2",
        backbone=backbone,
        tokenizer=tokenizer,
        context_length=int(gguf.get("qwen2.context_length", 32768)),
        metadata=file_metadata(gguf, config=config, backbone=backbone, tokenizer=tokenizer, dtype=dtype),
    )
