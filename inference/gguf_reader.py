"""Read a GGUF file's metadata and tensors.

The family loaders never touch ``gguf`` directly: they ask this module for metadata values by their
llama.cpp key (``llama.block_count``) and for tensors by name, already dequantized to float32 by
``gguf.quants.dequantize`` (no home-made dequantization) and shaped the way PyTorch and the rest of
the world write them, i.e. ``(out_features, in_features)`` - the reverse of the GGUF shape field.

The header (metadata and tensor index) is parsed here rather than by ``gguf.GGUFReader``, which builds
a numpy view per array element: 6 s for SmolLM2's 49k-token vocabulary and ~12 s for Gemma 3's 262k,
most of a model's cold start. Read straight from a bytes buffer it takes a fraction of a second; the
test suite checks both readers agree on every field and tensor of our GGUF files.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator
from dataclasses import dataclass
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
            self._fields, self._tensors = _parse(self.path)
        except (ValueError, IndexError, struct.error, OSError) as exc:
            raise GGUFError(f"cannot parse GGUF file {self.path}: {exc}") from exc

    # ---- metadata -------------------------------------------------------------------------------

    @property
    def architecture(self) -> str:
        return str(self.get("general.architecture"))

    def has(self, key: str) -> bool:
        return key in self._fields

    def get(self, key: str, default: Any = ...) -> Any:
        """The value stored under ``key`` (scalars, strings and lists decoded); ``default`` if absent."""
        if key not in self._fields:
            if default is ...:
                raise GGUFError(f"{self.path.name}: metadata key {key!r} is missing")
            return default
        value = self._fields[key]
        return list(value) if isinstance(value, list) else value

    def keys(self) -> Iterator[str]:
        return iter(self._fields)

    def scalar_metadata(self) -> dict[str, Any]:
        """All metadata except the big arrays (vocabulary, merges, scores): for listings and logs."""
        return {key: value for key, value in self._fields.items()
                if not (isinstance(value, list) and len(value) > 64)}

    # ---- tensors --------------------------------------------------------------------------------

    @property
    def tensor_names(self) -> list[str]:
        return list(self._tensors)

    def has_tensor(self, name: str) -> bool:
        return name in self._tensors

    def tensor_type(self, name: str) -> str:
        return self._tensor(name).kind.name

    def parameter_count(self) -> int:
        return sum(info.elements for info in self._tensors.values())

    def tensor(self, name: str) -> np.ndarray:
        """Tensor ``name`` dequantized to float32, shaped ``(out, in)`` (reverse of the GGUF shape)."""
        from gguf.quants import dequantize

        info = self._tensor(name)
        array = dequantize(info.data(), info.kind)
        expected = tuple(reversed(info.dims))
        if tuple(array.shape) != expected:
            array = array.reshape(expected)
        if info.kind.name in _ITEM_TYPES:
            # An array of its own: an unquantized tensor comes back from ``dequantize`` as a view of the
            # mapped file, and JAX's CPU client aliases such host memory instead of copying it, so one
            # norm vector kept by a model would pin the whole mapping (every page the load touched, the
            # size of the file) in the process's RSS for as long as the model lives.
            return np.array(array, dtype=np.float32, copy=True)
        return np.asarray(array, dtype=np.float32)

    def _tensor(self, name: str) -> _TensorInfo:
        try:
            return self._tensors[name]
        except KeyError:
            raise GGUFError(f"{self.path.name}: tensor {name!r} is missing") from None


# ---- the header -------------------------------------------------------------------------------------

# GGUF value types -> struct format (little-endian files; llama.cpp writes them so).
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q",
            12: "<d"}
_NUMPY = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?", 10: "<u8",
          11: "<i8", 12: "<f8"}
_STRING, _ARRAY = 8, 9
_ITEM_TYPES = {"F16": np.float16, "F32": np.float32, "F64": np.float64, "I8": np.int8, "I16": np.int16,
               "I32": np.int32, "I64": np.int64}


@dataclass(frozen=True)
class _TensorInfo:
    """Where a tensor lies in the memory-mapped file and how it is stored."""

    buffer: Any
    dims: tuple[int, ...]  # GGUF order: the fastest-varying (input) dimension first
    kind: Any  # gguf.GGMLQuantizationType
    offset: int

    @property
    def elements(self) -> int:
        return int(np.prod(self.dims, dtype=np.int64))

    def data(self) -> np.ndarray:
        """The stored values as ``gguf.quants.dequantize`` takes them (bytes rows for quantized types)."""
        from gguf import GGML_QUANT_SIZES
        from gguf.quants import quant_shape_to_byte_shape

        shape = tuple(reversed(self.dims))
        item = _ITEM_TYPES.get(self.kind.name)
        if item is not None:
            values = np.frombuffer(self.buffer, dtype=item, count=self.elements, offset=self.offset)
            return values.reshape(shape)
        block, size = GGML_QUANT_SIZES[self.kind]
        count = self.elements // block * size
        raw = np.frombuffer(self.buffer, dtype=np.uint8, count=count, offset=self.offset)
        return raw.reshape(quant_shape_to_byte_shape(shape, self.kind))


class _Cursor:
    def __init__(self, buffer: Any) -> None:
        self.buffer, self.at = buffer, 0

    def unpack(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.buffer, self.at)
        self.at += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        length = self.unpack("<Q")
        text = bytes(self.buffer[self.at : self.at + length]).decode("utf-8")
        self.at += length
        return text

    def value(self, kind: int) -> Any:
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind != _ARRAY:
            raise ValueError(f"unknown GGUF value type {kind} at byte {self.at}")
        item, count = self.unpack("<I"), self.unpack("<Q")
        if item in _NUMPY:  # numbers: one vectorised read
            values = np.frombuffer(self.buffer, dtype=_NUMPY[item], count=count, offset=self.at)
            self.at += values.nbytes
            return values.tolist()
        return [self.value(item) for _ in range(count)]


def _parse(path: Path) -> tuple[dict[str, Any], dict[str, _TensorInfo]]:
    """Metadata (decoded values) and the tensor index of a GGUF file (versions 2 and 3)."""
    from gguf import GGMLQuantizationType

    with path.open("rb") as handle:
        buffer = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    cursor = _Cursor(memoryview(buffer))
    cursor.at = 4  # past the magic, checked by the caller
    version = cursor.unpack("<I")
    if version not in (2, 3):
        raise ValueError(f"GGUF version {version} is not supported (2 and 3 are)")
    tensor_count, kv_count = cursor.unpack("<Q"), cursor.unpack("<Q")
    fields: dict[str, Any] = {}
    for _ in range(kv_count):
        key = cursor.string()
        fields[key] = cursor.value(cursor.unpack("<I"))
    index = []
    for _ in range(tensor_count):
        name = cursor.string()
        dims = tuple(cursor.unpack("<Q") for _ in range(cursor.unpack("<I")))
        index.append((name, dims, GGMLQuantizationType(cursor.unpack("<I")), cursor.unpack("<Q")))
    alignment = int(fields.get("general.alignment", 32))
    start = -(-cursor.at // alignment) * alignment
    tensors: dict[str, _TensorInfo] = {}
    for name, dims, kind, offset in index:
        if name in tensors:
            raise ValueError(f"tensor {name!r} appears twice")
        tensors[name] = _TensorInfo(buffer, dims, kind, start + offset)
    return fields, tensors
