"""Tiny random keras-hub models for fast tests: real backbones, real tokenizer, seconds to build.

A catalogue entry with ``source = "tiny:llama"`` or ``source = "tiny:gemma3"`` builds a seeded random
``Llama3Backbone`` / ``Gemma3Backbone`` with a few layers and a byte-level tokenizer that knows every chat
template's special tokens. The weights are random, so the text is gibberish, but every code path the real
models take (templates, KV-cache prefill/decode, sampling, stop tokens, streaming, the pool's threads) runs
for real. Tests of code that *uses* models (webapp, scenarios) point ``ARENA_CATALOGUE_PATH`` at
``tests/data/tiny_catalogue.toml``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from inference.families.base import LoadedModel

# Every special token of every shipped chat template, so any template renders into single ids.
SPECIAL_TOKENS: tuple[str, ...] = (
    "<pad>",
    "<bos>",
    "<eos>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
)
_BYTE_COUNT = 256
TINY_VOCABULARY_SIZE = _BYTE_COUNT + len(SPECIAL_TOKENS)

# (bos, eos) per tiny family, matching the real model each one stands in for.
_FAMILY_SPECIALS = {"llama": ("<|im_start|>", "<|im_end|>"), "gemma3": ("<bos>", "<eos>")}
TINY_FAMILIES = tuple(_FAMILY_SPECIALS)


class ByteTokenizer:
    """UTF-8 bytes as ids 0..255, then the template special tokens; implements ``TextTokenizer``.

    ``decode`` of a prefix that ends inside a multi-byte character yields U+FFFD for the partial bytes,
    exactly like the real byte-level BPE tokenizers, so streaming decoders are exercised honestly.
    """

    def __init__(self, *, bos: str | None, eos: str | None) -> None:
        self._special_ids = {tok: _BYTE_COUNT + i for i, tok in enumerate(SPECIAL_TOKENS)}
        self._special_by_id = {i: tok for tok, i in self._special_ids.items()}
        self._split = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL_TOKENS) + ")")
        self._bos = self._special_ids[bos] if bos else None
        self._eos = self._special_ids[eos] if eos else None

    @property
    def vocabulary_size(self) -> int:
        return TINY_VOCABULARY_SIZE

    @property
    def bos_id(self) -> int | None:
        return self._bos

    @property
    def eos_id(self) -> int | None:
        return self._eos

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for piece in self._split.split(text):
            if piece in self._special_ids:
                ids.append(self._special_ids[piece])
            elif piece:
                ids.extend(piece.encode("utf-8"))
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        out: list[str] = []
        buf = bytearray()
        for i in ids:
            i = int(i)
            if i < _BYTE_COUNT:
                buf.append(i)
                continue
            out.append(buf.decode("utf-8", errors="replace"))
            buf.clear()
            out.append(self._special_by_id.get(i, ""))
        out.append(buf.decode("utf-8", errors="replace"))
        return "".join(out)

    def token_to_id(self, token: str) -> int | None:
        if token in self._special_ids:
            return self._special_ids[token]
        raw = token.encode("utf-8")
        return raw[0] if len(raw) == 1 else None


def tiny_tokenizer(family: str) -> ByteTokenizer:
    """The byte tokenizer with the bos/eos of the real model ``family`` stands in for."""
    if family not in _FAMILY_SPECIALS:
        raise ValueError(f"unknown tiny family {family!r}; choose one of {', '.join(TINY_FAMILIES)}")
    bos, eos = _FAMILY_SPECIALS[family]
    return ByteTokenizer(bos=bos, eos=eos)


def _tiny_backbone(family: str, *, dtype: str, seed: int) -> Any:
    import keras
    import keras_hub

    keras.utils.set_random_seed(seed)
    if family == "llama":
        return keras_hub.models.Llama3Backbone(
            vocabulary_size=TINY_VOCABULARY_SIZE,
            num_layers=2,
            num_query_heads=4,
            num_key_value_heads=2,
            hidden_dim=64,
            intermediate_dim=128,
            rope_max_wavelength=10_000,
            tie_word_embeddings=True,
            dtype=dtype,
        )
    return keras_hub.models.Gemma3Backbone(
        vocabulary_size=TINY_VOCABULARY_SIZE,
        image_size=16,
        num_layers=3,
        num_query_heads=2,
        num_key_value_heads=1,
        hidden_dim=64,
        intermediate_dim=128,
        head_dim=32,
        use_post_ffw_norm=True,
        use_post_attention_norm=True,
        use_sliding_window_attention=True,
        sliding_window_size=16,  # small, so decoding past it exercises the local-attention mask
        vision_encoder=None,
        dtype=dtype,
    )


def _diversify(backbone: Any, family: str, *, seed: int) -> None:
    """Rescale the random weights so greedy decoding wanders over the vocabulary.

    With keras' default initialisers a tied-embedding model's residual stream is dominated by the input
    embedding, so it predicts its own input forever (one repeated token). Tests of stop tokens and UTF-8
    streaming need varied output: boost the layer kernels (Llama) or randomise the norm scales (Gemma 3,
    whose post-norms undo a kernel boost).
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    kernel_scale, norm_std = (8.0, 0.0) if family == "llama" else (2.0, 3.0)
    for variable in backbone.weights:
        if "embedding" in variable.path:
            continue
        if "norm" in variable.path:
            if norm_std:
                variable.assign(rng.normal(0.0, norm_std, variable.shape).astype(variable.dtype))
            continue
        variable.assign(np.asarray(variable.value) * kernel_scale)


def load_tiny(
    family: str, *, dtype: str = "float32", seed: int = 0, context_length: int = 512
) -> LoadedModel:
    """A seeded random tiny backbone of ``family`` ("llama" or "gemma3") with its byte tokenizer.

    Same ``family`` and ``seed`` give the same weights, so tests can compare two builds.
    """
    tokenizer = tiny_tokenizer(family)
    backbone = _tiny_backbone(family, dtype=dtype, seed=seed)
    _diversify(backbone, family, seed=seed)
    return LoadedModel(
        family=family,
        backbone=backbone,
        tokenizer=tokenizer,
        context_length=context_length,
        metadata={"source": f"tiny:{family}", "parameters": int(backbone.count_params()), "seed": seed},
    )
