"""The model files' own Jinja chat templates (``template = "file"``), rendered in jinja2's immutable
sandbox: each hand-written template renders exactly what a real file's template renders, the sandbox
refuses what a template must not do, and the stop tokens come from the template itself.

The templates are copies of the bundled files' ``tokenizer.chat_template`` (``tests/data/chat_templates``);
the slow GGUF tests check the copies against the files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from inference.builder import ModelBuildError, template_for
from inference.catalogue import parse_catalogue
from inference.chat_template import ChatTemplate, TemplateError, jinja_template
from inference.families import get_template
from inference.protocol import ChatMessage
from inference.tiny import load_tiny

TEMPLATES = Path(__file__).resolve().parents[1] / "data" / "chat_templates"
SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
QWEN_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
CONVERSATIONS = [
    [ChatMessage("user", "Add a meeting with Fred on Nov 11 at 5PM")],
    [ChatMessage("system", "Reply with code."), ChatMessage("user", "Hi  there\n\n  ünïcode ✓")],
    [ChatMessage("system", "S"), ChatMessage("user", "a"), ChatMessage("assistant", "b"),
     ChatMessage("user", "The current year is 2024.")],
    [ChatMessage("user", "a"), ChatMessage("assistant", "action.add_calendar_entry(\"x\")"),
     ChatMessage("user", "c")],
]


def file_template(name: str, *, eos: str = "<|im_end|>") -> ChatTemplate:
    return jinja_template((TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8"), bos_token=None,
                          eos_token=eos)


def with_system(messages: list[ChatMessage], default: str) -> list[ChatMessage]:
    return messages if messages[0].role == "system" else [ChatMessage("system", default), *messages]


@pytest.mark.parametrize("generation", [True, False])
@pytest.mark.parametrize("messages", CONVERSATIONS)
@pytest.mark.parametrize(("file", "default"), [
    ("smollm2-135m-instruct", SMOLLM2_SYSTEM),
    ("qwen2.5-coder-0.5b-instruct", QWEN_SYSTEM),
    ("qwen2.5-coder-1.5b-instruct", QWEN_SYSTEM),
])
def test_chatml_renders_what_the_files_render(file: str, default: str, messages: list[ChatMessage],
                                              generation: bool) -> None:
    """The hand-written ChatML, given the file's default system prompt, is the file's own template."""
    expected = file_template(file).render(messages, add_generation_prompt=generation)
    assert get_template("chatml").render(with_system(messages, default), add_generation_prompt=generation) \
        == expected
    assert expected.endswith("<|im_start|>assistant\n") == generation


def test_stop_tokens_are_the_ones_the_template_writes() -> None:
    assert file_template("qwen2.5-coder-0.5b-instruct").stop_tokens == ("<|im_end|>",)
    source = "{% for m in messages %}<start_of_turn>{{ m.content }}<end_of_turn>{% endfor %}"
    gemma_like = jinja_template(source, bos_token="<bos>", eos_token="<eos>")
    assert gemma_like.stop_tokens == ("<end_of_turn>", "<eos>")
    assert gemma_like.render([ChatMessage("user", "x")]) == "<start_of_turn>x<end_of_turn>"


@pytest.mark.parametrize("source", [
    "{{ ''.__class__.__mro__ }}",  # reaching Python internals
    "{% set _ = messages.append({'role': 'user', 'content': 'x'}) %}",  # changing what it was handed
    "{{ raise_exception('no system role') }}",  # the template's own refusal
])
def test_the_sandbox_refuses_and_the_error_is_a_template_error(source: str) -> None:
    template = jinja_template(source, bos_token=None, eos_token=None)
    with pytest.raises(TemplateError):
        template.render([ChatMessage("user", "hi")])


def test_a_template_that_does_not_compile_is_a_template_error() -> None:
    with pytest.raises(TemplateError, match="does not compile"):
        jinja_template("{% for m in messages %}", bos_token=None, eos_token=None)


_ENTRY = """
[[model]]
slug = "m"
name = "M"
family = "qwen2"
source = "{source}"
{template}
"""


def test_file_is_the_default_for_gguf_sources_and_refused_without_a_file() -> None:
    (entry,) = parse_catalogue(_ENTRY.format(source="gguf:/x.gguf", template=""))
    assert entry.template == "file"
    with pytest.raises(ValueError, match="field 'template' 'file' needs a model file"):
        parse_catalogue(_ENTRY.format(source="tiny:qwen2", template='template = "file"'))
    with pytest.raises(ValueError, match="field 'template' is missing"):
        parse_catalogue(_ENTRY.format(source="tiny:qwen2", template=""))


def test_a_file_without_a_template_names_the_fix() -> None:
    (entry,) = parse_catalogue(_ENTRY.format(source="gguf:/x.gguf", template='template = "file"'))
    with pytest.raises(ModelBuildError, match="its file has no chat template; set template"):
        template_for(entry, load_tiny("qwen2"))  # tiny models carry no chat template


def test_the_file_template_is_rendered_with_the_tokenizers_specials() -> None:
    (entry,) = parse_catalogue(_ENTRY.format(source="gguf:/x.gguf", template=""))
    loaded = load_tiny("qwen2")
    loaded.metadata["chat_template"] = (
        "{{ bos_token }}{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}")
    template = template_for(entry, loaded)
    assert template.render([ChatMessage("user", "hi")]) == "hi<|im_end|>"  # Qwen: no BOS
    assert template.stop_tokens == ("<|im_end|>",)
