"""ARENA_MESH end to end: the Arena serves a battle from tiny models sharded on the 8 virtual CPU devices
(tests/conftest.py), and the start-up screen and About page say where the models run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import jax
import pytest

from tests.webapp.conftest import BUDGET_MB, TINY_CATALOGUE, open_app
from tests.webapp.test_arena_app import ARENA, TURN_1, _battle, _send


def test_a_battle_on_the_sharded_pool(arena_env: Callable[..., str], data_dir: Path) -> None:
    if len(jax.devices()) < 8:
        pytest.skip("needs XLA_FLAGS=--xla_force_host_platform_device_count=8 (tests/conftest.py sets it)")
    url = arena_env(mesh="auto")
    from webapp import resources

    pool = resources.pool(str(TINY_CATALOGUE), BUDGET_MB, str(data_dir), "auto")
    assert pool.mesh is not None and pool.mesh.devices.size == 8
    for slug in pool.ready_slugs():
        model = pool._workers[slug].model  # the served model behind the pool's queue
        assert model.engine is not None and not model.engine.spec.native_kernels  # XLA on the mesh
        weights = model.engine.params["layers"][0]
        assert any(not weights[name].sharding.is_fully_replicated for name in ("gate_up", "down")), {
            name: (w.shape, w.sharding) for name, w in weights.items() if hasattr(w, "sharding")}

    at = open_app(ARENA)
    _send(at, TURN_1)
    battle = _battle(url, at)
    for side in "ab":
        (reply,) = battle.sides[side].replies
        assert reply.error is None and reply.content
    at.button(key="anonymous:vote_a").click().run()
    assert _battle(url, at).status == "voted"
    about = open_app("pages/about.py")
    assert any("8 CPU devices" in str(c.value) for c in about.caption)
