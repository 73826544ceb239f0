"""SentencePiece tokenizer rebuilt from a GGUF file's own pieces (Gemma's ``tokenizer.ggml.model ==
"llama"`` vocabulary: BPE with byte fallback, no normalization, no dummy prefix).

The GGUF keeps the pieces, scores and types but not the model proto, so we write one. Copied verbatim,
the proto tokenizes text wrongly in three ways, each fixed here:

1. ``<unk>`` is typed CONTROL in the file; SentencePiece then has no unknown piece at all
   (``unk_id() == -1``) and treats id 3 as an ordinary control symbol. It is typed UNKNOWN.
2. ``<bos>``, ``<start_of_turn>``, ``<end_of_turn>``, ``<unusedN>`` ... are CONTROL, and SentencePiece
   never matches a CONTROL piece in text - so a rendered chat template would be cut into ``<``,
   ``start``, ``_of`` ... They become USER_DEFINED, which SentencePiece matches whole, as llama.cpp and
   Hugging Face do.
3. Pieces made only of spaces are stored with literal spaces, but SentencePiece escapes a space to
   ``▁`` before matching; written as is they never match and runs of spaces fall back to one ``▁``
   piece each. They are respelled with ``▁``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inference.formats.gguf_reader import TOKEN_CONTROL, TOKEN_USER_DEFINED, GGUFError, GGUFFile

_SPACE_ESCAPE = "\u2581"


class TokenizerBuildError(GGUFError):
    """The file's SentencePiece vocabulary cannot be rebuilt (wrong model kind, inconsistent arrays)."""


def build_model_proto(
    *,
    tokens: Sequence[str],
    scores: Sequence[float],
    token_types: Sequence[int],
    unk_id: int,
    bos_id: int | None,
    eos_id: int | None,
    pad_id: int | None,
) -> bytes:
    """A serialized SentencePiece ``ModelProto`` for these pieces, with the three fixes applied."""
    from sentencepiece import sentencepiece_model_pb2

    pb2: Any = sentencepiece_model_pb2  # generated protobuf module: no type stubs

    if not len(tokens) == len(scores) == len(token_types):
        raise TokenizerBuildError(
            f"{len(tokens)} pieces, {len(scores)} scores and {len(token_types)} types do not line up"
        )
    if not 0 <= unk_id < len(tokens):
        raise TokenizerBuildError(f"unknown-token id {unk_id} is outside the vocabulary")
    proto = pb2.ModelProto()
    kind = pb2.ModelProto.SentencePiece.Type
    for index, (token, score, token_type) in enumerate(zip(tokens, scores, token_types, strict=True)):
        piece = proto.pieces.add()
        piece.piece = _SPACE_ESCAPE * len(token) if token and token.strip(" ") == "" else token
        piece.score = float(score)
        if index == unk_id:
            piece.type = kind.UNKNOWN
        elif token_type in (TOKEN_CONTROL, TOKEN_USER_DEFINED):
            piece.type = kind.USER_DEFINED
        else:
            piece.type = int(token_type)

    trainer = proto.trainer_spec
    trainer.model_type = pb2.TrainerSpec.BPE
    trainer.vocab_size = len(tokens)
    trainer.byte_fallback = True
    trainer.unk_id = unk_id
    trainer.bos_id = -1 if bos_id is None else bos_id
    trainer.eos_id = -1 if eos_id is None else eos_id
    trainer.pad_id = -1 if pad_id is None else pad_id
    trainer.split_digits = False

    normalizer = proto.normalizer_spec
    normalizer.name = "identity"
    normalizer.add_dummy_prefix = False
    normalizer.remove_extra_whitespaces = False
    normalizer.escape_whitespaces = True
    return bytes(proto.SerializeToString())


class SentencePieceTokenizer:
    """Implements ``inference.families.base.TextTokenizer``. ``encode`` adds no BOS; ``add_bos`` says
    whether the model expects one (Gemma does: a chat template writes ``<bos>`` itself)."""

    def __init__(
        self,
        *,
        tokens: Sequence[str],
        scores: Sequence[float],
        token_types: Sequence[int],
        unk_id: int,
        bos_id: int | None,
        eos_id: int | None,
        pad_id: int | None,
        add_bos: bool = True,
    ) -> None:
        import sentencepiece

        proto = build_model_proto(
            tokens=tokens,
            scores=scores,
            token_types=token_types,
            unk_id=unk_id,
            bos_id=bos_id,
            eos_id=eos_id,
            pad_id=pad_id,
        )
        processor = sentencepiece.SentencePieceProcessor()
        try:
            processor.LoadFromSerializedProto(proto)
        except RuntimeError as exc:
            raise TokenizerBuildError(f"SentencePiece refused the rebuilt model: {exc}") from exc
        self._processor = processor
        self._size = len(tokens)
        self._by_token = {token: index for index, token in enumerate(tokens)}
        self._bos_id = bos_id
        self._eos_id = eos_id
        self.pad_id = pad_id
        self.add_bos = add_bos

    @classmethod
    def from_gguf(cls, gguf: GGUFFile) -> SentencePieceTokenizer:
        model = gguf.get("tokenizer.ggml.model")
        if model != "llama":
            raise TokenizerBuildError(f"{gguf.path.name}: tokenizer model {model!r} is not SentencePiece")

        def optional(key: str) -> int | None:
            value = gguf.get(key, None)
            return None if value is None else int(value)

        unk_id = optional("tokenizer.ggml.unknown_token_id")
        return cls(
            tokens=gguf.get("tokenizer.ggml.tokens"),
            scores=gguf.get("tokenizer.ggml.scores"),
            token_types=gguf.get("tokenizer.ggml.token_type"),
            unk_id=0 if unk_id is None else unk_id,
            bos_id=optional("tokenizer.ggml.bos_token_id"),
            eos_id=optional("tokenizer.ggml.eos_token_id"),
            pad_id=optional("tokenizer.ggml.padding_token_id"),
            add_bos=bool(gguf.get("tokenizer.ggml.add_bos_token", True)),
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
        return [int(i) for i in self._processor.EncodeAsIds(text)]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``; special pieces (``<end_of_turn>``) are written out as text.

        Byte-fallback pieces of an unfinished multi-byte character decode to U+FFFD.
        """
        return str(self._processor.DecodeIds([int(i) for i in ids]))

    def token_to_id(self, token: str) -> int | None:
        return self._by_token.get(token)

    def id_to_token(self, index: int) -> str | None:
        if not 0 <= index < self._size:
            return None
        return str(self._processor.IdToPiece(index))
