"""Shared fixtures of the inference tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from inference.builder import build_chat_model
from inference.catalogue import CatalogueEntry, load_catalogue
from inference.local import LocalChatModel
from inference.protocol import GenerationParams

TINY_CATALOGUE = Path(__file__).resolve().parents[2] / "tests/data/tiny_catalogue.toml"
# Not in the shared tiny catalogue (other layers' tests count its models): the inference tests' third family.
TINY_QWEN2 = CatalogueEntry(slug="tiny-qwen2", name="Tiny Qwen2 (random)", family="qwen2",
                            source="tiny:qwen2", template="chatml", weights="float32", context_length=1024,
                            sampling=GenerationParams(max_new_tokens=16))


@pytest.fixture(scope="module", params=["tiny-llama", "tiny-gemma3", "tiny-qwen2"])
def model(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalChatModel]:
    """Each tiny random model (Llama, Gemma 3, Qwen2), built once per test module (no warm-up)."""
    entries = {e.slug: e for e in [*load_catalogue(TINY_CATALOGUE), TINY_QWEN2]}
    built = build_chat_model(entries[request.param], cache_dir=tmp_path_factory.mktemp("c"), warm_up=False)
    assert isinstance(built, LocalChatModel) and built.engine is not None, getattr(built, "engine_note", "")
    yield built
