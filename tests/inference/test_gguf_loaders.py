"""Fast: tiny random keras-hub backbones exported to GGUF the way llama.cpp writes them (see
``gguf_tiny``), loaded back with ``load_gguf``; the logits must be the original ones.

Drop the Q/K unpermute, the Gemma -1 on norms, or get a transpose wrong, and these fail in seconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from inference.families import UnsupportedArchitectureError, load_gguf
from inference.families.gguf_weights import WeightLayoutError
from inference.families.llama.loader import unpermute_rotary
from inference.formats.gguf_reader import GGUFError, GGUFFile
from tests.inference import gguf_tiny

TOKENS = np.array([[5, 40, 77, 130, 9, 200, 31, 64, 250, 12, 3, 99]], dtype=np.int32)


def tensors_of(path: Path) -> dict[str, np.ndarray]:
    gguf = GGUFFile(path)
    return {name: gguf.tensor(name) for name in gguf.tensor_names}


def assert_same_logits(loaded: object, original: object) -> None:
    np.testing.assert_allclose(logits(loaded, TOKENS), logits(original, TOKENS), atol=2e-5, rtol=1e-5)


def logits(backbone: object, token_ids: np.ndarray) -> np.ndarray:
    hidden = backbone({"token_ids": token_ids, "padding_mask": np.ones_like(token_ids)})  # type: ignore[operator]
    return np.asarray(backbone.token_embedding(hidden, reverse=True))  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def llama_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path]:
    original = gguf_tiny.tiny_llama_backbone(seed=1)
    return original, gguf_tiny.export_llama(original, tmp_path_factory.mktemp("llama") / "tiny.gguf")


@pytest.fixture(scope="module")
def gemma_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path]:
    original = gguf_tiny.tiny_gemma3_backbone(seed=2)
    return original, gguf_tiny.export_gemma3(original, tmp_path_factory.mktemp("gemma") / "tiny.gguf")


def test_unpermute_inverts_llama_cpp_permute() -> None:
    weight = np.arange(24 * 5, dtype=np.float32).reshape(24, 5)
    permuted = gguf_tiny.llama_cpp_permute(weight, 3)
    assert not np.array_equal(permuted, weight)
    np.testing.assert_array_equal(unpermute_rotary(permuted, heads=3), weight)


def test_llama_round_trip_gives_the_same_logits(llama_file: tuple[object, Path]) -> None:
    original, path = llama_file
    loaded = load_gguf(path)
    assert loaded.family == "llama" and loaded.backbone.tie_word_embeddings
    assert loaded.context_length == 256 and loaded.metadata["num_key_value_heads"] == 2
    assert_same_logits(loaded.backbone, original)


def test_gemma3_round_trip_gives_the_same_logits(gemma_file: tuple[object, Path]) -> None:
    """12 tokens through a window of 4 and a global 6th layer: sliding attention is exercised."""
    original, path = gemma_file
    loaded = load_gguf(path)
    assert loaded.family == "gemma3" and loaded.tokenizer.bos_id == 2
    flags = [loaded.backbone.get_layer(f"decoder_block_{i}").use_sliding_window_attention for i in range(6)]
    assert flags == [True] * 5 + [False]
    assert_same_logits(loaded.backbone, original)


def test_qwen2_round_trip_with_biases_gives_the_same_logits(tmp_path: Path) -> None:
    original = gguf_tiny.tiny_qwen2_backbone(seed=3)
    loaded = load_gguf(gguf_tiny.export_qwen2(original, tmp_path / "qwen2.gguf"))
    assert loaded.family == "qwen2" and type(loaded.backbone).__name__ == "QwenBackbone"
    assert not loaded.backbone.tie_word_embeddings and loaded.backbone.rope_max_wavelength == 1_000_000.0
    assert loaded.metadata["pre_tokenizer"] == "qwen2" and loaded.tokenizer.encode("2024") == [
        loaded.tokenizer.token_to_id(d) for d in "2024"]  # qwen2 splits digits one by one
    assert_same_logits(loaded.backbone, original)


def test_untied_output_head_in_bfloat16(tmp_path: Path) -> None:
    """A file with ``output.weight`` (Llama 3 8B style) gets its own LM head; dtype reaches every variable."""
    original = gguf_tiny.tiny_llama_backbone(seed=3, tied=False)
    loaded = load_gguf(gguf_tiny.export_llama(original, tmp_path / "untied.gguf"), dtype="bfloat16")
    embedding = loaded.backbone.get_layer("token_embedding")
    assert not loaded.backbone.tie_word_embeddings and loaded.metadata["dtype"] == "bfloat16"
    assert {v.dtype for v in loaded.backbone.weights} == {"bfloat16"}
    head = np.asarray(embedding.reverse_embeddings, dtype=np.float32)
    expected = np.asarray(original.get_layer("token_embedding").reverse_embeddings)
    np.testing.assert_allclose(head, expected, rtol=1e-2, atol=1e-2)  # bfloat16 keeps 8 bits of mantissa
    assert not np.allclose(head, np.asarray(embedding.embeddings, dtype=np.float32).T, atol=1e-2)


def test_unknown_dtype_is_refused(llama_file: tuple[object, Path]) -> None:
    with pytest.raises(ValueError, match="int4"):
        load_gguf(llama_file[1], dtype="int4")


def test_unsupported_architecture_names_it(tmp_path: Path) -> None:
    path = gguf_tiny.write_gguf(
        tmp_path / "x.gguf", arch="rwkv6", metadata=lambda w: w.add_block_count(1), tensors={}
    )
    with pytest.raises(UnsupportedArchitectureError, match="rwkv6"):
        load_gguf(path)


def test_wrong_shape_names_tensor_and_variable(tmp_path: Path, llama_file: tuple[object, Path]) -> None:
    """Metadata that disagrees with the tensors fails at load, naming both the tensor and the variable."""
    tokens, types, merges = gguf_tiny.bpe_vocabulary()

    def metadata(w: Any) -> None:
        w.add_block_count(2)
        w.add_embedding_length(32)
        w.add_feed_forward_length(40)  # the tensors are 48 wide
        w.add_head_count(4)
        w.add_head_count_kv(2)
        w.add_layer_norm_rms_eps(1e-5)
        gguf_tiny.write_bpe_tokenizer(w, tokens=tokens, types=types, merges=merges, pre="smollm")

    tensors = tensors_of(llama_file[1])
    path = gguf_tiny.write_gguf(tmp_path / "lie.gguf", arch="llama", metadata=metadata, tensors=tensors)
    with pytest.raises(WeightLayoutError, match=r"blk\.0\.ffn_gate\.weight.*expects"):
        load_gguf(path)


def test_gemma3_with_another_rope_base_is_refused(tmp_path: Path, gemma_file: tuple[object, Path]) -> None:
    """keras-hub hard-codes 10k/1M RoPE bases; a file saying otherwise must not load silently wrong."""

    def metadata(w: Any) -> None:
        w.add_block_count(6)
        w.add_embedding_length(16)
        w.add_feed_forward_length(24)
        w.add_head_count(2)
        w.add_rope_freq_base(10_000.0)
        gguf_tiny.write_sentencepiece_tokenizer(w)

    tensors = tensors_of(gemma_file[1])
    path = gguf_tiny.write_gguf(tmp_path / "rope.gguf", arch="gemma3", metadata=metadata, tensors=tensors)
    with pytest.raises(GGUFError, match="RoPE base"):
        load_gguf(path)


def test_llama_file_with_a_sentencepiece_vocabulary_points_to_presets(tmp_path: Path) -> None:
    def metadata(w: Any) -> None:
        w.add_block_count(1)
        w.add_embedding_length(16)
        w.add_feed_forward_length(24)
        w.add_head_count(2)
        w.add_layer_norm_rms_eps(1e-5)
        gguf_tiny.write_sentencepiece_tokenizer(w)

    path = gguf_tiny.write_gguf(tmp_path / "mistral.gguf", arch="llama", metadata=metadata, tensors={})
    with pytest.raises(GGUFError, match="keras-hub preset"):
        load_gguf(path)


def _agrees_with_the_gguf_package(path: Path, *, nested: tuple[str, ...] = ()) -> int:
    """Our header parser against ``gguf.GGUFReader``: every field's value, every tensor's stored bytes
    (``nested``: arrays of arrays, which gguf flattens and we keep nested)."""
    import gguf

    reference = gguf.GGUFReader(path)
    ours = GGUFFile(path)
    keys = [key for key in reference.fields if not key.startswith("GGUF.")]
    assert keys == list(ours.keys())
    for key in keys:
        value = ours.get(key)
        if key in nested:
            value = [item for inner in value for item in inner]
        assert value == reference.fields[key].contents(), key
    assert [t.name for t in reference.tensors] == ours.tensor_names
    for tensor in reference.tensors:
        assert ours.tensor_type(tensor.name) == tensor.tensor_type.name
        np.testing.assert_array_equal(ours._tensor(tensor.name).data(), tensor.data)
    assert ours.parameter_count() == sum(int(t.n_elements) for t in reference.tensors)
    return len(keys)


def test_header_parser_agrees_with_the_gguf_package(
    tmp_path: Path, llama_file: tuple[object, Path], gemma_file: tuple[object, Path]
) -> None:
    import gguf

    assert _agrees_with_the_gguf_package(llama_file[1]) > 10
    assert _agrees_with_the_gguf_package(gemma_file[1]) > 10
    # Quantized tensors, every scalar type and a nested array, as llama.cpp's writer lays them out.
    path = tmp_path / "mixed.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_uint8("t.u8", 7)
    writer.add_int16("t.i16", -3)
    writer.add_uint64("t.u64", 2**40)
    writer.add_float64("t.f64", 0.1)
    writer.add_bool("t.bool", True)
    writer.add_string("t.text", "héllo")
    writer.add_array("t.nested", [[1, 2], [3]])
    weights = np.random.default_rng(0).normal(size=(8, 64)).astype(np.float32)
    kinds = gguf.GGMLQuantizationType
    for kind in (kinds.Q8_0, kinds.BF16, kinds.F16):
        stored = gguf.quants.quantize(weights, kind)
        writer.add_tensor(f"w.{kind.name}", stored, raw_shape=stored.shape, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert _agrees_with_the_gguf_package(path, nested=("t.nested",)) >= 7
    assert GGUFFile(path).get("t.nested") == [[1, 2], [3]]
    for kind in ("Q8_0", "BF16", "F16"):
        np.testing.assert_allclose(GGUFFile(path).tensor(f"w.{kind}"), weights, atol=0.02)


def _mapped(path: Path) -> bool:
    return str(path.resolve()) in Path("/proc/self/maps").read_text()


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads the process's mappings (Linux)")
def test_a_loaded_model_does_not_keep_its_file_mapped(tmp_path: Path) -> None:
    """The weights are copies: once loaded, the file's mapping (and every page of it the load read,
    counted in the RSS) goes with the reader, however long the model lives. A float32 norm handed to
    JAX as a view of the mapping used to pin all of it (1.9 GB of RSS for the four bundled models)."""
    import gc

    path = gguf_tiny.export_llama(gguf_tiny.tiny_llama_backbone(seed=5), tmp_path / "tiny.gguf")
    gguf = GGUFFile(path)
    norm = gguf.tensor("blk.0.attn_norm.weight")
    assert gguf.tensor_type("blk.0.attn_norm.weight") == "F32" and norm.flags.owndata
    loaded = load_gguf(path)
    before = logits(loaded.backbone, TOKENS)
    assert _mapped(path)  # the reader above still maps it
    del gguf
    gc.collect()
    assert not _mapped(path)
    np.testing.assert_array_equal(logits(loaded.backbone, TOKENS), before)  # served from its own copies
