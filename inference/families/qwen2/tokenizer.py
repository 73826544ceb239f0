"""Qwen2's tokenizer: byte-level BPE from the file (the Llama folder's builder) with the ``qwen2``
pre-tokenizer: GPT-4-style splitting where each digit is its own piece, after Unicode NFC (as the
model's own ``tokenizer.json`` normalizes; llama.cpp's ``qwen2`` pre-type uses the same regex)."""

from __future__ import annotations

from inference.families.llama.tokenizer import PRE_TOKENIZER_SPLITS, ByteLevelBPETokenizer
from inference.formats.gguf_reader import GGUFFile

QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_PRE_TOKENIZERS = {**PRE_TOKENIZER_SPLITS, "qwen2": (False, QWEN2_SPLIT)}


def qwen2_tokenizer(gguf: GGUFFile) -> ByteLevelBPETokenizer:
    """The file's vocabulary and merges with Qwen2's pre-tokenizer and NFC normalization."""
    return ByteLevelBPETokenizer.from_gguf(gguf, splits=QWEN2_PRE_TOKENIZERS, nfc=True)
