"""Mistral instruct (v0.1-v0.3): ``[INST] ... [/INST]`` pairs, no system role."""

from __future__ import annotations

from collections.abc import Sequence

from inference.chat_template import ChatTemplate
from inference.protocol import ChatMessage


def _mistral(turns: Sequence[ChatMessage], add_generation_prompt: bool) -> str:
    # Each finished exchange ends with </s>; the open one ends after [/INST], where the reply starts.
    # add_generation_prompt changes nothing: the [/INST] after a user turn already is the reply header.
    parts = ["<s>"]
    for m in turns:
        if m.role == "user":
            parts.append(f"[INST] {m.content.strip()} [/INST]")
        else:
            parts.append(f" {m.content.strip()}</s>")
    return "".join(parts)


MISTRAL = ChatTemplate(name="mistral", render_turns=_mistral, stop_tokens=("</s>",), supports_system=False)
