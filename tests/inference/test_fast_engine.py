"""The fast decoder against keras-hub's own forward pass: same logits (float32), close ones (bfloat16,
int8), rows that do not disturb each other, the sampler's candidate shortcut that never changes a
choice, a model it does not know falling back to keras-hub, and the fast path sharded on 8 devices."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from inference.engine import KerasEngine, TokenTrace, generate_stream
from inference.engine.forward import empty_cache, forward, matmul, output_logits
from inference.engine.sampling import Candidates, sample_from_candidates, sample_row, sample_token
from inference.engine.weights import decoder_spec, extract_params, matrix_formats, weight_bytes
from inference.families.base import UnsupportedModel
from inference.formats.matrices import QuantizedMatrix
from inference.local import LocalChatModel
from inference.protocol import ChatMessage, GenerationParams, GenerationResult


def _fast_logits(backbone: Any, weights: str, prompt: list[int], steps: list[int]) -> list[np.ndarray]:
    """Next-token logits after the prompt, then after each of ``steps`` fed one at a time (batch 1)."""
    spec = decoder_spec(backbone, weights)  # type: ignore[arg-type]
    params = extract_params(backbone, spec)
    run = jax.jit(lambda p, c, t, i: forward(spec, p, c, t, i))
    head = jax.jit(lambda p, h: output_logits(spec, p, h))
    cache = empty_cache(spec, batch=1, slots=128)
    hidden, cache = run(params, cache, jnp.asarray([prompt], "int32"), jnp.zeros((1,), "int32"))
    out = [np.asarray(head(params, hidden[:, -1]))[0]]
    for i, token in enumerate(steps):
        index = jnp.asarray([len(prompt) + i], "int32")
        hidden, cache = run(params, cache, jnp.asarray([[token]], "int32"), index)
        out.append(np.asarray(head(params, hidden[:, 0]))[0])
    return out


def _keras_logits(model: LocalChatModel, prompt: list[int], steps: list[int]) -> list[np.ndarray]:
    logits, cache = model.runner.prefill(prompt, cache_length=128)
    out = [logits]
    for i, token in enumerate(steps):
        logits, cache = model.runner.step(cache, token, len(prompt) + i)
        out.append(logits)
    return out


# A 40-token prompt: longer than tiny Gemma 3's sliding window (16), so the local-layer mask matters.
PROMPT = [int(t) for t in np.random.default_rng(0).integers(3, 200, 40)]
STEPS = [7, 99, 150, 3, 42]


def test_float32_logits_equal_keras_hub_prefill_and_every_step(model: LocalChatModel) -> None:
    reference = _keras_logits(model, PROMPT, STEPS)
    fast = _fast_logits(model.loaded.backbone, "float32", PROMPT, STEPS)
    scale = max(float(np.max(np.abs(r))) for r in reference)
    assert scale > 0.1  # a comparison of near-zeros would prove nothing
    for got, want in zip(fast, reference, strict=True):
        assert float(np.max(np.abs(got - want))) <= 1e-5 * max(scale, 1.0)


@pytest.mark.parametrize(("weights", "tolerance"), [("bfloat16", 0.01), ("int8", 0.03)])
def test_low_precision_matmul_stays_close_to_float32(weights: str, tolerance: float) -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 256)).astype("float32")
    w = rng.normal(size=(256, 96)).astype("float32")
    exact = x @ w
    if weights == "int8":
        scale = np.abs(w).max(axis=0) / 127
        packed: Any = QuantizedMatrix(jnp.asarray(np.round(w / scale).astype("int8")), jnp.asarray(scale))
    else:
        packed = jnp.asarray(w, dtype=jnp.bfloat16)
    got = np.asarray(jax.jit(matmul)(jnp.asarray(x), packed))
    relative = np.linalg.norm(got - exact) / np.linalg.norm(exact)
    assert relative < tolerance
    assert relative > 1e-6  # it really is the low-precision path


def test_weight_formats_shrink_the_weights_and_keep_the_model(model: LocalChatModel) -> None:
    backbone = model.loaded.backbone
    sizes = {}
    for weights in ("float32", "bfloat16", "int8"):
        spec = decoder_spec(backbone, weights)  # type: ignore[arg-type]
        sizes[weights] = weight_bytes(extract_params(backbone, spec))
        logits = _fast_logits(backbone, weights, PROMPT, [])[0]
        reference = _keras_logits(model, PROMPT, [])[0]
        # Same shape, clearly correlated with the exact logits (random tiny weights quantize badly).
        assert np.corrcoef(logits, reference)[0, 1] > 0.9
    assert sizes["bfloat16"] < 0.6 * sizes["float32"]
    assert sizes["int8"] < 0.35 * sizes["float32"]


def test_matrix_formats_count_what_each_matrix_became(model: LocalChatModel) -> None:
    """q4 gives way to q8 for matrices 4 bits cannot reproduce (random ones): counted, never silent."""
    backbone = model.loaded.backbone
    tied = getattr(backbone.token_embedding, "tie_weights", True)
    matrices = 4 * len(backbone.transformer_layers) + (1 if tied else 2)  # qkv, o, gate_up, down; table(s)
    for weights, expected in (("float32", "float32"), ("q4", "q8")):
        params = extract_params(backbone, decoder_spec(backbone, weights))  # type: ignore[arg-type]
        assert matrix_formats(params) == {expected: matrices}


def test_only_q4_serves_6_bit_matrices_in_another_format(model: LocalChatModel) -> None:
    backbone = model.loaded.backbone
    assert decoder_spec(backbone, "q4").six_bit == "q6"
    assert decoder_spec(backbone, "q4", six_bit="q8").six_bit == "q8"
    assert decoder_spec(backbone, "q8", six_bit="q8").six_bit == "q6"  # q8 keeps no 6-bit matrices
    with pytest.raises(ValueError, match="six_bit 'q5'"):
        decoder_spec(backbone, "q4", six_bit="q5")  # type: ignore[arg-type]


def test_rows_at_different_positions_compute_what_each_computes_alone(model: LocalChatModel) -> None:
    backbone = model.loaded.backbone
    spec = decoder_spec(backbone, "float32")
    params = extract_params(backbone, spec)
    run = jax.jit(lambda p, c, t, i: forward(spec, p, c, t, i))
    prompts = [PROMPT[:30], PROMPT[5:12], PROMPT[:1]]
    alone = [_fast_logits(backbone, "float32", p, [11])[1] for p in prompts]
    cache = empty_cache(spec, batch=3, slots=128)
    for row, prompt in enumerate(prompts):  # fill each row on its own, as the scheduler does
        one = empty_cache(spec, batch=1, slots=128)
        _, one = run(params, one, jnp.asarray([prompt], "int32"), jnp.zeros((1,), "int32"))
        cache = tuple(whole.at[:, row].set(part[:, 0]) for whole, part in zip(cache, one, strict=True))
    index = jnp.asarray([len(p) for p in prompts], "int32")
    hidden, _ = run(params, cache, jnp.full((3, 1), 11, "int32"), index)
    together = np.asarray(output_logits(spec, params, hidden[:, 0]))
    for row in range(3):
        np.testing.assert_allclose(together[row], alone[row], atol=1e-5)


@pytest.mark.parametrize("params", [
    GenerationParams(temperature=0.7, top_p=0.9),
    GenerationParams(temperature=1.0, top_k=20),
    GenerationParams(temperature=0.3, top_k=10, top_p=0.5),
    GenerationParams(temperature=1.5, top_p=0.95),  # flat: the nucleus outgrows the candidates
    GenerationParams(temperature=1.0),  # plain sampling needs the whole row
    GenerationParams(temperature=0.0),
])
def test_sampling_from_candidates_chooses_exactly_what_the_full_row_would(params: GenerationParams) -> None:
    rng = np.random.default_rng(3)
    fetched = 0
    for trial in range(60):
        logits = (rng.normal(size=500) * rng.uniform(0.5, 6.0)).astype("float32")
        order = np.argsort(-logits, kind="stable")[:64]
        temperature = params.temperature if params.temperature > 0 else 1.0
        normalizer = float(np.log(np.sum(np.exp(logits.astype(np.float64) / temperature))))

        def full(row: np.ndarray = logits) -> np.ndarray:
            nonlocal fetched
            fetched += 1
            return row

        want = sample_token(logits, params, np.random.default_rng(trial))
        rng_same = np.random.default_rng(trial)
        got = sample_from_candidates(logits[order], order, normalizer, params, rng_same, full)
        assert got == want
    if params.temperature == 0 or params.top_k:
        assert fetched == 0
    if params.temperature == 1.0 and not params.top_k and params.top_p == 1.0:
        assert fetched == 60


@pytest.mark.parametrize("params", [
    GenerationParams(temperature=0.7, top_p=0.9),
    GenerationParams(temperature=1.0, top_k=20),
    GenerationParams(temperature=0.3, top_k=1),
    GenerationParams(temperature=0.3, top_k=10, top_p=0.5),
    GenerationParams(temperature=1.0),
    GenerationParams(temperature=0.0),
])
def test_host_logits_sample_through_the_batcher_exactly_as_the_full_row(params: GenerationParams) -> None:
    """keras-hub's engine hands the batcher only the best token of its host logits: every choice, and
    the generator's state after it (so every later token), is what sampling the full row gave."""
    rng = np.random.default_rng(5)
    for trial in range(60):
        logits = (rng.normal(size=(1, 500)) * rng.uniform(0.5, 12.0)).astype("float32")
        want_rng, got_rng = np.random.default_rng(trial), np.random.default_rng(trial)
        want = sample_token(logits[0], params, want_rng)
        candidates = Candidates.from_logits(logits, np.asarray([params.temperature]))
        assert sample_row(candidates, 0, params, got_rng) == want
        assert got_rng.random() == want_rng.random()


def test_an_unknown_backbone_falls_back_to_keras_hub(
    model: LocalChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(UnsupportedModel):
        decoder_spec(object(), "float32")

    def unknown(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedModel("not this one")

    monkeypatch.setattr("inference.local.decoder_spec", unknown)
    fallback = LocalChatModel("fallback", model.loaded, model.template, context_length=model.context_length)
    assert fallback.engine is None and not fallback.supports_batching
    assert isinstance(fallback.batcher.engine, KerasEngine)  # one batcher drives every engine
    assert fallback.engine_note == "not this one"
    messages = [ChatMessage("user", "Hello there")]
    params = GenerationParams(max_new_tokens=6, temperature=0.0)
    events = list(fallback.stream(messages, params))
    fast = list(model.stream(messages, params))
    assert isinstance(events[-1], GenerationResult) and isinstance(fast[-1], GenerationResult)
    assert events[-1].text == fast[-1].text and events[-1].error is None


def test_stream_ids_on_the_fast_path_equal_keras_hub_token_for_token(model: LocalChatModel) -> None:
    ids = model.prompt_ids([ChatMessage("user", "Count to five")], GenerationParams())
    params = GenerationParams(max_new_tokens=20, temperature=0.0)
    fast, reference = TokenTrace(ids=[]), TokenTrace(ids=[])
    list(model.stream_ids(ids, params, trace=fast))
    list(generate_stream(model.runner, model.loaded.tokenizer, ids, params, stop_ids=model.stop_ids,
                         trace=reference))
    assert fast.ids == reference.ids and fast.ids


def test_a_stream_closed_early_frees_its_row(model: LocalChatModel) -> None:
    stream = model.stream([ChatMessage("user", "Talk for a while")], GenerationParams(max_new_tokens=60))
    next(stream)
    stream.close()
    assert not model.batcher.busy and model.batcher.rows == []


# --- the fast path sharded on 8 virtual CPU devices ------------------------------------------------------


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_fast_path_sharded_on_8_devices_equals_one_device_and_stays_split(family: str) -> None:
    from inference.sharding import MODEL_AXIS, make_mesh, shard_backbone
    from tests.inference.conftest import assert_logits_close
    from tests.inference.test_sharding import TINY_GEMMA3, TINY_LLAMA, TOKENS, random_backbone, reorder

    if len(jax.devices()) < 8:
        pytest.skip("needs XLA_FLAGS=--xla_force_host_platform_device_count=8 (tests/conftest.py sets it)")
    config = TINY_LLAMA if family == "llama" else TINY_GEMMA3
    plain = random_backbone(family, config, seed=5)

    def logits(backbone: Any) -> tuple[np.ndarray, dict[str, Any]]:
        spec = decoder_spec(backbone, "float32")
        params = extract_params(backbone, spec)

        def run(p: Any, tokens: Any) -> Any:
            cache = empty_cache(spec, batch=tokens.shape[0], slots=tokens.shape[1])
            hidden, _ = forward(spec, p, cache, tokens, jnp.zeros((tokens.shape[0],), "int32"))
            return jax.vmap(lambda h: output_logits(spec, p, h), in_axes=1, out_axes=1)(hidden)

        return np.asarray(jax.jit(run)(params, jnp.asarray(TOKENS))), params

    reference, _ = logits(plain)
    sharded, distribution = shard_backbone(plain, family=family, mesh=make_mesh())
    with distribution.scope():
        got, params = logits(sharded)
    assert float(np.std(reference)) > 0.1
    assert_logits_close(got, reference, **reorder(family))
    # The converted matrices keep the mesh: the FFN output projection stays split over the model axis.
    down = params["layers"][0]["down"]
    assert MODEL_AXIS in tuple(down.sharding.spec) and len(down.sharding.device_set) == 8
