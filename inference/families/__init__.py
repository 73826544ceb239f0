"""The family registry: one folder per model family, each exporting one ``FAMILY`` record.

A :class:`~inference.families.base.Family` names the family's keras-hub classes, GGUF architectures,
loader, chat templates, sharding rules, fast-decoder recipe and tiny test config. This module finds the
records by scanning its own sub-packages (so adding a family is one new folder plus its catalogue
entries) and answers every "which family?" question the rest of ``inference`` asks: by catalogue name,
by GGUF architecture, by backbone, and which chat templates exist.

Records are collected on first use, not at import: family folders import engine and sharding modules,
which themselves import :mod:`inference.families.base`.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inference.families.base import Family, LoadedModel, TextTokenizer
from inference.formats.gguf_reader import GGUFError, GGUFFile

if TYPE_CHECKING:
    from inference.chat_template import ChatTemplate


class UnsupportedArchitectureError(GGUFError):
    """A GGUF file whose architecture has no loader here."""


@functools.cache
def families() -> dict[str, Family]:
    """Every family record by its name, from the sub-packages that export ``FAMILY``."""
    found: dict[str, Family] = {}
    for module in pkgutil.iter_modules(__path__):
        if not module.ispkg:
            continue
        record = getattr(importlib.import_module(f"{__name__}.{module.name}"), "FAMILY", None)
        if isinstance(record, Family):
            if record.name in found:
                raise RuntimeError(f"two family folders declare {record.name!r}")
            found[record.name] = record
    return found


def catalogue_names() -> tuple[str, ...]:
    """Every name a catalogue entry's ``family`` may use (names and aliases)."""
    return tuple(sorted({n for f in families().values() for n in (f.name, *f.aliases)}))


def find_family(name: str) -> Family | None:
    """The record for a family name or alias, or None."""
    return next((r for r in families().values() if name == r.name or name in r.aliases), None)


def family(name: str) -> Family:
    """The record for a family name or alias; KeyError listing the known names."""
    record = find_family(name)
    if record is None:
        raise KeyError(f"unknown model family {name!r}; known: {', '.join(catalogue_names())}")
    return record


def family_of_backbone(backbone: Any) -> Family | None:
    """The record whose keras-hub backbone class ``backbone`` is (exact class first, then subclasses)."""
    name = type(backbone).__name__
    for record in families().values():
        if any(name == backbone_class for backbone_class, _ in record.backbones):
            return record
    import keras_hub

    for record in families().values():
        for backbone_class, _ in record.backbones:
            cls = getattr(keras_hub.models, backbone_class, None)
            if cls is not None and isinstance(backbone, cls):
                return record
    return None


def causal_lm_class(backbone: Any) -> str | None:
    """The keras-hub CausalLM class name that wraps ``backbone``, or None."""
    record = family_of_backbone(backbone)
    if record is None:
        return None
    name = type(backbone).__name__
    pairs = dict(record.backbones)
    return pairs.get(name, record.backbones[0][1])


def gguf_architectures() -> dict[str, Family]:
    """``general.architecture`` -> the family whose loader reads it."""
    return {arch: f for f in families().values() if f.load_gguf is not None for arch in f.gguf_architectures}


def all_templates() -> dict[str, ChatTemplate]:
    """Every shipped chat template by name; each family folder contributes its own."""
    return {t.name: t for f in families().values() for t in f.templates}


def get_template(name: str) -> ChatTemplate:
    """The template registered under ``name`` (the catalogue's ``template`` field)."""
    templates = all_templates()
    if name not in templates:
        raise KeyError(f"unknown chat template {name!r}; known: {', '.join(sorted(templates))}")
    return templates[name]


def load_gguf(path: Path, *, dtype: str = "float32") -> LoadedModel:
    """Load a GGUF file into a built keras-hub backbone with its tokenizer.

    ``dtype`` is the keras dtype policy of the backbone ("float32", "bfloat16", "float16"); weights are
    dequantized to float32 by ``gguf`` and cast on assignment. Raises :class:`GGUFError` (or a subclass)
    for a file that cannot be read or mapped, ``ValueError`` for an unknown dtype.
    """
    return load_gguf_file(GGUFFile(Path(path)), dtype=dtype)


def load_gguf_file(gguf: GGUFFile, *, dtype: str = "float32") -> LoadedModel:
    """:func:`load_gguf` for an already opened file (parsing Gemma 3's header alone takes ~12 s)."""
    load = _gguf_record(gguf).load_gguf
    assert load is not None  # _gguf_record returns only records with loaders
    return load(gguf, dtype)


def load_gguf_tokenizer(gguf: GGUFFile) -> TextTokenizer:
    """Only the tokenizer of an opened GGUF file (no backbone, no weights read)."""
    record = _gguf_record(gguf)
    if record.load_tokenizer is None:
        raise UnsupportedArchitectureError(
            f"{gguf.path.name}: family {record.name!r} has no tokenizer loader")
    return record.load_tokenizer(gguf)


def _gguf_record(gguf: GGUFFile) -> Family:
    """The family whose loader reads this file's architecture; UnsupportedArchitectureError if none."""
    loaders = gguf_architectures()
    record = loaders.get(gguf.architecture)
    if record is None or record.load_gguf is None:
        raise UnsupportedArchitectureError(
            f"{gguf.path.name}: GGUF architecture {gguf.architecture!r} has no loader; supported: "
            f"{', '.join(sorted(loaders))}"
        )
    return record


__all__ = [
    "Family",
    "LoadedModel",
    "UnsupportedArchitectureError",
    "all_templates",
    "catalogue_names",
    "causal_lm_class",
    "families",
    "family",
    "family_of_backbone",
    "find_family",
    "get_template",
    "gguf_architectures",
    "load_gguf",
    "load_gguf_file",
    "load_gguf_tokenizer",
]
