"""Shared fixtures of the inference tests."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def drain(scheduler: Any) -> None:
    """Tick a :class:`~inference.engine.batcher.SlotScheduler` until every request has ended."""
    for _ in range(1000):
        if not scheduler.busy:
            return
        scheduler.tick()
    raise AssertionError("scheduler never finished")


# ---- float32 tolerances ----------------------------------------------------------------------------------
# Two float32 evaluations of the same arithmetic that differ only in the order of their sums (another CPU's
# vector width, a sharded mesh's partial sums) round differently. The tolerances below follow from float32's
# unit roundoff, not from one CPU's bits: an AVX2 machine and an AVX-512 one pass the same tests.

UNIT_ROUNDOFF = 2.0**-24  # float32


def reordered_sum_bound(abs_sums: Any, terms: int) -> Any:
    """Rigorous: two float32 sums of the same ``terms`` products, in any two orders and each product
    rounded once or not at all (fused multiply-add or not), differ by at most (2 gamma_n + 2u) times the
    sum of the products' magnitudes, gamma_n = n u / (1 - n u) (Higham, *Accuracy and Stability of
    Numerical Algorithms*, 2nd ed., section 3.1). ``abs_sums`` is that sum, e.g. ``|x| @ |W|.T``."""
    gamma = terms * UNIT_ROUNDOFF / (1 - terms * UNIT_ROUNDOFF)
    return (2 * gamma + 2 * UNIT_ROUNDOFF) * abs_sums


def network_reorder_tolerance(*, terms: int, layers: int) -> float:
    """How far, relative to the largest logit, a decoder's float32 logits may move when only the order of
    its sums changes: each of the ``4 * layers + 1`` chained products (query/key/value, attention output,
    two MLP stages per layer, then the head) adds a random walk of ``terms`` roundings, about
    u sqrt(terms) of the values it sums; eight of those per stage is far outside what reordering does
    and far inside what a wrong weight or a wrong shard does (errors of the order of the logits)."""
    return 8 * UNIT_ROUNDOFF * math.sqrt(terms) * (4 * layers + 1)


def assert_logits_close(got: Any, want: Any, *, terms: int, layers: int) -> None:
    """``got`` equals ``want`` up to :func:`network_reorder_tolerance` of the largest ``|want|``."""
    import numpy as np

    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    scale = float(np.max(np.abs(want)))
    worst = float(np.max(np.abs(got - want)))
    limit = network_reorder_tolerance(terms=terms, layers=layers) * scale
    assert worst <= limit, f"max |difference| {worst:.3g} > {limit:.3g} (largest logit {scale:.3g})"
