"""Shared fixtures of the inference tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from inference.builder import build_chat_model
from inference.catalogue import load_catalogue
from inference.local import LocalChatModel

TINY_CATALOGUE = Path(__file__).resolve().parents[2] / "tests/data/tiny_catalogue.toml"


@pytest.fixture(scope="module", params=["tiny-llama", "tiny-gemma3"])
def model(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalChatModel]:
    """Each tiny random model of the test catalogue, built once per test module (no warm-up)."""
    entries = {e.slug: e for e in load_catalogue(TINY_CATALOGUE)}
    built = build_chat_model(entries[request.param], cache_dir=tmp_path_factory.mktemp("c"), warm_up=False)
    assert isinstance(built, LocalChatModel) and built.engine is not None, getattr(built, "engine_note", "")
    yield built
