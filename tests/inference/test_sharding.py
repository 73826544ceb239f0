"""Sharding over 8 virtual CPU devices (tests/conftest.py sets XLA_FLAGS before jax is imported).

Tiny random Llama 3 / Gemma 3 backbones whose sizes are divisible by 8 exactly where a weight should be
split and not where it should fall back or be replicated; the real SmolLM2 / Gemma 3 270M configs are
checked through the pure planner (no weights needed).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from inference.sharding import (
    MODEL_AXIS,
    ShardingError,
    backbone_config,
    build_backbone,
    cli_shardings,
    describe_shardings,
    family_distribution,
    layout_map_for,
    make_mesh,
    plan_layout,
    shard_backbone,
    weight_rules,
)
from tests.inference.conftest import assert_logits_close

jax = pytest.importorskip("jax")
keras = pytest.importorskip("keras")

DEVICES = 8

# The bundled models' real shapes (inference-notes.md).
SMOLLM2 = {"vocabulary_size": 49152, "num_layers": 30, "num_query_heads": 9, "num_key_value_heads": 3,
           "hidden_dim": 576, "intermediate_dim": 1536, "tie_word_embeddings": True}
GEMMA3_270M = {"vocabulary_size": 262144, "num_layers": 18, "num_query_heads": 4, "num_key_value_heads": 1,
               "hidden_dim": 640, "intermediate_dim": 2048, "head_dim": 256}

# Tiny: Llama with 3/1 heads and hidden 12 (attention has no dimension 8 divides: replicated), FFN 16 and
# vocabulary 64 (split), untied output embedding. Gemma 3 with 4/1 heads, hidden 32 (the fallback split),
# FFN 24 and vocabulary 100 (not divisible: those weights fall back to the hidden dimension).
TINY_LLAMA = {"vocabulary_size": 64, "num_layers": 2, "num_query_heads": 3, "num_key_value_heads": 1,
              "hidden_dim": 12, "intermediate_dim": 16, "tie_word_embeddings": False}
TINY_GEMMA3 = {"vocabulary_size": 100, "image_size": 16, "num_layers": 2, "num_query_heads": 4,
               "num_key_value_heads": 1, "hidden_dim": 32, "intermediate_dim": 24, "head_dim": 8,
               "use_post_ffw_norm": True, "use_post_attention_norm": True,
               "use_sliding_window_attention": True, "sliding_window_size": 4, "vision_encoder": None}


def reorder(family: str) -> dict[str, int]:
    """The widest sum and the depth of a tiny config: what float32 reordering tolerances depend on."""
    config = TINY_LLAMA if family == "llama" else TINY_GEMMA3
    return {"terms": max(config["hidden_dim"], config["intermediate_dim"], len(TOKENS[0])),
            "layers": config["num_layers"]}


def split_dims(family: str, config: dict[str, Any], axis: int) -> dict[str, int | None]:
    return {d.rule.name: d.split_dim for d in plan_layout(weight_rules(family, config), model_axis_size=axis)}


# --- the planner on the real models' shapes ---------------------------------------------------------------


def test_smollm2_falls_back_from_9_heads_to_the_hidden_size_on_8_devices() -> None:
    assert split_dims("llama", SMOLLM2, 8) == {
        "token embedding": 0,  # 49152 = 8 * 6144
        "query kernel": 0,  # (hidden 576, heads 9, head_dim 64): 9 heads do not divide, 576 does
        "key/value kernels": 0,
        "attention output kernel": 2,  # (9, 64, 576): the hidden (output) dimension
        "MLP gate/up kernels": 1,  # FFN 1536
        "MLP down kernel": 0,
    }


def test_smollm2_splits_whole_heads_when_the_axis_divides_them() -> None:
    dims = split_dims("llama", SMOLLM2, 3)
    assert (dims["query kernel"], dims["key/value kernels"], dims["attention output kernel"]) == (1, 1, 0)


def test_gemma3_270m_on_8_devices() -> None:
    assert split_dims("gemma3", GEMMA3_270M, 8) == {
        "token embedding": 0,  # 262144
        "query kernel": 1,  # (4 heads, 640 hidden, 256): hidden
        "key/value kernels": 1,
        "attention output kernel": 2,
        "MLP gating kernels": 1,
        "MLP output kernel": 0,
    }
    assert split_dims("gemma3", GEMMA3_270M, 4)["query kernel"] == 0  # 4 heads on 4 devices


def test_gemma_family_halves_the_ffn_and_mistral_has_an_untied_output() -> None:
    gemma = {**GEMMA3_270M, "intermediate_dim": 48}  # GemmaBackbone's kernels are 24 wide
    assert {r.name: r.shape for r in weight_rules("gemma", gemma)}["MLP gating kernels"] == (640, 24)
    mistral = {**SMOLLM2, "head_dim": None}
    rules = {r.name: r.shape for r in weight_rules("mistral", mistral)}
    assert rules["output embedding"] == (576, 49152) and rules["query kernel"] == (576, 9, 64)


def test_indivisible_weights_are_replicated_and_the_reason_logged(caplog: pytest.LogCaptureFixture) -> None:
    mesh = make_mesh(jax.devices()[:7])  # 7 divides none of Gemma 3 270M's sizes
    with caplog.at_level(logging.INFO, logger="inference.sharding"):
        layout_map = layout_map_for("gemma3", GEMMA3_270M, mesh)
    assert all(all(a is None for a in layout_map[key].axes) for key in layout_map)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == len(layout_map) == 6
    assert any("num_query_heads=4" in w and "model axis (7)" in w for w in warnings)


def test_one_device_replicates_everything() -> None:
    assert set(split_dims("llama", SMOLLM2, 1).values()) == {None}


@pytest.mark.parametrize(("family", "config", "message"), [
    ("falcon", SMOLLM2, "no layout map for family"),
    ("llama", {"hidden_dim": 8}, "lacks 'vocabulary_size'"),
])
def test_bad_family_or_config_is_a_typed_error(family: str, config: dict[str, Any], message: str) -> None:
    with pytest.raises(ShardingError, match=message):
        weight_rules(family, config)


# --- the mesh -------------------------------------------------------------------------------------------


def test_make_mesh_shapes() -> None:
    assert jax.device_count() == DEVICES, "tests/conftest.py must set XLA_FLAGS before jax is imported"
    assert (make_mesh().shape, tuple(make_mesh().axis_names)) == ((1, 8), ("batch", "model"))
    assert make_mesh(model_axis=4).shape == (2, 4)
    assert make_mesh(jax.devices()[:2]).shape == (1, 2)
    with pytest.raises(ShardingError, match="does not divide"):
        make_mesh(model_axis=3)


# --- real tiny backbones on 8 devices ---------------------------------------------------------------------


def random_backbone(family: str, config: dict[str, Any], seed: int) -> Any:
    """Unsharded, with weights scaled so that logits vary (a comparison of near-zeros proves nothing)."""
    keras.utils.set_random_seed(seed)
    backbone = build_backbone(family, config)
    rng = np.random.default_rng(seed)
    for v in backbone.weights:
        v.assign(rng.normal(0.0, 0.5, v.shape).astype("float32") + (1.0 if "norm" in v.path else 0.0))
    return backbone


def logits_fn(backbone: Any, traces: list[int]) -> Callable[[np.ndarray], np.ndarray]:
    """A jitted stateless forward pass; call it inside the model's distribution scope."""

    def forward(values: list[Any], token_ids: Any) -> Any:
        traces.append(1)
        with keras.StatelessScope(state_mapping=list(zip(backbone.weights, values, strict=True))):
            hidden = backbone({"token_ids": token_ids, "padding_mask": keras.ops.ones_like(token_ids)})
            return backbone.token_embedding(hidden, reverse=True)

    jitted = jax.jit(forward)
    return lambda ids: np.asarray(jitted([v.value for v in backbone.weights], ids))


TOKENS = np.random.default_rng(0).integers(0, 64, size=(2, 7)).astype("int32")


@pytest.fixture(scope="module")
def mesh() -> Any:
    return make_mesh()


@pytest.fixture(scope="module")
def models(mesh: Any) -> dict[str, dict[str, Any]]:
    out = {}
    for family, config, seed in (("llama", TINY_LLAMA, 1), ("gemma3", TINY_GEMMA3, 2)):
        plain = random_backbone(family, config, seed)
        reference = logits_fn(plain, [])(TOKENS)
        sharded, distribution = shard_backbone(plain, family=family, mesh=mesh)
        out[family] = {"plain": plain, "reference": reference, "sharded": sharded,
                       "distribution": distribution, "config": backbone_config(plain)}
    return out


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_sharded_logits_equal_unsharded(models: dict[str, dict[str, Any]], family: str) -> None:
    m = models[family]
    traces: list[int] = []
    with m["distribution"].scope():
        forward = logits_fn(m["sharded"], traces)
        first = forward(TOKENS)
        again = forward(TOKENS)
    assert float(np.std(m["reference"])) > 0.1
    assert_logits_close(first, m["reference"], **reorder(family))
    np.testing.assert_array_equal(again, first)
    assert len(traces) == 1, "the second call recompiled"


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_every_weight_that_can_be_split_is_split(models: dict[str, dict[str, Any]], family: str) -> None:
    m = models[family]
    rows = describe_shardings(m["sharded"])
    decisions = plan_layout(weight_rules(family, m["config"]), model_axis_size=DEVICES)
    for rule in (d.rule for d in decisions):  # the map is not stale: every rule names real weights
        assert any(re.fullmatch(rule.pattern, r.path) for r in rows), rule.pattern
    split = 0
    for row in rows:
        # The weight's actual sharding, as jax reports it on the variable's value.
        model_dims = [i for i, axis in enumerate(row.spec) if axis == MODEL_AXIS]
        divisible = [i for i, size in enumerate(row.shape) if size % DEVICES == 0]
        if len(row.shape) < 2 or not divisible:
            assert model_dims == [], f"{row.path} {row.shape} should be replicated, got {row.spec}"
            continue
        assert len(model_dims) == 1 and model_dims[0] in divisible, f"{row.path} {row.shape}: {row.spec}"
        (decision,) = [d for d in decisions if re.fullmatch(d.rule.pattern, row.path)]
        assert decision.rule.shape == row.shape
        assert model_dims[0] == decision.split_dim
        assert row.shard_shape[model_dims[0]] == row.shape[model_dims[0]] // DEVICES
        split += 1
    assert split == {"llama": 8, "gemma3": 15}[family]  # 2 embeddings + 3 MLP x 2 layers; 1 + 7 x 2


def test_tiny_llama_replicates_attention_and_splits_the_rest(models: dict[str, dict[str, Any]]) -> None:
    specs = {r.path: r.spec for r in describe_shardings(models["llama"]["sharded"])}
    assert specs["transformer_layer_0/self_attention/query/kernel"] == (None, None, None)
    assert specs["token_embedding/reverse_embeddings"] == (None, MODEL_AXIS)
    assert specs["transformer_layer_1/feedforward_output_dense/kernel"] == (MODEL_AXIS, None)
    gemma = {r.path: r.spec for r in describe_shardings(models["gemma3"]["sharded"])}
    assert gemma["token_embedding/embeddings"] == (None, MODEL_AXIS)  # vocabulary 100: hidden instead
    assert gemma["decoder_block_0/attention/query/kernel"] == (None, MODEL_AXIS, None)


def test_two_models_on_one_mesh_interleaved_match_alone(models: dict[str, dict[str, Any]]) -> None:
    llama, gemma = models["llama"], models["gemma3"]
    with llama["distribution"].scope():
        llama_forward = logits_fn(llama["sharded"], [])
    with gemma["distribution"].scope():
        gemma_forward = logits_fn(gemma["sharded"], [])
    for _ in range(2):
        with llama["distribution"].scope():
            assert_logits_close(llama_forward(TOKENS), llama["reference"], **reorder("llama"))
        with gemma["distribution"].scope():
            assert_logits_close(gemma_forward(TOKENS), gemma["reference"], **reorder("gemma3"))


@pytest.mark.parametrize(("family", "config"), [("llama", TINY_LLAMA), ("gemma3", TINY_GEMMA3)])
def test_family_distribution_decides_from_shapes_like_the_layout_map(
    models: dict[str, dict[str, Any]], mesh: Any, family: str, config: dict[str, Any]
) -> None:
    """Built inside the shape-aware scope with no config given: same layout, same logits."""
    m = models[family]
    distribution = family_distribution(family, mesh)
    with distribution.scope():
        backbone = build_backbone(family, config)
        backbone.set_weights(m["plain"].get_weights())
        logits = logits_fn(backbone, [])(TOKENS)
    expected = {r.path: r.spec for r in describe_shardings(m["sharded"])}
    assert {r.path: r.spec for r in describe_shardings(backbone)} == expected
    assert_logits_close(logits, m["reference"], **reorder(family))


# --- the CLI function -------------------------------------------------------------------------------------


def test_cli_prints_every_weight_with_its_sharding(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_shardings(["--family", "gemma3", "--tiny", "--json"]) == 0
    import json

    report = json.loads(capsys.readouterr().out)
    assert report["mesh"] == {"batch": 1, "model": 8}
    weights = {w["path"]: w for w in report["weights"]}
    query = weights["decoder_block_0/attention/query/kernel"]
    assert query["spec"] == [None, "model", None] and query["shard_shape"][1] * 8 == query["shape"][1]
    assert report["device_mb"] < report["total_mb"]


def test_cli_with_a_loader_shards_the_loaded_model(capsys: pytest.CaptureFixture[str],
                                                   models: dict[str, dict[str, Any]]) -> None:
    class Loaded:
        family = "llama"
        backbone = models["llama"]["plain"]

    assert cli_shardings(["--model", "tiny-llama", "--model-axis", "4"], load=lambda slug: Loaded()) == 0
    out = capsys.readouterr().out
    assert "token_embedding/reverse_embeddings" in out and "(None, model)" in out
    assert "{'batch': 2, 'model': 4}" in out


@pytest.mark.parametrize("argv", [[], ["--family", "llama"], ["--tiny"], ["--model", "x"],
                                  ["--family", "llama", "--tiny", "--model-axis", "3"],
                                  ["--family", "qwen", "--tiny"]])
def test_cli_bad_input_exits_2_with_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_shardings(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


# --- ARENA_MESH ----------------------------------------------------------------------------------------


def test_the_mesh_setting_shards_on_every_device_or_none() -> None:
    from inference.sharding import describe_mesh, mesh_from_setting

    devices = jax.devices()
    if len(devices) < 8:
        pytest.skip("needs XLA_FLAGS=--xla_force_host_platform_device_count=8 (tests/conftest.py sets it)")
    auto = mesh_from_setting("auto")
    assert auto is not None
    assert dict(zip(auto.axis_names, auto.shape, strict=True)) == {"batch": 1, "model": 8}
    assert "8 CPU devices" in describe_mesh(auto)
    assert mesh_from_setting("off") is None and "one device" in describe_mesh(None)
    assert mesh_from_setting(" AUTO ", devices[:1]) is None  # one device: nothing to shard
    shaped = mesh_from_setting("2x4")
    assert dict(zip(shaped.axis_names, shaped.shape, strict=True)) == {"batch": 2, "model": 4}
    for bad, reason in (("4x4", "needs 16 devices"), ("x8", "BxM"), ("many", "BxM"), ("0x8", "BxM")):
        with pytest.raises(ShardingError, match=reason):
            mesh_from_setting(bad)


# --- Qwen2 ------------------------------------------------------------------------------------------------

QWEN25_CODER_05B = {"vocabulary_size": 151936, "num_layers": 24, "num_query_heads": 14,
                    "num_key_value_heads": 2, "hidden_dim": 896, "intermediate_dim": 4864,
                    "tie_word_embeddings": False}
# 7 query / 1 key-value heads as the 0.5B's ratio, hidden 56 (7 heads of 8: the hidden dim splits), FFN 24.
TINY_QWEN2 = {"vocabulary_size": 64, "num_layers": 2, "num_query_heads": 7, "num_key_value_heads": 1,
              "hidden_dim": 56, "intermediate_dim": 24, "tie_word_embeddings": False}


def test_qwen25_coder_splits_on_8_devices_where_it_can() -> None:
    dims = split_dims("qwen2", QWEN25_CODER_05B, DEVICES)
    assert dims["query kernel"] == 0  # 14 heads do not divide 8: the hidden size (896) does
    assert dims["token embedding"] == 0 and dims["output embedding"] == 1  # 151936 = 8 x 18992
    assert dims["MLP gate/up kernels"] == 1 and dims["MLP down kernel"] == 0  # 4864 = 8 x 608


def test_qwen2_sharded_logits_with_biases_equal_unsharded(mesh: Any) -> None:
    plain = random_backbone("qwen2", TINY_QWEN2, 3)  # biases random too (every weight is)
    assert any(v.path.endswith("query/bias") for v in plain.weights)
    reference = logits_fn(plain, [])(TOKENS)
    sharded, distribution = shard_backbone(plain, family="qwen2", mesh=mesh)
    rows = {r.path: r.spec for r in describe_shardings(sharded)}
    assert rows["transformer_layer_0/self_attention/query/kernel"][0] == MODEL_AXIS
    with distribution.scope():
        got = logits_fn(sharded, [])(TOKENS)
    assert float(np.std(reference)) > 0.1
    # split hidden dims sum in another order: float32 reordering error, no more
    assert_logits_close(got, reference, terms=max(TINY_QWEN2["hidden_dim"], TINY_QWEN2["intermediate_dim"]),
                        layers=TINY_QWEN2["num_layers"])
