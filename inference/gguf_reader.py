"""Read a GGUF file's metadata and tensors through the ``gguf`` package.

The family loaders never touch ``gguf`` directly: they ask this module for metadata values by their
llama.cpp key (``llama.block_count``) and for tensors by name, already dequantized to float32 by
``gguf.quants.dequantize`` (no home-made dequantization) and shaped the way PyTorch and the rest of
the world write them, i.e. ``(out_features, in_features)`` - the reverse of the GGUF shape field.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

# Token types as llama.cpp writes them in ``tokenizer.ggml.token_type``.
TOKEN_NORMAL = 1
TOKEN_UNKNOWN = 2
TOKEN_CONTROL = 3
TOKEN_USER_DEFINED = 4
TOKEN_UNUSED = 5
TOKEN_BYTE = 6

GGUF_MAGIC = b"GGUF"


class GGUFError(ValueError):
    """A GGUF file that cannot be read, or lacks a key or tensor a loader needs."""


class GGUFFile:
    """One opened GGUF file: metadata by key, tensors by name (dequantized lazily, one at a time).

    The file is memory-mapped by ``gguf.GGUFReader``; a tensor is only dequantized when asked for, so
    a loader can copy weights into a backbone layer by layer without holding two float32 copies of
    the whole model.
    """

    def __init__(self, path: Path) -> None:
        import gguf  # deferred: only GGUF-backed models need it

        self.path = Path(path)
        if not self.path.is_file():
            raise GGUFError(f"GGUF file not found: {self.path}")
        try:
            with self.path.open("rb") as handle:
                magic = handle.read(4)
        except OSError as exc:
            raise GGUFError(f"cannot read {self.path}: {exc.strerror}") from exc
        if magic != GGUF_MAGIC:
            raise GGUFError(f"{self.path} is not a GGUF file (magic {magic!r}, expected {GGUF_MAGIC!r})")
        try:
            self._reader = gguf.GGUFReader(self.path)
        except Exception as exc:  # gguf raises ValueError/IndexError/struct.error on a damaged file
            raise GGUFError(f"cannot parse GGUF file {self.path}: {exc}") from exc
        self._tensors = {tensor.name: tensor for tensor in self._reader.tensors}

    # ---- metadata -------------------------------------------------------------------------------

    @property
    def architecture(self) -> str:
        return str(self.get("general.architecture"))

    def has(self, key: str) -> bool:
        return key in self._reader.fields

    def get(self, key: str, default: Any = ...) -> Any:
        """The value stored under ``key`` (scalars, strings and lists decoded); ``default`` if absent."""
        field = self._reader.fields.get(key)
        if field is None:
            if default is ...:
                raise GGUFError(f"{self.path.name}: metadata key {key!r} is missing")
            return default
        return field.contents()

    def keys(self) -> Iterator[str]:
        return iter(self._reader.fields)

    def scalar_metadata(self) -> dict[str, Any]:
        """All metadata except the big arrays (vocabulary, merges, scores): for listings and logs."""
        out: dict[str, Any] = {}
        for key, field in self._reader.fields.items():
            if key.startswith("GGUF.") or len(field.data) > 64:
                continue
            out[key] = field.contents()
        return out

    # ---- tensors --------------------------------------------------------------------------------

    @property
    def tensor_names(self) -> list[str]:
        return list(self._tensors)

    def has_tensor(self, name: str) -> bool:
        return name in self._tensors

    def tensor_type(self, name: str) -> str:
        return self._tensor(name).tensor_type.name

    def tensor(self, name: str) -> np.ndarray:
        """Tensor ``name`` dequantized to float32, shaped ``(out, in)`` (reverse of the GGUF shape)."""
        from gguf.quants import dequantize

        info = self._tensor(name)
        array = dequantize(info.data, info.tensor_type)
        expected = tuple(int(d) for d in reversed(info.shape.tolist()))
        if tuple(array.shape) != expected:
            array = array.reshape(expected)
        return np.asarray(array, dtype=np.float32)

    def _tensor(self, name: str) -> Any:
        try:
            return self._tensors[name]
        except KeyError:
            raise GGUFError(f"{self.path.name}: tensor {name!r} is missing") from None
