"""Byte-level BPE tokenizer (GPT-2 style) rebuilt from a GGUF file's own vocabulary and merges.

Built on the ``tokenizers`` library. The one thing the file does not spell out is the pre-tokenizer: it
only names it (``tokenizer.ggml.pre``), and the merges were learned on text split that way. SmolLM2's
``smollm`` splits every digit on its own before GPT-2's byte-level split; keras-hub's Llama 3 regex
groups up to three digits and so tokenizes numbers (and some whitespace runs) differently from the
model's training. :data:`PRE_TOKENIZER_SPLITS` maps the names we know; an unknown name is refused
rather than guessed.

Control tokens (``<|im_start|>``, ``<|im_end|>``, ``<|endoftext|>`` ...) are added as special tokens,
so a rendered chat template written as text encodes each of them to a single id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from inference.formats.gguf_reader import TOKEN_CONTROL, TOKEN_USER_DEFINED, GGUFError, GGUFFile

# llama.cpp's Llama 3 split (``llama-bpe``): up to three digits per piece.
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# tokenizer.ggml.pre -> (split digits one by one first?, extra split regex before byte-level or None).
# None for the regex means the byte-level pre-tokenizer's own GPT-2 regex. Other families pass their
# own names to ``from_gguf(splits=...)`` (Qwen2: inference.families.qwen2.tokenizer).
PreTokenizerSplit = tuple[bool, str | None]
PRE_TOKENIZER_SPLITS: dict[str, PreTokenizerSplit] = {
    "smollm": (True, None),
    "starcoder": (True, None),
    "gpt2": (False, None),
    "default": (False, None),
    "llama-bpe": (False, _LLAMA3_SPLIT),
    "llama3": (False, _LLAMA3_SPLIT),
}


class TokenizerBuildError(GGUFError):
    """The file's tokenizer cannot be rebuilt faithfully (unknown pre-tokenizer, missing merges)."""


class ByteLevelBPETokenizer:
    """Implements ``inference.families.base.TextTokenizer`` for GGUF files with ``tokenizer.ggml.model
    == "gpt2"``. ``encode`` adds no BOS/EOS; ``add_bos`` says whether the model expects one."""

    def __init__(
        self,
        *,
        tokens: Sequence[str],
        merges: Sequence[str],
        token_types: Sequence[int],
        pre_tokenizer: str,
        bos_id: int | None,
        eos_id: int | None,
        add_bos: bool = False,
        splits: Mapping[str, PreTokenizerSplit] = PRE_TOKENIZER_SPLITS,
        nfc: bool = False,
    ) -> None:
        """``nfc``: normalize text to Unicode NFC before splitting (Qwen2's tokenizer does)."""
        from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

        if pre_tokenizer not in splits:
            raise TokenizerBuildError(f"unknown BPE pre-tokenizer {pre_tokenizer!r}; known: {sorted(splits)}")
        if len(token_types) != len(tokens):
            raise TokenizerBuildError(f"{len(tokens)} tokens but {len(token_types)} token types")
        if not merges:
            raise TokenizerBuildError("the file lists no BPE merges")
        vocab = {token: index for index, token in enumerate(tokens)}
        pairs = [_split_merge(merge) for merge in merges]
        model = models.BPE(vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False)
        tokenizer = Tokenizer(model)

        if nfc:
            tokenizer.normalizer = normalizers.NFC()
        split_digits, regex = splits[pre_tokenizer]
        steps: list[Any] = []
        if split_digits:
            steps.append(pre_tokenizers.Digits(individual_digits=True))
        if regex is not None:
            steps.append(pre_tokenizers.Split(Regex(regex), behavior="isolated"))
        steps.append(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=regex is None))
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(steps)
        tokenizer.decoder = decoders.ByteLevel()

        specials = [
            AddedToken(token, special=True, normalized=False)
            for token, kind in zip(tokens, token_types, strict=True)
            if kind in (TOKEN_CONTROL, TOKEN_USER_DEFINED)
        ]
        tokenizer.add_special_tokens(specials)
        if tokenizer.get_vocab_size(with_added_tokens=True) != len(tokens):
            raise TokenizerBuildError("special tokens are not all part of the file's vocabulary")

        self._tokenizer = tokenizer
        self._size = len(tokens)
        self._bos_id = bos_id
        self._eos_id = eos_id
        self.add_bos = add_bos
        self.pre_tokenizer_name = pre_tokenizer

    @classmethod
    def from_gguf(
        cls,
        gguf: GGUFFile,
        *,
        splits: Mapping[str, PreTokenizerSplit] = PRE_TOKENIZER_SPLITS,
        nfc: bool = False,
    ) -> ByteLevelBPETokenizer:
        """Read vocabulary, merges, token types and special ids from ``tokenizer.ggml.*``."""
        model = gguf.get("tokenizer.ggml.model")
        if model != "gpt2":
            raise TokenizerBuildError(
                f"{gguf.path.name}: tokenizer model {model!r} is not byte-level BPE; Llama-architecture "
                "files with a SentencePiece vocabulary (Llama 2, Mistral, Vicuna) are not supported as GGUF: "
                "use their keras-hub preset (source = preset:...)"
            )
        return cls(
            tokens=gguf.get("tokenizer.ggml.tokens"),
            merges=gguf.get("tokenizer.ggml.merges"),
            token_types=gguf.get("tokenizer.ggml.token_type"),
            pre_tokenizer=str(gguf.get("tokenizer.ggml.pre", "default")),
            bos_id=_optional_int(gguf.get("tokenizer.ggml.bos_token_id", None)),
            eos_id=_optional_int(gguf.get("tokenizer.ggml.eos_token_id", None)),
            add_bos=bool(gguf.get("tokenizer.ggml.add_bos_token", False)),
            splits=splits,
            nfc=nfc,
        )

    @property
    def vocabulary_size(self) -> int:
        return self._size

    @property
    def bos_id(self) -> int | None:
        return self._bos_id

    @property
    def eos_id(self) -> int | None:
        return self._eos_id

    def encode(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``, special tokens included as written (``<|im_end|>``).

        A prefix ending inside a multi-byte character decodes that character to U+FFFD.
        """
        return str(self._tokenizer.decode(list(ids), skip_special_tokens=False))

    def token_to_id(self, token: str) -> int | None:
        index = self._tokenizer.token_to_id(token)
        return None if index is None else int(index)

    def id_to_token(self, index: int) -> str | None:
        """The vocabulary entry (byte-level spelling, ``Ġ`` for a space) of ``index``."""
        token = self._tokenizer.id_to_token(index)
        return None if token is None else str(token)


def _split_merge(merge: str) -> tuple[str, str]:
    left, sep, right = merge.partition(" ")
    if not sep or not left or not right:
        raise TokenizerBuildError(f"malformed BPE merge {merge!r}")
    return left, right


def _optional_int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]
