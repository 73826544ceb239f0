"""When a model starts from the fast engine's stored weights, and where they are kept.

The first start of a GGUF model reads the file into a keras-hub backbone and converts its weights to
the fast engine's format (:mod:`inference.engine.weights`): for Qwen2.5-Coder-1.5B a minute and a half
and a 12 GB peak. The builder then stores the converted weights (:mod:`inference.engine.stored_weights`)
under ``<cache_dir>/converted/<file>-<format>/<key>``; every later start reads them back and builds only
the tokenizer, with no backbone at all.

The key covers everything the converted weights depend on: the file (its resolved path, size and
modification time), the weight format, the backbone dtype, the source of the code that reads and
converts (the family loaders, the GGUF reader, the conversion, the store itself) and the versions of
jax, keras and keras-hub. Any change gives a new key; storing it removes the older ones of the same
file and format, so each keeps one folder. ``ARENA_WEIGHT_STORE=off`` turns storing and reading off.

Starts of the same file and format, in other processes or threads, take turns (:func:`taking_turns`, a
lock file beside the folder): one that finds another converting waits and then reads what it stored,
rather than converting beside it (two of Qwen2.5-Coder-1.5B's 12 GB peaks at once do not fit 24 GB).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import shutil
from contextlib import AbstractContextManager
from pathlib import Path

from inference.engine import stored_weights, turns
from inference.engine.stored_weights import StoredWeights
from inference.families.base import DecoderSpec, LoadedModel
from inference.formats.gguf_reader import GGUFFile
from inference.split_weights import Progress

ENV = "ARENA_WEIGHT_STORE"
FOLDER = "converted"
_PACKAGE = Path(__file__).resolve().parent
# The source the stored weights depend on: a change to any of it converts the model again. (Not the
# kernels' wrapper, engine/kernels/__init__.py: the conversion has not used it since the block formats
# moved out of it, and a change there converted every model again for nothing.) The formats' names and
# containers (formats/matrices.py) were part of engine/weights.py, the decoder spec (families/base.py)
# too: both still count.
_CODE = ("families", "formats/gguf_reader.py", "formats/matrices.py", "formats/block_formats.py",
         "engine/weights.py", "engine/stored_weights.py", "weight_store.py")
log = logging.getLogger(__name__)


def store_enabled() -> bool:
    """``$ARENA_WEIGHT_STORE``: ``on`` (the default) or ``off``."""
    text = os.environ.get(ENV, "on").strip().lower()
    if text not in ("on", "off"):
        raise ValueError(f"{ENV}={text!r}: give on or off")
    return text == "on"


def store_directory(
    cache_dir: Path, file: Path, *, weight_format: str, dtype: str, six_bit: str = "q6"
) -> Path:
    """The folder a model's converted weights are stored in (whether or not it exists); ``six_bit``: what a
    q4 model's 6-bit matrices are in (``q8``: a folder of its own, so a machine that switches keeps both)."""
    stat = file.stat()
    parts = (str(stored_weights.STORE_VERSION), str(file.resolve()), str(stat.st_size), str(stat.st_mtime_ns),
             weight_format, dtype, six_bit, code_fingerprint(), *_library_versions())
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
    variant = "" if six_bit == "q6" else f"-six-bit-{six_bit}"
    return cache_dir / FOLDER / f"{file.stem}-{weight_format}{variant}" / key


def taking_turns(directory: Path, progress: Progress | None = None) -> AbstractContextManager[None]:
    """Hold the lock of ``directory``'s file and format (``<file>-<format>.lock`` beside its folder) while
    its store is read, or the model converted and stored. Where another start holds it, log it, tell
    ``progress("wait", 0.0)`` and wait for it (:func:`inference.engine.turns.taking_turns`)."""
    def waiting() -> None:
        log.info("another start is converting %s: waiting for it, then reading what it stores",
                 directory.parent.name)
        if progress is not None:
            progress("wait", 0.0)

    return turns.taking_turns(directory.parent.with_name(f"{directory.parent.name}.lock"), on_wait=waiting)


@functools.cache
def code_fingerprint() -> str:
    """A hash of the source files the converted weights depend on (:data:`_CODE`)."""
    digest = hashlib.sha256()
    for name in _CODE:
        path = _PACKAGE / name
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        for source in files:
            digest.update(str(source.relative_to(_PACKAGE)).encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()[:16]


def _library_versions() -> tuple[str, ...]:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("jax", "jaxlib", "keras", "keras-hub"):
        try:
            found.append(f"{name}={version(name)}")
        except PackageNotFoundError:
            found.append(f"{name}=none")
    return tuple(found)


def loaded_from_store(file: Path, stored: StoredWeights) -> LoadedModel:
    """A LoadedModel with no backbone: the tokenizer read from ``file``, the rest from the store."""
    from inference.families import load_gguf_tokenizer

    extra = stored.extra
    return LoadedModel(family=str(extra["family"]), backbone=None,
                       tokenizer=load_gguf_tokenizer(GGUFFile(file)),
                       context_length=int(extra["context_length"]), metadata=dict(extra["metadata"]))


def store(directory: Path, loaded: LoadedModel, spec: DecoderSpec, params: dict[str, object]) -> None:
    """Store a model's converted weights (with what :func:`loaded_from_store` needs back), and remove the
    older stores of the same file and format. A failure (a full disk) is logged, never raised: the model
    still serves, and the next start converts again."""
    extra = {"family": loaded.family, "context_length": loaded.context_length,
             "metadata": _json_metadata(loaded.metadata)}
    try:
        size = stored_weights.save(directory, spec, params, extra=extra)
    except (OSError, TypeError) as exc:
        log.warning("could not store the converted weights in %s: %s", directory, exc)
        return
    for sibling in directory.parent.iterdir():
        if sibling != directory:
            shutil.rmtree(sibling, ignore_errors=True)
    log.info("stored %d MB of converted weights in %s", size // 2**20, directory)


def _json_metadata(metadata: dict[str, object]) -> dict[str, object]:
    """The loader's metadata, its JSON-able values (every one a loader writes is a str, number, bool or
    None)."""
    return {key: value for key, value in metadata.items()
            if value is None or isinstance(value, str | int | float | bool)}
