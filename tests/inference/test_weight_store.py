"""The fast engine's converted weights stored on disk (inference.engine.stored_weights) and the starts
that read them back instead of the GGUF file's weights (inference.weight_store, the builder)."""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from inference.builder import build_chat_model, estimate_memory
from inference.catalogue import parse_catalogue
from inference.engine import TokenTrace, stored_weights
from inference.engine.weights import decoder_spec, extract_params, weight_bytes
from inference.formats import block_formats
from inference.formats.matrices import Q4Blocks, Q6Blocks, Q8Blocks, QuantizedMatrix, StackedBlocks
from inference.local import LocalChatModel
from inference.protocol import GenerationParams, GenerationResult
from inference.tiny import load_tiny
from inference.weight_store import FOLDER, store_directory, store_enabled, taking_turns
from tests.inference.gguf_tiny import export_llama, randomize


def _leaves(tree: Any) -> list[tuple[str, Any]]:
    """(path with container names, leaf) of every array, so two trees compare shape and types too."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [(jax.tree_util.keystr(path), leaf) for path, leaf in flat]


def _assert_same_tree(got: Any, want: Any) -> None:
    assert str(jax.tree_util.tree_structure(got)) == str(jax.tree_util.tree_structure(want))
    for (path, a), (_, b) in zip(_leaves(got), _leaves(want), strict=True):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, path
        assert a.tobytes() == b.tobytes(), path  # bit for bit, NaN payloads and -0.0 included


@pytest.mark.parametrize("weight_format", ["float32", "bfloat16", "int8", "q8"])
def test_a_tiny_models_params_come_back_bit_for_bit(weight_format: str, tmp_path: Path) -> None:
    loaded = load_tiny("llama", dtype="float32", context_length=64)
    spec = decoder_spec(loaded.backbone, weight_format)  # type: ignore[arg-type]
    params = extract_params(loaded.backbone, spec)
    written = stored_weights.save(tmp_path / "store", spec, params, extra={"family": "llama"})
    got = stored_weights.load(tmp_path / "store")
    assert got is not None and got.spec == spec and got.extra == {"family": "llama"}
    _assert_same_tree(got.params, params)
    assert written == (tmp_path / "store" / stored_weights.DATA).stat().st_size
    assert not [p for p in tmp_path.iterdir() if p.name != "store"]  # no partial folder left


def test_every_container_and_dtype_comes_back(tmp_path: Path) -> None:
    """Block matrices of every kind, a bfloat16 and an int8 matrix, in dicts and lists."""
    rng = np.random.default_rng(0)
    matrix = jnp.asarray(rng.normal(size=(64, 96)), "float32")
    params = {
        "embedding": Q6Blocks(*block_formats.q6_quantize(matrix)),
        "final_norm": jnp.asarray(rng.normal(size=(96,)), "float32"),
        "layers": [{"qkv": Q4Blocks(*block_formats.q4_quantize(matrix, grid=False)),
                    "o": Q8Blocks(*block_formats.q8_quantize(matrix)),
                    "gate_up": QuantizedMatrix(jnp.asarray(rng.integers(-127, 128, (96, 64)), "int8"),
                                               jnp.ones((64,), "float32")),
                    "down": matrix.astype("bfloat16"),
                    "stacked": StackedBlocks((Q4Blocks(*block_formats.q4_quantize(matrix, grid=True)),
                                              Q6Blocks(*block_formats.q6_quantize(matrix[:32]))))}],
    }
    spec = decoder_spec(load_tiny("llama", dtype="float32", context_length=64).backbone, "q4")
    stored_weights.save(tmp_path / "s", spec, params, extra={})
    got = stored_weights.load(tmp_path / "s")
    assert got is not None
    assert [type(v).__name__ for v in got.params["layers"][0].values()] == \
        ["Q4Blocks", "Q8Blocks", "QuantizedMatrix", "ArrayImpl", "StackedBlocks"]
    assert isinstance(got.params["layers"][0]["stacked"].parts, tuple)
    _assert_same_tree(got.params, params)


def _a_store(tmp_path: Path) -> Path:
    params = {"embedding": jnp.arange(96 * 64, dtype="float32").reshape(96, 64), "layers": []}
    spec = decoder_spec(load_tiny("llama", dtype="float32", context_length=64).backbone, "float32")
    stored_weights.save(tmp_path / "s", spec, params, extra={})
    return tmp_path / "s"


def _rewrite_manifest(directory: Path, change: Any) -> None:
    manifest = json.loads((directory / stored_weights.MANIFEST).read_text())
    change(manifest)
    (directory / stored_weights.MANIFEST).write_text(json.dumps(manifest))


@pytest.mark.parametrize("damage", ["truncated", "version", "container", "spec", "no manifest"])
def test_a_store_that_does_not_add_up_is_ignored(damage: str, tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    directory = _a_store(tmp_path)
    assert stored_weights.load(directory) is not None
    if damage == "truncated":
        data = directory / stored_weights.DATA
        data.write_bytes(data.read_bytes()[:-8])
    elif damage == "version":
        _rewrite_manifest(directory, lambda m: m.update(version=stored_weights.STORE_VERSION + 1))
    elif damage == "container":
        _rewrite_manifest(directory, lambda m: m["tree"]["dict"].update(
            embedding={"container": "os.system", "items": []}))
    elif damage == "spec":
        _rewrite_manifest(directory, lambda m: m["spec"].pop("head_dim"))
    else:
        (directory / stored_weights.MANIFEST).unlink()
    with caplog.at_level(logging.WARNING):
        assert stored_weights.load(directory) is None
    assert damage == "no manifest" or "ignoring the stored weights" in caplog.text


# ---- starts from a GGUF file ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama GGUF whose widths are multiples of 32, so every block format can serve it."""
    from keras_hub.models import Llama3Backbone

    from tests.inference.gguf_tiny import bpe_vocabulary

    backbone = Llama3Backbone(vocabulary_size=len(bpe_vocabulary()[0]), num_layers=2, num_query_heads=4,
                              num_key_value_heads=2, hidden_dim=64, intermediate_dim=96,
                              rope_max_wavelength=10_000.0, layer_norm_epsilon=1e-5, tie_word_embeddings=True)
    randomize(backbone, seed=3)
    return export_llama(backbone, tmp_path_factory.mktemp("gguf") / "tiny.gguf")


def _entry(file: Path, weights: str) -> Any:
    (entry,) = parse_catalogue(f'[[model]]\nslug = "t"\nname = "T"\nfamily = "llama"\n'
                               f'source = "gguf:{file}"\ntemplate = "chatml"\nweights = "{weights}"\n')
    return entry


def _build(entry: Any, cache_dir: Path) -> tuple[LocalChatModel, list[str]]:
    stages: list[str] = []
    model = build_chat_model(entry, cache_dir=cache_dir, warm_up=False, keep_keras_weights=False,
                             progress=lambda stage, fraction: stages.append(stage))
    assert isinstance(model, LocalChatModel) and model.engine is not None
    return model, stages


def _greedy(model: LocalChatModel) -> list[int]:
    trace = TokenTrace(ids=[])
    events = list(model.stream_ids(model.loaded.tokenizer.encode("hello there"), GenerationParams(
        max_new_tokens=12), trace=trace))
    assert isinstance(events[-1], GenerationResult) and events[-1].finish_reason != "error"
    return trace.ids


@pytest.mark.parametrize("weights", ["q8", "bfloat16"])
def test_the_second_start_reads_the_stored_weights_and_replies_the_same(
    weights: str, tiny_file: Path, tmp_path: Path
) -> None:
    entry = _entry(tiny_file, weights)
    first, first_stages = _build(entry, tmp_path)
    assert first_stages == ["read", "convert"]
    folders = list((tmp_path / FOLDER).glob("*/*"))
    assert [f.parent.name for f in folders] == [f"tiny-{weights}"]
    second, second_stages = _build(entry, tmp_path)
    assert second_stages == ["read"]  # no backbone, no conversion
    assert second.loaded.backbone is None
    assert second.engine is not None and first.engine is not None
    assert second.engine.spec == first.engine.spec
    assert second.matrix_formats == first.matrix_formats
    assert second.loaded.metadata == first.loaded.metadata
    assert second.context_length == first.context_length and second.stop_ids == first.stop_ids
    _assert_same_tree(second.engine.params, first.engine.params)
    assert _greedy(second) == _greedy(first)


def test_a_changed_file_is_converted_again_and_the_old_store_removed(tiny_file: Path, tmp_path: Path) -> None:
    file = tmp_path / "copy.gguf"
    file.write_bytes(tiny_file.read_bytes())
    entry = _entry(file, "float32")
    _build(entry, tmp_path)
    before = store_directory(tmp_path, file, weight_format="float32", dtype="float32")
    assert before.is_dir()
    stat = file.stat()
    os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # a new download of the same name
    after = store_directory(tmp_path, file, weight_format="float32", dtype="float32")
    assert after != before
    _, stages = _build(entry, tmp_path)
    assert stages == ["read", "convert"]
    assert list(before.parent.iterdir()) == [after]


def test_a_q4_model_whose_6_bit_matrices_are_served_in_q8_is_stored_apart(
    tiny_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from inference.engine import weight_policy

    if weight_policy.native_blocker() is not None:
        pytest.skip("the native kernels cannot serve q4 here")
    monkeypatch.setattr(weight_policy, "_read_verdict", lambda path: None)  # no cached verdict overrides
    entry = _entry(tiny_file, "q4")
    folders = {six: store_directory(tmp_path, tiny_file, weight_format="q4", dtype=entry.dtype, six_bit=six)
               for six in ("q6", "q8")}
    assert folders["q8"].parent.name == "tiny-q4-six-bit-q8" and folders["q6"].parent.name == "tiny-q4"
    for six in ("q8", "q6", "q8"):  # switching back keeps, and reads, the other's store
        monkeypatch.setattr(weight_policy, "_six_bit_in_force", six)
        model, stages = _build(entry, tmp_path)
        assert model.engine is not None and model.engine.spec.six_bit == six
        assert folders[six].is_dir()
        assert stages == (["read"] if six == "q8" and folders["q6"].is_dir() else ["read", "convert"])


def test_a_start_finding_another_converting_waits_and_reads_what_it_stores(
    tiny_file: Path, tmp_path: Path
) -> None:
    """Two starts of one model at once (threads here; each opens the lock file itself, as processes do):
    the second waits while the first converts, then reads the store instead of converting beside it."""
    entry = _entry(tiny_file, "q8")
    first_converting, second_waiting = threading.Event(), threading.Event()
    stages: dict[str, list[str]] = {"first": [], "second": []}
    built: dict[str, LocalChatModel] = {}
    errors: list[BaseException] = []

    def first_progress(stage: str, fraction: float) -> None:
        stages["first"].append(stage)
        if stage == "convert":  # hold the turn until the second start has found it taken
            first_converting.set()
            assert second_waiting.wait(timeout=120)

    def second_progress(stage: str, fraction: float) -> None:
        stages["second"].append(stage)
        if stage == "wait":
            second_waiting.set()

    def start(name: str, progress: Any) -> None:
        try:
            model = build_chat_model(entry, cache_dir=tmp_path, warm_up=False, keep_keras_weights=False,
                                     progress=progress)
            assert isinstance(model, LocalChatModel)
            built[name] = model
        except BaseException as exc:  # reported below, on the test's thread
            errors.append(exc)
            first_converting.set()
            second_waiting.set()

    first = threading.Thread(target=start, args=("first", first_progress))
    first.start()
    assert first_converting.wait(timeout=120)
    second = threading.Thread(target=start, args=("second", second_progress))
    second.start()
    first.join(timeout=300)
    second.join(timeout=300)
    assert not errors, errors
    assert stages == {"first": ["read", "convert"], "second": ["wait", "read"]}
    assert built["second"].loaded.backbone is None  # read back from what the first stored
    assert _greedy(built["second"]) == _greedy(built["first"])
    assert sorted(f.name for f in (tmp_path / FOLDER).iterdir()) == ["tiny-q8", "tiny-q8.lock"]


def test_a_lock_that_cannot_be_made_is_logged_and_the_start_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / FOLDER).write_text("not a folder")  # the cache's converted/ cannot hold a lock file
    ran = []
    with caplog.at_level(logging.WARNING, logger="inference.engine.turns"), \
            taking_turns(tmp_path / FOLDER / "tiny-q8" / "key"):
        ran.append(True)
    assert ran and "no lock" in caplog.text


def test_the_store_can_be_turned_off(tiny_file: Path, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARENA_WEIGHT_STORE", "off")
    assert not store_enabled()
    entry = _entry(tiny_file, "float32")
    for _ in range(2):
        assert _build(entry, tmp_path)[1] == ["read", "convert"]
    assert not (tmp_path / FOLDER).exists()
    monkeypatch.setenv("ARENA_WEIGHT_STORE", "sometimes")
    with pytest.raises(ValueError, match="ARENA_WEIGHT_STORE='sometimes': give on or off"):
        store_enabled()


def test_a_start_that_keeps_keras_weights_builds_its_backbone(tiny_file: Path, tmp_path: Path) -> None:
    """The keras copy is wanted (the keras-hub runner): a store there is not read, and the backbone built."""
    entry = _entry(tiny_file, "float32")
    _build(entry, tmp_path)
    stages: list[str] = []
    kept = build_chat_model(entry, cache_dir=tmp_path, warm_up=False, keep_keras_weights=True,
                            progress=lambda stage, fraction: stages.append(stage))
    assert isinstance(kept, LocalChatModel) and kept.loaded.backbone is not None
    assert stages == ["read", "convert"] and kept.runner is not None


def test_the_memory_estimate_of_a_stored_model_is_what_reading_it_back_takes(
    tiny_file: Path, tmp_path: Path
) -> None:
    entry = _entry(tiny_file, "float32")
    before = estimate_memory(entry, cache_dir=tmp_path)  # from the header: backbone + conversion
    model, _ = _build(entry, tmp_path)
    assert model.engine is not None
    after = estimate_memory(entry, cache_dir=tmp_path)
    stored = stored_weights.sizes(store_directory(tmp_path, tiny_file, weight_format="float32",
                                                  dtype="float32"))
    assert stored is not None and stored[0] == weight_bytes(model.engine.params)
    assert stored[1] == max(leaf.nbytes for leaf in jax.tree.leaves(model.engine.params))
    assert after.resident_mb == -(-stored[0] // 2**20) + 300
    assert after.peak_mb == after.resident_mb + -(-stored[1] // 2**20)
    assert after.peak_mb < before.peak_mb
