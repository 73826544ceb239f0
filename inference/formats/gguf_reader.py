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

import math
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
        except GGUFError:
            raise
        except (ValueError, IndexError, KeyError, TypeError, ArithmeticError, struct.error, OSError,
                RecursionError, MemoryError) as exc:
            # _parse checks every value against the file; the wide net is for what a hostile header may
            # still find: a parse error is always a GGUFError (ArithmeticError: overflow, division).
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


_MAX_DIMS = 4  # GGML_MAX_DIMS
_MAX_NESTING = 8  # arrays of arrays deeper than this are refused (llama.cpp writes none)
_MAX_ALIGNMENT = 1 << 20
_MAX_ELEMENTS = 1 << 62  # of one tensor
_MIN_KV_BYTES = 8 + 4 + 1  # a key's length, its value's type, the smallest value
_MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8  # name length, dims count, type, offset


class _Cursor:
    """Reads the header's values from ``buffer``; every read is checked against the end of the file, so
    a hostile length or count raises ``ValueError`` instead of reading past it or allocating for it."""

    def __init__(self, buffer: Any) -> None:
        self.buffer, self.at, self.size = buffer, 0, len(buffer)

    def need(self, nbytes: int, what: str) -> None:
        if nbytes < 0 or nbytes > self.size - self.at:
            raise ValueError(f"{what} at byte {self.at} runs past the end of the file ({self.size} bytes)")

    def unpack(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        self.need(size, "a value")
        (value,) = struct.unpack_from(fmt, self.buffer, self.at)
        self.at += size
        return value

    def string(self) -> str:
        length = self.unpack("<Q")
        self.need(length, f"a string of {length} bytes")
        try:
            text = bytes(self.buffer[self.at : self.at + length]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"the string at byte {self.at} is not UTF-8") from exc
        self.at += length
        return text

    def value(self, kind: int, depth: int = 0) -> Any:
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind != _ARRAY:
            raise ValueError(f"unknown GGUF value type {kind} at byte {self.at}")
        if depth >= _MAX_NESTING:
            raise ValueError(f"arrays nested more than {_MAX_NESTING} deep at byte {self.at}")
        item, count = self.unpack("<I"), self.unpack("<Q")
        if item in _NUMPY:  # numbers: one vectorised read
            dtype = np.dtype(_NUMPY[item])
            self.need(count * dtype.itemsize, f"an array of {count} values")
            values = np.frombuffer(self.buffer, dtype=dtype, count=count, offset=self.at)
            self.at += values.nbytes
            return values.tolist()
        if item not in (_STRING, _ARRAY):
            raise ValueError(f"unknown GGUF array item type {item} at byte {self.at}")
        self.need(count * 8, f"an array of {count} items")  # a string or an array takes 8 bytes or more
        return [self.value(item, depth + 1) for _ in range(count)]


def _parse(path: Path) -> tuple[dict[str, Any], dict[str, _TensorInfo]]:
    """Metadata (decoded values) and the tensor index of a GGUF file (versions 2 and 3).

    Any bad header value (a count, length, type, dimension, alignment or offset that does not fit the
    file) raises ``ValueError``, which the caller reports as :class:`GGUFError`."""
    with path.open("rb") as handle:
        buffer = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    cursor = _Cursor(memoryview(buffer))
    cursor.at = 4  # past the magic, checked by the caller
    version = cursor.unpack("<I")
    if version not in (2, 3):
        raise ValueError(f"GGUF version {version} is not supported (2 and 3 are)")
    tensor_count, kv_count = cursor.unpack("<Q"), cursor.unpack("<Q")
    cursor.need(kv_count * _MIN_KV_BYTES + tensor_count * _MIN_TENSOR_INFO_BYTES,
                f"a header of {kv_count} metadata keys and {tensor_count} tensors")
    fields: dict[str, Any] = {}
    for _ in range(kv_count):
        key = cursor.string()
        if key in fields:
            raise ValueError(f"metadata key {key!r} appears twice")
        fields[key] = cursor.value(cursor.unpack("<I"))
    index = [_tensor_entry(cursor) for _ in range(tensor_count)]
    alignment = _alignment(fields.get("general.alignment", 32))
    start = -(-cursor.at // alignment) * alignment
    tensors: dict[str, _TensorInfo] = {}
    for name, dims, kind, offset in index:
        if name in tensors:
            raise ValueError(f"tensor {name!r} appears twice")
        if offset % alignment:
            raise ValueError(f"tensor {name!r}: offset {offset} is not a multiple of {alignment}")
        end = start + offset + _stored_bytes(name, dims, kind)
        if end > cursor.size:
            raise ValueError(f"tensor {name!r} ends at byte {end}, past the end of the file ({cursor.size})")
        tensors[name] = _TensorInfo(buffer, dims, kind, start + offset)
    return fields, tensors


def _tensor_entry(cursor: _Cursor) -> tuple[str, tuple[int, ...], Any, int]:
    """One tensor's name, dimensions (GGUF order), type and offset from the data section's start."""
    from gguf import GGMLQuantizationType

    name = cursor.string()
    n_dims = cursor.unpack("<I")
    if n_dims > _MAX_DIMS:
        raise ValueError(f"tensor {name!r} has {n_dims} dimensions (at most {_MAX_DIMS})")
    dims = tuple(cursor.unpack("<Q") for _ in range(n_dims))
    if math.prod(dims) > _MAX_ELEMENTS:
        raise ValueError(f"tensor {name!r}: dimensions {dims} are absurd")
    type_id = cursor.unpack("<I")
    try:
        kind = GGMLQuantizationType(type_id)
    except ValueError:
        raise ValueError(f"tensor {name!r} has unknown type {type_id}") from None
    return name, dims, kind, cursor.unpack("<Q")


def _stored_bytes(name: str, dims: tuple[int, ...], kind: Any) -> int:
    """How many bytes tensor ``name`` takes in the file; its first dimension must fill whole blocks."""
    from gguf import GGML_QUANT_SIZES

    if kind not in GGML_QUANT_SIZES:
        raise ValueError(f"tensor {name!r} has type {kind.name}, whose size is unknown")
    block, size = GGML_QUANT_SIZES[kind]
    if dims and dims[0] % block:
        raise ValueError(f"tensor {name!r}: a row of {dims[0]} values is not whole {kind.name} blocks")
    return math.prod(dims) // block * size


def _alignment(value: Any) -> int:
    """``general.alignment``: a power of two from 1 to :data:`_MAX_ALIGNMENT`."""
    if (not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= _MAX_ALIGNMENT
            or value & (value - 1)):
        raise ValueError(f"general.alignment is {value!r}; use a power of two from 1 to {_MAX_ALIGNMENT}")
    return value
