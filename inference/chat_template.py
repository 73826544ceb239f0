"""Chat templates: turn a message list into the exact prompt text a model was trained on.

Each family's template lives next to its loader (``families/<family>/template.py``); this module holds
the shared machinery. We render prompts ourselves, with the model's special tokens written as text, and
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


def get_template(name: str) -> ChatTemplate:
    """The template registered under ``name`` (the catalogue's ``template`` field)."""
    templates = all_templates()
    if name not in templates:
        raise KeyError(f"unknown chat template {name!r}; known: {', '.join(sorted(templates))}")
    return templates[name]


def all_templates() -> dict[str, ChatTemplate]:
    """Every shipped template by name; each family folder contributes its own."""
    from inference.families.gemma3.template import GEMMA
    from inference.families.llama.template import CHATML, LLAMA3
    from inference.families.mistral.template import MISTRAL
    from inference.families.vicuna.template import VICUNA

    return {t.name: t for t in (CHATML, LLAMA3, GEMMA, MISTRAL, VICUNA)}
