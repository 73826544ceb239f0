"""Our tokenizers, rebuilt from each GGUF file's own vocabulary, against independent references built
from the same file (token ids committed in ``tests/data/golden/*_tokens.json`` by ``tools/make_golden.py``).

Why the references are independent of our implementation:

- SmolLM2 (ours: the ``tokenizers`` library, ``Digits(individual)`` + ``ByteLevel`` pre-tokenizers).
  Reference: a plain-Python textbook BPE in ``tools/make_golden.py`` (the ``regex`` module, no
  ``tokenizers``) splitting text with llama.cpp's own definition of the ``smollm`` pre-tokenizer
  (``\\p{N}``, then the GPT-2 regex) and merging by the file's merge ranks. The script also checks it
  against transformers' GGUF tokenizer conversion on every string without digits (transformers 5.24
  does not know ``smollm`` and would merge digits, so it cannot be the reference for those).
- Gemma 3 (ours: ``sentencepiece`` with a model proto rebuilt from the GGUF pieces). Reference:
  transformers' GGUF conversion, a ``tokenizers`` BPE whose merges it derives from the file's piece
  order, with its own handling of control tokens and whitespace pieces - no SentencePiece involved.

40 strings each: whitespace runs, digits, code, unicode, emoji, contractions and chat markup.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from inference.families.gemma3.tokenizer import SentencePieceTokenizer
from inference.families.llama.tokenizer import ByteLevelBPETokenizer
from inference.formats.gguf_reader import GGUFFile
from tests.inference.gguf_golden import GEMMA3_SOURCE, GOLDEN_DIR, SMOLLM2_SOURCE, bundled_gguf

pytestmark = pytest.mark.slow


def reference(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GOLDEN_DIR / f"{name}_tokens.json").read_text(encoding="utf-8"))
    assert len(data["strings"]) >= 30
    return data


@pytest.fixture(scope="module")
def smollm2() -> ByteLevelBPETokenizer:
    return ByteLevelBPETokenizer.from_gguf(GGUFFile(bundled_gguf(SMOLLM2_SOURCE)))


@pytest.fixture(scope="module")
def gemma3() -> SentencePieceTokenizer:
    return SentencePieceTokenizer.from_gguf(GGUFFile(bundled_gguf(GEMMA3_SOURCE)))


def mismatches(tokenizer: Any, data: dict[str, Any]) -> list[tuple[str, list[int], list[int]]]:
    return [
        (text, tokenizer.encode(text), ids)
        for text, ids in zip(data["strings"], data["ids"], strict=True)
        if tokenizer.encode(text) != ids
    ]


def test_smollm2_matches_reference_ids(smollm2: ByteLevelBPETokenizer) -> None:
    assert mismatches(smollm2, reference("smollm2")) == []


def test_gemma3_matches_reference_ids(gemma3: SentencePieceTokenizer) -> None:
    assert mismatches(gemma3, reference("gemma3")) == []


@pytest.mark.parametrize("name", ["smollm2", "gemma3"])
def test_decode_round_trips(name: str, request: pytest.FixtureRequest) -> None:
    tokenizer = request.getfixturevalue(name)
    data = reference(name)
    wrong = [t for t, ids in zip(data["strings"], data["ids"], strict=True) if tokenizer.decode(ids) != t]
    assert wrong == []


def test_smollm2_splits_digits_one_by_one(smollm2: ByteLevelBPETokenizer) -> None:
    """The trap keras-hub's Llama 3 regex falls into: it would group up to three digits."""
    ids = smollm2.encode("2026")
    assert [smollm2.decode([i]) for i in ids] == ["2", "0", "2", "6"]


def test_chat_markup_encodes_to_single_ids(
    smollm2: ByteLevelBPETokenizer, gemma3: SentencePieceTokenizer
) -> None:
    assert smollm2.encode("<|im_start|>user") == [1, smollm2.encode("user")[0]]
    assert gemma3.encode("<start_of_turn>model\n")[0] == 105
    assert gemma3.encode("<bos>") == [2]
    assert gemma3.encode("   ") == [139]  # a whitespace-run piece, stored with literal spaces


def test_golden_tokens_are_from_these_files() -> None:
    import hashlib

    for name, source in (("smollm2", SMOLLM2_SOURCE), ("gemma3", GEMMA3_SOURCE)):
        digest = hashlib.sha256(Path(bundled_gguf(source)).read_bytes()).hexdigest()
        assert reference(name)["gguf_sha256"] == digest
