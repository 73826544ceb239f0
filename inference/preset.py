"""keras-hub presets (``kaggle://…``, ``hf://…``, local folders) as a :class:`LoadedModel`.

Deployments with network access and accelerators load the study's models this way. We take only the
backbone and the tokenizer from the preset and render prompts with our own templates, so the preset's
preprocessor (which prepends the start token a second time) never runs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from inference.chat_template import ChatTemplate
from inference.families.base import LoadedModel

# Candidate special tokens in rendered prompts: <...> markers and Mistral's [INST] / [/INST].
_SPECIAL = re.compile(r"(<[^<>\s]{1,40}>|\[/?INST\])")


class KerasHubTokenizer:
    """Adapts a keras-hub tokenizer to ``TextTokenizer``: special tokens in the text become single ids.

    keras-hub tokenizers treat ``<start_of_turn>`` or ``<|eot_id|>`` in text inconsistently across
    families, so the text is split on marker-shaped pieces and each marker the vocabulary knows as one
    token is mapped directly; everything else goes through the tokenizer.
    """

    def __init__(self, tokenizer: Any, *, bos: str | None = None, eos: str | None = None) -> None:
        self._tokenizer = tokenizer
        self._bos = self.token_to_id(bos) if bos else None
        self._eos = self.token_to_id(eos) if eos else None

    @property
    def vocabulary_size(self) -> int:
        return int(self._tokenizer.vocabulary_size())

    @property
    def bos_id(self) -> int | None:
        return self._bos

    @property
    def eos_id(self) -> int | None:
        return self._eos

    def token_to_id(self, token: str) -> int | None:
        try:
            index = int(self._tokenizer.token_to_id(token))
        except (KeyError, ValueError, TypeError):
            return None
        try:
            same = self._tokenizer.id_to_token(index) == token
        except (KeyError, ValueError, IndexError):
            same = False
        return index if same else None

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for piece in _SPECIAL.split(text):
            if not piece:
                continue
            special = self.token_to_id(piece) if _SPECIAL.fullmatch(piece) else None
            if special is not None:
                ids.append(special)
            else:
                ids.extend(int(i) for i in _as_list(self._tokenizer(piece)))
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        if not ids:
            return ""
        out = self._tokenizer.detokenize([int(i) for i in ids])
        return out if isinstance(out, str) else bytes(_as_bytes(out)).decode("utf-8", errors="replace")


def _as_list(tensor: Any) -> list[int]:
    import numpy as np

    return [int(x) for x in np.asarray(tensor).reshape(-1)]


def _as_bytes(value: Any) -> bytes:
    import numpy as np

    item = np.asarray(value).reshape(-1)[0] if np.asarray(value).shape else np.asarray(value).item()
    return item if isinstance(item, bytes) else str(item).encode("utf-8")


def load_preset(handle: str, *, family: str, dtype: str, template: ChatTemplate) -> LoadedModel:
    """Backbone + tokenizer from a keras-hub preset; eos: the template's first stop token it knows."""
    import keras_hub

    backbone = keras_hub.models.Backbone.from_preset(handle, dtype=dtype)
    tokenizer = keras_hub.models.Tokenizer.from_preset(handle)
    probe = KerasHubTokenizer(tokenizer)
    eos = next((t for t in template.stop_tokens if probe.token_to_id(t) is not None), None)
    wrapped = KerasHubTokenizer(tokenizer, eos=eos)
    context = int(getattr(backbone, "max_sequence_length", 0) or 8192)
    return LoadedModel(
        family=family,
        backbone=backbone,
        tokenizer=wrapped,
        context_length=context,
        metadata={"source": f"preset:{handle}", "parameters": int(backbone.count_params())},
    )
