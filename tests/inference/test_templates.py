"""Chat templates: exact renders, system folding, validation, stop tokens, left trimming."""

from __future__ import annotations

from typing import Final

import pytest

from inference.chat_template import PromptTooLongError, TemplateError, fit_to_context
from inference.families import all_templates, get_template
from inference.protocol import ChatMessage
from inference.tiny import SPECIAL_TOKENS, tiny_tokenizer

S: Final = "system"
U: Final = "user"
A: Final = "assistant"
CONVERSATION = [
    ChatMessage(S, "Be brief."),
    ChatMessage(U, "Hi"),
    ChatMessage(A, "Hello!"),
    ChatMessage(U, "2+2?"),
]

EXPECTED = {
    "chatml": "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
    "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n",
    "llama3": "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
    "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>"
    "\n\nHello!<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n",
    "gemma": "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
    "<start_of_turn>model\nHello!<end_of_turn>\n"
    "<start_of_turn>user\n2+2?<end_of_turn>\n<start_of_turn>model\n",
    "mistral": "<s>[INST] Be brief.\n\nHi [/INST] Hello!</s>[INST] 2+2? [/INST]",
    "vicuna": "<s>Be brief. USER: Hi ASSISTANT: Hello!</s>USER: 2+2? ASSISTANT:",
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_render_matches_the_reference_format(name: str) -> None:
    assert get_template(name).render(CONVERSATION) == EXPECTED[name]


def test_every_template_is_covered() -> None:
    assert set(all_templates()) == set(EXPECTED)


@pytest.mark.parametrize("name", ["gemma", "mistral"])
def test_families_without_system_role_fold_it_into_the_first_user_turn(name: str) -> None:
    template = get_template(name)
    assert not template.supports_system
    folded = template.normalise(CONVERSATION)
    assert [m.role for m in folded] == [U, A, U]
    assert folded[0].content == "Be brief.\n\nHi"
    assert folded[2].content == "2+2?"  # only the first user turn carries it


def test_system_prompt_alone_becomes_a_user_turn_where_unsupported() -> None:
    assert get_template("gemma").normalise([ChatMessage(S, "Only rules")]) == [ChatMessage(U, "Only rules")]


def test_vicuna_uses_its_default_preamble_when_no_system_message() -> None:
    text = get_template("vicuna").render([ChatMessage(U, "Hi")])
    assert text.startswith("<s>A chat between a curious user and an artificial intelligence assistant.")
    assert text.endswith("USER: Hi ASSISTANT:")


def test_without_generation_prompt_the_render_ends_after_the_last_turn() -> None:
    text = get_template("chatml").render(CONVERSATION[:3], add_generation_prompt=False)
    assert text.endswith("Hello!<|im_end|>\n")


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [ChatMessage(A, "I start")],
        [ChatMessage(U, "a"), ChatMessage(U, "b")],
        [ChatMessage(U, "a"), ChatMessage(A, "b"), ChatMessage(S, "late system")],
    ],
    ids=["empty", "assistant-first", "two-users", "system-in-the-middle"],
)
def test_bad_role_order_is_a_clear_error(messages: list[ChatMessage]) -> None:
    with pytest.raises(TemplateError):
        get_template("chatml").render(messages)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_stop_tokens_and_markup_are_single_tokens_for_the_tiny_tokenizer(name: str) -> None:
    tokenizer = tiny_tokenizer("llama")
    for stop in get_template(name).stop_tokens:
        if stop in SPECIAL_TOKENS:
            assert tokenizer.encode(stop) == [tokenizer.token_to_id(stop)]
    rendered = get_template(name).render(CONVERSATION)
    assert tokenizer.decode(tokenizer.encode(rendered)) == rendered


def _count(text: str) -> int:
    return len(tiny_tokenizer("llama").encode(text))


def _history(turns: int) -> list[ChatMessage]:
    messages = [ChatMessage(S, "SYSTEM RULES")]
    for i in range(turns):
        messages += [ChatMessage(U, f"question {i} " + "x" * 40), ChatMessage(A, f"answer {i} " + "y" * 40)]
    messages.append(ChatMessage(U, "the last question"))
    return messages


def test_trimming_drops_oldest_turns_first_and_keeps_the_system_prompt() -> None:
    template = get_template("chatml")
    messages = _history(6)
    full = _count(template.render(messages))
    limit = full - 100  # forces dropping about two exchanges
    kept, prompt = fit_to_context(template, messages, count_tokens=_count, max_prompt_tokens=limit)
    assert _count(prompt) <= limit
    assert kept[0] == messages[0]
    assert kept[-1] == messages[-1]
    assert kept[1].role == U  # history still starts with a user turn
    assert kept == [messages[0], *messages[len(messages) - len(kept) + 1 :]]  # a contiguous newest tail
    assert "question 0" not in prompt and "question 5" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")  # never cut on the right


def test_trimming_is_a_no_op_when_everything_fits() -> None:
    messages = _history(2)
    template = get_template("gemma")
    kept, prompt = fit_to_context(template, messages, count_tokens=_count, max_prompt_tokens=10_000)
    assert kept == messages
    assert prompt == get_template("gemma").render(messages)


def test_trimming_can_go_down_to_system_plus_last_question() -> None:
    template = get_template("llama3")
    messages = _history(3)
    minimal = _count(template.render([messages[0], messages[-1]]))
    kept, _ = fit_to_context(template, messages, count_tokens=_count, max_prompt_tokens=minimal)
    assert kept == [messages[0], messages[-1]]
    with pytest.raises(PromptTooLongError):
        fit_to_context(template, messages, count_tokens=_count, max_prompt_tokens=minimal - 1)
