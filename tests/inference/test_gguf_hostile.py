"""A GGUF header built to break the parser raises GGUFError, and nothing else.

Headers are written byte by byte (``struct``) so that each probe holds exactly one bad value: an
alignment of 0, counts and lengths past the end of the file, unknown types, nesting, dimensions. Then a
real tiny file from ``gguf.GGUFWriter`` is cut at every length and corrupted at seeded random bytes: each
variant either opens or raises GGUFError.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from inference.formats.gguf_reader import GGUFError, GGUFFile

U8, I32, U32, F32, BOOL, STRING, ARRAY, U64 = 0, 5, 4, 6, 7, 8, 9, 10
F32_TENSOR = 0  # GGMLQuantizationType.F32


def text(value: bytes | str) -> bytes:
    raw = value.encode() if isinstance(value, str) else value
    return struct.pack("<Q", len(raw)) + raw


def kv(key: str, kind: int, payload: bytes) -> bytes:
    return text(key) + struct.pack("<I", kind) + payload


def tensor_info(name: str, dims: tuple[int, ...], kind: int = F32_TENSOR, offset: int = 0) -> bytes:
    return (text(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
            + struct.pack("<II", kind, 0)[:4] + struct.pack("<Q", offset))


def gguf_bytes(
    kvs: list[bytes], tensors: Sequence[bytes] = (), *, version: int = 3, kv_count: int | None = None,
    tensor_count: int | None = None, data: bytes = b"\0" * 64,
) -> bytes:
    """A whole file: header, metadata, tensor index, padding to 32 and ``data``."""
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors) if tensor_count is None else tensor_count,
                                 len(kvs) if kv_count is None else kv_count)
    body = head + b"".join(kvs) + b"".join(tensors)
    return body + b"\0" * (-len(body) % 32) + data


def open_bytes(tmp_path: Path, content: bytes) -> GGUFFile:
    path = tmp_path / "probe.gguf"
    path.write_bytes(content)
    return GGUFFile(path)


ARCH = kv("general.architecture", STRING, text("llama"))
DEEP_ARRAYS = struct.pack("<IQ", ARRAY, 1) * 5000 + struct.pack("<IQ", U8, 0)


def test_a_hand_built_header_opens(tmp_path: Path) -> None:
    """The builder itself is right: the same file without a bad value parses."""
    gguf = open_bytes(tmp_path, gguf_bytes([ARCH, kv("general.alignment", U32, struct.pack("<I", 32))],
                                           [tensor_info("w", (4, 2))]))
    assert gguf.architecture == "llama" and gguf.get("general.alignment") == 32
    assert gguf.tensor("w").shape == (2, 4)


@pytest.mark.parametrize(("kind", "payload"), [
    (U32, struct.pack("<I", 0)),
    (I32, struct.pack("<i", -32)),
    (U32, struct.pack("<I", 3)),  # not a power of two
    (U32, struct.pack("<I", 2**31)),  # absurd
    (U64, struct.pack("<Q", 2**64 - 1)),
    (F32, struct.pack("<f", 32.0)),
    (BOOL, struct.pack("<?", True)),
    (STRING, text("32")),
    (ARRAY, struct.pack("<IQ", U32, 1) + struct.pack("<I", 32)),
], ids=["0", "-32", "3", "2**31", "2**64-1", "float", "bool", "string", "array"])
def test_a_bad_alignment_is_a_gguf_error(tmp_path: Path, kind: int, payload: bytes) -> None:
    content = gguf_bytes([ARCH, kv("general.alignment", kind, payload)], [tensor_info("w", (4, 2))])
    with pytest.raises(GGUFError, match="alignment"):
        open_bytes(tmp_path, content)


@pytest.mark.parametrize("content", [
    pytest.param(gguf_bytes([ARCH], version=1), id="version 1"),
    pytest.param(gguf_bytes([ARCH], version=2**32 - 1), id="version huge"),
    pytest.param(gguf_bytes([ARCH], kv_count=2**64 - 1), id="kv count huge"),
    pytest.param(gguf_bytes([ARCH], tensor_count=2**63), id="tensor count huge"),
    pytest.param(gguf_bytes([ARCH], kv_count=3), id="kv count past the end"),
    pytest.param(gguf_bytes([struct.pack("<Q", 2**64 - 1) + b"key"]), id="key length huge"),
    pytest.param(gguf_bytes([struct.pack("<Q", 10_000) + b"key"]), id="key length past the end"),
    pytest.param(gguf_bytes([kv("k", STRING, struct.pack("<Q", 2**63) + b"v")]), id="string length huge"),
    pytest.param(gguf_bytes([text(b"\xff\xfe") + struct.pack("<I", U8) + b"\1"]), id="key not utf-8"),
    pytest.param(gguf_bytes([kv("k", STRING, text(b"\xed\xa0\x80"))]), id="value a utf-8 surrogate"),
    pytest.param(gguf_bytes([kv("k", 99, b"\0" * 8)]), id="unknown value type"),
    pytest.param(gguf_bytes([kv("k", 2**32 - 1, b"")]), id="value type huge"),
    pytest.param(gguf_bytes([kv("k", ARRAY, struct.pack("<IQ", U32, 2**64 - 1))]), id="number array huge"),
    pytest.param(gguf_bytes([kv("k", ARRAY, struct.pack("<IQ", U64, 2**61))]), id="u64 array past the end"),
    pytest.param(gguf_bytes([kv("k", ARRAY, struct.pack("<IQ", STRING, 2**62))]), id="string array huge"),
    pytest.param(gguf_bytes([kv("k", ARRAY, struct.pack("<IQ", 77, 1) + b"\0" * 8)]), id="unknown item type"),
    pytest.param(gguf_bytes([kv("k", ARRAY, DEEP_ARRAYS)]), id="arrays nested 5000 deep"),
    pytest.param(gguf_bytes([ARCH, ARCH]), id="duplicate key"),
    pytest.param(gguf_bytes([ARCH], [text("w") + struct.pack("<I", 2**32 - 1)]), id="dims count huge"),
    pytest.param(gguf_bytes([ARCH], [tensor_info("w", (1, 1, 1, 1, 1))]), id="five dims"),
    pytest.param(gguf_bytes([ARCH], [tensor_info("w", (2**63, 2**63))]), id="dims overflow"),
    pytest.param(gguf_bytes([ARCH], [tensor_info("w", (2**40, 2**20))]), id="tensor past the end"),
    pytest.param(gguf_bytes([ARCH], [tensor_info("w", (4, 2), kind=9999)]), id="unknown tensor type"),
    pytest.param(gguf_bytes([ARCH], [tensor_info("w", (4, 2), offset=2**64 - 32)]), id="offset huge"),
    pytest.param(gguf_bytes([ARCH], [tensor_info("w", (4, 2), offset=4)]), id="offset not aligned"),
    pytest.param(gguf_bytes([ARCH], [tensor_info("w", (33, 1), kind=8)]), id="q8_0 row not whole blocks"),
    pytest.param(gguf_bytes([ARCH], [tensor_info("w", (4, 2)), tensor_info("w", (4, 2))]), id="tensor twice"),
    pytest.param(b"GGUF", id="magic only"),
    pytest.param(b"GGUF" + struct.pack("<I", 3) + b"\1", id="cut in the counts"),
])
def test_a_bad_header_value_is_a_gguf_error(tmp_path: Path, content: bytes) -> None:
    with pytest.raises(GGUFError, match="cannot parse GGUF file"):
        open_bytes(tmp_path, content)


def _real_tiny_file(path: Path) -> bytes:
    """A file as llama.cpp's writer lays it out: scalars, strings, arrays (nested too), two tensors."""
    import gguf

    writer = gguf.GGUFWriter(path, "llama")
    writer.add_uint32("t.u32", 7)
    writer.add_float32("t.f32", 0.5)
    writer.add_string("t.text", "héllo")
    writer.add_array("t.words", ["a", "bc", ""])
    writer.add_array("t.nested", [[1, 2], [3]])
    writer.add_array("t.floats", [0.5, 1.5])
    writer.add_tensor("w.f32", np.arange(16, dtype=np.float32).reshape(2, 8))
    stored = gguf.quants.quantize(np.ones((2, 32), dtype=np.float32), gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("w.q8", stored, raw_shape=stored.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path.read_bytes()


def _opens_or_gguf_error(path: Path, content: bytes) -> bool:
    """True when ``content`` opened (and its tensors read); False when it was refused with GGUFError."""
    path.write_bytes(content)
    try:
        gguf = GGUFFile(path)
    except GGUFError:
        return False
    for name in gguf.tensor_names:  # an accepted index reads within the file
        gguf.tensor(name)
    return True


def test_every_truncation_of_a_real_file_into_its_data_is_a_gguf_error(tmp_path: Path) -> None:
    content = _real_tiny_file(tmp_path / "real.gguf")
    assert _opens_or_gguf_error(tmp_path / "whole.gguf", content)
    probe = tmp_path / "cut.gguf"
    opened = [n for n in range(4, len(content)) if _opens_or_gguf_error(probe, content[:n])]
    # Only the writer's padding after the last tensor's data may go (less than one alignment of 32).
    assert opened == list(range(len(content) - len(opened), len(content))) and len(opened) < 32
    assert content[len(content) - len(opened):] == b"\0" * len(opened)


def test_corrupted_header_bytes_open_or_raise_gguf_error(tmp_path: Path) -> None:
    content = _real_tiny_file(tmp_path / "real.gguf")
    header_end = content.index(b"w.q8") + 64  # the tensor index ends a little after the last name
    rng = random.Random(39)
    probe = tmp_path / "corrupt.gguf"
    outcomes = []
    for _ in range(400):
        mutated = bytearray(content)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(8, header_end)  # past the magic and the version
            mutated[at] = rng.choice([0x00, 0xFF, 0x80, 0x7F, rng.randrange(256)])
        outcomes.append(_opens_or_gguf_error(probe, bytes(mutated)))
    assert False in outcomes  # the sweep did reach bad values
