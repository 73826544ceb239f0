"""Chat templates: turn a message list into the exact prompt text a model was trained on.

Each family's template lives next to its loader (``families/<family>/template.py``) and is registered by
its family record (:func:`inference.families.get_template`); this module holds the shared machinery
and imports no family. We render prompts ourselves, with the model's special tokens written as text, and
the family tokenizer encodes them as single ids. That is why no keras-hub preprocessor is involved (it
would prepend a second start token) and why trimming works in tokens of the real prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from inference.protocol import ChatMessage


class TemplateError(ValueError):
    """Messages a template cannot render (empty, unknown role, a system turn in the middle)."""


class PromptTooLongError(ValueError):
    """Even the system prompt plus the last user turn do not fit the context."""


@dataclass(frozen=True)
class ChatTemplate:
    """How one family writes a conversation.

    ``render_turns`` receives messages that are already normalised: an optional leading system message
    (only when ``supports_system``), then alternating user/assistant turns starting with a user turn.
    ``stop_tokens`` are special-token strings that end a reply; ``default_system`` is used when the
    conversation has none (Vicuna's preamble).
    """

    name: str
    render_turns: Callable[[Sequence[ChatMessage], bool], str]
    stop_tokens: tuple[str, ...]
    supports_system: bool = True
    default_system: str | None = None

    def render(self, messages: Sequence[ChatMessage], *, add_generation_prompt: bool = True) -> str:
        """The prompt text for ``messages``; with ``add_generation_prompt`` it ends where the reply starts."""
        return self.render_turns(self.normalise(messages), add_generation_prompt)

    def normalise(self, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
        """Validate roles and order; fold the system prompt into the first user turn if unsupported."""
        if not messages:
            raise TemplateError("no messages to render")
        system: str | None = None
        turns = list(messages)
        if turns[0].role == "system":
            system = turns.pop(0).content
        for i, message in enumerate(turns):
            expected = "user" if i % 2 == 0 else "assistant"
            if message.role != expected:
                raise TemplateError(
                    f"message {i + (system is not None)} has role {message.role!r}, expected {expected!r}: "
                    "after an optional system message, turns must alternate user/assistant"
                )
        if system is None:
            system = self.default_system
        if system is None:
            return turns
        if self.supports_system:
            return [ChatMessage("system", system), *turns]
        if not turns:
            return [ChatMessage("user", system)]
        first = turns[0]
        return [ChatMessage("user", f"{system}\n\n{first.content}"), *turns[1:]]


def fit_to_context(
    template: ChatTemplate,
    messages: Sequence[ChatMessage],
    *,
    count_tokens: Callable[[str], int],
    max_prompt_tokens: int,
) -> tuple[list[ChatMessage], str]:
    """Drop the oldest turns (keeping the system prompt) until the rendered prompt fits.

    Returns the kept messages and their rendered prompt. Turns go in user/assistant pairs so the history
    still starts with a user turn. The prompt is never cut on the right: the end carries the question
    and the reply header, the part that matters most.
    """
    kept = list(messages)
    head = [kept.pop(0)] if kept and kept[0].role == "system" else []
    while True:
        prompt = template.render([*head, *kept])
        if count_tokens(prompt) <= max_prompt_tokens:
            return [*head, *kept], prompt
        if len(kept) <= 1:
            raise PromptTooLongError(
                f"the system prompt and last message need more than {max_prompt_tokens} tokens; "
                "shorten them or raise the context length"
            )
        kept = kept[2:] if len(kept) > 2 else kept[-1:]


# Markers that end a turn in the chat templates we know; a file template's stop tokens are the ones its
# own source writes (plus the tokenizer's end-of-sequence, which the model adds itself).
_TURN_END_MARKERS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<end_of_turn>", "</s>",
                     "<|end|>")


def jinja_template(source: str, *, bos_token: str | None, eos_token: str | None,
                   name: str = "file") -> ChatTemplate:
    """A :class:`ChatTemplate` that renders a model file's own Jinja ``tokenizer.chat_template``.

    Rendered as Hugging Face transformers and llama.cpp do: jinja2's ``ImmutableSandboxedEnvironment``
    (a template can call no Python it was not handed, nor change what it was handed) with
    ``trim_blocks``/``lstrip_blocks``, ``raise_exception``, a ``tojson`` that keeps non-ASCII text, and
    the variables ``messages`` (role/content dicts), ``add_generation_prompt``, ``bos_token``,
    ``eos_token`` and ``tools`` (None). The file's template writes its own default system prompt (Qwen's
    "You are Qwen ..."), so the template has no ``default_system``. Raises :class:`TemplateError` for a
    template that does not compile.
    """
    import json

    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(f"the model file's chat template refused the messages: {message}")

    def tojson(value: object, indent: int | None = None) -> str:
        return json.dumps(value, ensure_ascii=False, indent=indent)

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                undefined=jinja2.Undefined)
    environment.filters["tojson"] = tojson
    environment.globals["raise_exception"] = raise_exception
    try:
        compiled = environment.from_string(source)
    except jinja2.TemplateError as exc:
        raise TemplateError(f"the model file's chat template does not compile: {exc}") from exc

    def render(turns: Sequence[ChatMessage], add_generation_prompt: bool) -> str:
        messages = [{"role": m.role, "content": m.content} for m in turns]
        try:
            return str(compiled.render(messages=messages, add_generation_prompt=add_generation_prompt,
                                       bos_token=bos_token or "", eos_token=eos_token or "", tools=None))
        except jinja2.TemplateError as exc:
            raise TemplateError(f"the model file's chat template failed: {exc}") from exc

    stops = tuple(m for m in _TURN_END_MARKERS if m in source)
    if eos_token and eos_token not in stops:
        stops = (*stops, eos_token)
    return ChatTemplate(name=name, render_turns=render, stop_tokens=stops)
