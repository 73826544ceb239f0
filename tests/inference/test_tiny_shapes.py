"""``tiny:SHAPE`` sources: random weights in a real model's shape (what ``tools/gpu_check.sh`` times)."""

from __future__ import annotations

from inference.tiny import SHAPES, load_tiny


def test_the_smollm2_shape_has_the_real_models_parameter_count() -> None:
    loaded = load_tiny("smollm2-135m", dtype="bfloat16")
    assert loaded.family == "llama" and loaded.metadata["source"] == "tiny:smollm2-135m"
    assert loaded.metadata["parameters"] == 134_515_008  # SmolLM2-135M-Instruct, tied head
    assert loaded.tokenizer.encode("hi") == [104, 105]  # the byte tokenizer: no model file needed


def test_every_shape_names_a_family_with_a_byte_tokenizer() -> None:
    for shape, (family, config) in SHAPES.items():
        loaded_family = load_tiny(family).family  # the family's tiny model builds: its tokenizer exists
        assert loaded_family == family, shape
        assert config["vocabulary_size"] > 256, "a real vocabulary, larger than the byte tokenizer's"
