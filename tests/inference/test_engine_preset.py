"""The ``preset:`` source end to end, offline: a tiny keras-hub preset folder saved here, then loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference.builder import build_chat_model
from inference.catalogue import parse_catalogue
from inference.local import LocalChatModel
from inference.preset import KerasHubTokenizer
from inference.protocol import ChatMessage, GenerationParams, GenerationResult, TextDelta

SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]


@pytest.fixture(scope="module")
def preset_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Llama 3 preset folder (tiny random backbone + a byte-level BPE tokenizer) like kaggle:// ones."""
    import keras
    import keras_hub
    from keras_hub.src.tokenizers.byte_pair_tokenizer import bytes_to_unicode

    _, unicode_bytes = bytes_to_unicode()
    vocabulary = {u: i for i, u in enumerate(unicode_bytes)}
    for token in ["he", "ll", *SPECIALS]:
        vocabulary[token] = len(vocabulary)
    tokenizer = keras_hub.models.Llama3Tokenizer(vocabulary=vocabulary, merges=["h e", "l l"])
    keras.utils.set_random_seed(1)
    backbone = keras_hub.models.Llama3Backbone(
        vocabulary_size=tokenizer.vocabulary_size(),
        num_layers=2,
        num_query_heads=4,
        num_key_value_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
    )
    folder = tmp_path_factory.mktemp("preset")
    backbone.save_to_preset(str(folder))
    tokenizer.save_to_preset(str(folder))
    return folder


def test_preset_source_loads_and_streams(preset_dir: Path, tmp_path: Path) -> None:
    (entry,) = parse_catalogue(
        f"""
[[model]]
slug = "tiny-preset"
name = "Tiny preset"
family = "llama"
source = "preset:{preset_dir}"
template = "llama3"
context_length = 256
memory_mb = 50
"""
    )
    model = build_chat_model(entry, cache_dir=tmp_path)
    assert isinstance(model, LocalChatModel)
    tokenizer = model.loaded.tokenizer
    assert isinstance(tokenizer, KerasHubTokenizer)
    eot = tokenizer.token_to_id("<|eot_id|>")
    assert eot is not None and eot in model.stop_ids and tokenizer.eos_id == eot
    assert tokenizer.token_to_id("<|eom_id|>") is None  # not in this vocabulary: skipped, not invented
    messages = [ChatMessage("system", "Be brief."), ChatMessage("user", "hello é")]
    rendered = model.template.render(messages)
    ids = tokenizer.encode(rendered)
    assert ids[0] == tokenizer.token_to_id("<|begin_of_text|>") and ids.count(eot) == 2  # one each, no dupes
    assert tokenizer.decode(ids) == rendered
    events = list(model.stream(messages, GenerationParams(max_new_tokens=6)))
    result = events[-1]
    assert isinstance(result, GenerationResult)
    assert result.finish_reason in ("length", "stop") and result.prompt_tokens == len(ids)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == result.text
