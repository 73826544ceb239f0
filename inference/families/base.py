"""What a family declares (:class:`Family`) and what it hands to the layers above: its loader's
:class:`LoadedModel`, its decoder recipe's :class:`DecoderSpec` (the engine), its layout's
:class:`WeightRule` rows (:mod:`inference.sharding`).

Contract between the loaders (``families/<family>/loader.py``) and the engine (``inference/engine``):
the engine never looks inside a GGUF file, and a loader never generates. Each family folder's
``__init__`` exports one ``FAMILY`` record; :mod:`inference.families` collects them. This module is the
bottom of that: it imports nothing of ``inference`` but the weight formats' names, so the family folders,
the engine and the sharding helpers all build on it and never on each other the wrong way round.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from inference.formats.matrices import SixBit, WeightFormat


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


# ---- the fast engine's view (inference.engine.weights) ------------------------------------------------


class UnsupportedModel(ValueError):
    """A backbone the fast decoder cannot run exactly; the caller falls back to keras-hub's own path."""


@dataclass(frozen=True)
class LayerSpec:
    """What differs between a model's layers: Gemma 3 interleaves local (sliding) and global layers."""

    sliding_window: int | None
    rope_wavelength: float
    rope_scaling: float


@dataclass(frozen=True)
class DecoderSpec:
    """Everything static about a decoder-only transformer, enough to run it from its weights."""

    family: str  # the record in inference.families whose decoder recipe reads the weights
    vocabulary_size: int
    hidden_dim: int
    num_query_heads: int
    num_kv_heads: int
    head_dim: int
    norm_eps: float
    layers: tuple[LayerSpec, ...]
    query_scale: float
    embedding_scale: float
    norm_offset: float  # Gemma's RMSNorm multiplies by (1 + scale)
    qk_norm: bool
    post_norms: bool
    activation: Literal["silu", "gelu_tanh"]
    attention_soft_cap: float | None
    final_soft_cap: float | None
    weight_format: WeightFormat
    native_kernels: bool = False  # block formats: multiply through the native CPU kernels, not XLA
    int8_activations: bool = False  # q8a8/q4a8: activations rounded to int8 blocks in every product
    qkv_bias: bool = False  # Qwen2: the q/k/v projections add a bias (params' per-layer "qkv_bias")
    kv_dtype: Literal["float32", "float16"] = "float32"  # the KV cache's element type (native_serving)
    # q4: the format of the matrices a 6-bit grid reproduces (a file's Q6_K ones): q6 as they are, or q8
    # where the kernels multiply q8 that much faster on this CPU (weight_policy's measured verdict)
    six_bit: SixBit = "q6"

    @property
    def num_layers(self) -> int:
        return len(self.layers)


@dataclass(frozen=True)
class DecoderRecipe:
    """How the fast engine (:mod:`inference.engine.weights`) reads this family's keras-hub backbone.

    ``spec(backbone, config, weight_format)`` returns the static :class:`DecoderSpec` (or raises
    :class:`UnsupportedModel`); ``layer_weights`` maps the engine's names (``q``, ``attn_norm``,
    ``q_bias`` ...) to the attribute path from a decoder block and its einsum layout (``d_n_h``,
    ``n_d_h``, ``n_h_d``, ``in_out``, ``vector``, ``n_h`` for a per-head bias); names in ``optional``
    may be absent.
    """

    spec: Callable[[Any, dict[str, Any], str], DecoderSpec]
    layer_weights: Mapping[str, tuple[str, str]]
    optional: tuple[str, ...] = ()


# ---- the sharding helpers' view (inference.sharding) --------------------------------------------------


class ShardingError(ValueError):
    """Bad input to the sharding helpers: unknown family, mesh that does not fit the devices, bad config.

    Defined here because a malformed :class:`WeightRule` raises it; :mod:`inference.sharding` exports it."""


@dataclass(frozen=True, slots=True)
class WeightRule:
    """One kind of large weight: ``pattern`` fullmatches ``variable.path`` (regex, as in ``LayoutMap``).

    ``split_dims`` lists every dimension of ``shape`` in order of preference; ``dim_names`` names them
    (``"num_query_heads"``) so the log says which config value blocked a split.
    """

    name: str
    pattern: str
    shape: tuple[int, ...]
    dim_names: tuple[str, ...]
    split_dims: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.dim_names) != len(self.shape) or sorted(self.split_dims) != list(range(len(self.shape))):
            raise ShardingError(f"weight rule {self.name!r}: dim_names/split_dims must cover every dimension")


def weight_rule(
    name: str, pattern: str, dims: Sequence[tuple[str, int]], *, prefer: Sequence[str]
) -> WeightRule:
    """A :class:`WeightRule` from named dimensions; ``prefer`` names the split order, the rest follow."""
    names = tuple(n for n, _ in dims)
    order = [names.index(n) for n in prefer] + [i for i, n in enumerate(names) if n not in prefer]
    return WeightRule(name, pattern, tuple(int(s) for _, s in dims), names, tuple(order))


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
    weight_rules: Callable[[Mapping[str, Any]], list[WeightRule]] | None = None
    decoder: DecoderRecipe | None = None
    tiny: TinyConfig | None = None
    kv_cache: Literal["stacked", "per_layer"] = "stacked"
