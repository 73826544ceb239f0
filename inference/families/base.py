"""What a family loader hands to the generation engine: a keras-hub backbone and a text tokenizer.

Contract between the loaders (``families/<family>/loader.py``) and the engine (``inference/engine``):
the engine never looks inside a GGUF file, and a loader never generates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class TextTokenizer(Protocol):
    """Text <-> token ids, built from the model file's own vocabulary.

    ``encode`` adds no BOS/EOS and recognises the model's special tokens written in the text
    (``<|im_start|>``, ``<start_of_turn>``) as single ids, so a rendered chat template encodes exactly.
    ``decode`` of a prefix may end inside a multi-byte character; streaming decoders handle that.
    """

    @property
    def vocabulary_size(self) -> int: ...

    @property
    def bos_id(self) -> int | None: ...

    @property
    def eos_id(self) -> int | None: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def token_to_id(self, token: str) -> int | None: ...


@dataclass
class LoadedModel:
    """A ready backbone (weights set, built) with its tokenizer and what the file said about itself."""

    family: str  # "llama" | "gemma3" | ...
    backbone: Any  # keras_hub.models.Backbone
    tokenizer: TextTokenizer
    context_length: int
    metadata: dict[str, Any] = field(default_factory=dict)  # architecture facts, for `inference list`
