"""Fast: the tokenizer traps of the real files, reproduced on tiny vocabularies written into GGUF
files with ``gguf.GGUFWriter`` (the slow parity tests check the real vocabularies)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from inference.families.base import TextTokenizer
from inference.families.gemma3.tokenizer import SentencePieceTokenizer
from inference.families.gemma3.tokenizer import TokenizerBuildError as SentencePieceBuildError
from inference.families.llama.tokenizer import ByteLevelBPETokenizer, TokenizerBuildError
from inference.formats.gguf_reader import GGUFFile
from tests.inference import gguf_tiny


def bpe_file(tmp_path: Path, *, pre: str) -> GGUFFile:
    tokens, types, merges = gguf_tiny.bpe_vocabulary()

    def metadata(w: Any) -> None:
        gguf_tiny.write_bpe_tokenizer(w, tokens=tokens, types=types, merges=merges, pre=pre)

    path = gguf_tiny.write_gguf(tmp_path / f"{pre}.gguf", arch="llama", metadata=metadata, tensors={})
    return GGUFFile(path)


@pytest.fixture
def smollm(tmp_path: Path) -> ByteLevelBPETokenizer:
    return ByteLevelBPETokenizer.from_gguf(bpe_file(tmp_path, pre="smollm"))


@pytest.fixture
def gemma(tmp_path: Path) -> SentencePieceTokenizer:
    def metadata(w: Any) -> None:
        gguf_tiny.write_sentencepiece_tokenizer(w)

    path = gguf_tiny.write_gguf(tmp_path / "sp.gguf", arch="gemma3", metadata=metadata, tensors={})
    return SentencePieceTokenizer.from_gguf(GGUFFile(path))


def test_both_implement_the_protocol(smollm: ByteLevelBPETokenizer, gemma: SentencePieceTokenizer) -> None:
    assert isinstance(smollm, TextTokenizer) and isinstance(gemma, TextTokenizer)
    assert (smollm.bos_id, smollm.eos_id, smollm.add_bos) == (1, 2, False)
    assert (gemma.bos_id, gemma.eos_id, gemma.add_bos) == (2, 1, True)
    assert smollm.vocabulary_size == len(gguf_tiny.bpe_vocabulary()[0])


def test_smollm_splits_digits_where_a_merge_exists(smollm: ByteLevelBPETokenizer, tmp_path: Path) -> None:
    """The vocabulary has the merge "1 2"; SmolLM's pre-tokenizer never lets two digits meet."""
    assert len(smollm.encode("12")) == 2
    gpt2 = ByteLevelBPETokenizer.from_gguf(bpe_file(tmp_path, pre="gpt2"))
    assert gpt2.encode("12") == [gpt2.token_to_id("12")]


def test_bpe_merges_and_special_tokens(smollm: ByteLevelBPETokenizer) -> None:
    ids = smollm.encode("<|im_start|>hello the<|im_end|>")
    assert ids[0] == 1 and ids[-1] == 2
    assert smollm.token_to_id("hell") in ids and smollm.token_to_id("Ġthe") in ids
    assert smollm.decode(ids) == "<|im_start|>hello the<|im_end|>"


def test_bpe_decodes_any_utf8(smollm: ByteLevelBPETokenizer) -> None:
    for text in ("naïve 日本 🤗", "  spaces\n\ttabs  ", ""):
        assert smollm.decode(smollm.encode(text)) == text
    emoji = smollm.encode("🤗")
    assert len(emoji) == 4 and smollm.decode(emoji[:2]) == "\ufffd"  # a cut character, for streaming


def test_unknown_pre_tokenizer_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TokenizerBuildError, match="qwen2"):
        ByteLevelBPETokenizer.from_gguf(bpe_file(tmp_path, pre="qwen2"))


def test_sentencepiece_control_tokens_match_in_text(gemma: SentencePieceTokenizer) -> None:
    """Trap 2: CONTROL pieces would never match text; a rendered template must encode exactly."""
    ids = gemma.encode("<bos><start_of_turn>ab<end_of_turn>\n")
    assert ids == [2, 4, gemma.token_to_id("ab"), 5, gemma.token_to_id("\n")]
    assert gemma.decode(ids) == "<bos><start_of_turn>ab<end_of_turn>\n"


def test_sentencepiece_whitespace_runs_are_single_pieces(gemma: SentencePieceTokenizer) -> None:
    """Trap 3: the file spells them with spaces, SentencePiece matches ``▁``."""
    assert gemma.encode("  ") == [gemma.token_to_id("  ")]
    assert gemma.encode("   ab") == [gemma.token_to_id("   "), gemma.token_to_id("ab")]
    assert gemma.decode(gemma.encode("a   b")) == "a   b"


def test_sentencepiece_no_dummy_prefix_and_byte_fallback(gemma: SentencePieceTokenizer) -> None:
    assert gemma.encode("ab") == [gemma.token_to_id("ab")]  # not "▁ab": no dummy prefix
    assert gemma.encode(" ab") == [gemma.token_to_id("▁ab")]
    ids = gemma.encode("é")
    assert ids == [gemma.token_to_id("<0xC3>"), gemma.token_to_id("<0xA9>")]
    assert gemma.decode(ids) == "é"


def test_sentencepiece_unknown_piece_becomes_unknown() -> None:
    """Trap 1: ``<unk>`` is typed CONTROL in the file; copied as is, SentencePiece has no unknown piece."""
    tokens, scores, types = gguf_tiny.sentencepiece_vocabulary()
    assert types[3] == 3  # CONTROL, as in Gemma's file
    tokenizer = SentencePieceTokenizer(
        tokens=tokens, scores=scores, token_types=types, unk_id=3, bos_id=2, eos_id=1, pad_id=0
    )
    assert tokenizer._processor.unk_id() == 3 and tokenizer._processor.is_unknown(3)
    with pytest.raises(SentencePieceBuildError, match="line up"):
        SentencePieceTokenizer(
            tokens=tokens, scores=scores[:-1], token_types=types, unk_id=3, bos_id=2, eos_id=1, pad_id=0
        )
