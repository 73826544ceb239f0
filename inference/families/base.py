"""What a family declares (:class:`Family`) and what its loader hands to the engine (:class:`LoadedModel`).

Contract between the loaders (``families/<family>/loader.py``) and the engine (``inference/engine``):
the engine never looks inside a GGUF file, and a loader never generates. Each family folder's
``__init__`` exports one ``FAMILY`` record; :mod:`inference.families` collects them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable


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


@dataclass(frozen=True)
class DecoderRecipe:
    """How the fast engine (:mod:`inference.engine.weights`) reads this family's keras-hub backbone.

    ``spec(backbone, config, weight_format)`` returns the static :class:`~inference.engine.weights.
    DecoderSpec`; ``layer_weights`` maps the engine's names (``q``, ``attn_norm``, ``q_bias`` ...) to the
    attribute path from a decoder block and its einsum layout (``d_n_h``, ``n_d_h``, ``n_h_d``,
    ``in_out``, ``vector``, ``n_h`` for a per-head bias); names in ``optional`` may be absent.
    """

    spec: Callable[[Any, dict[str, Any], str], Any]
    layer_weights: Mapping[str, tuple[str, str]]
    optional: tuple[str, ...] = ()


@dataclass(frozen=True)
class TinyConfig:
    """A tiny random model of the family, for fast tests (``tiny:NAME`` catalogue sources).

    ``backbone`` is the keras-hub config without ``vocabulary_size`` (the byte tokenizer's size is added);
    ``bos``/``eos`` are the special tokens of the real model it stands in for; ``kernel_scale`` and
    ``norm_std`` make greedy decoding wander (see :func:`inference.tiny.load_tiny`). ``shardings`` is a
    config with the real model's awkward head ratios, for ``python -m inference shardings --tiny``.
    """

    backbone: Mapping[str, Any]
    bos: str | None
    eos: str | None
    kernel_scale: float = 8.0
    norm_std: float = 0.0
    shardings: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Family:
    """Everything the project knows about one model family, declared once in its folder.

    ``backbones``: the keras-hub ``(Backbone, CausalLM)`` class names, most specific first. ``aliases``:
    other catalogue names for the same record. ``load_gguf(file, dtype)`` maps a GGUF file of one of
    ``gguf_architectures`` onto the backbone; ``load_tokenizer(file)`` builds only its tokenizer (a
    start from the fast engine's stored weights needs no backbone). ``weight_rules(config)`` lists the
    large weights for sharding (:mod:`inference.sharding`). ``kv_cache``: the layout of keras-hub's
    ``call_with_cache`` cache (``stacked``: one array; ``per_layer``: a tuple of (keys, values) per
    layer, Gemma 3).
    """

    name: str
    backbones: tuple[tuple[str, str], ...] = ()
    aliases: tuple[str, ...] = ()
    gguf_architectures: tuple[str, ...] = ()
    load_gguf: Callable[[Any, str], LoadedModel] | None = None
    load_tokenizer: Callable[[Any], TextTokenizer] | None = None
    templates: tuple[Any, ...] = ()  # inference.chat_template.ChatTemplate
    weight_rules: Callable[[Mapping[str, Any]], list[Any]] | None = None
    decoder: DecoderRecipe | None = None
    tiny: TinyConfig | None = None
    kv_cache: Literal["stacked", "per_layer"] = "stacked"
