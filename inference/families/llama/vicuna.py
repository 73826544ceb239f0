"""Vicuna 1.5 (a Llama fine-tune, loaded as a Llama preset): a system preamble, then ``USER: ...
ASSISTANT: ...</s>`` turns."""

from __future__ import annotations

from collections.abc import Sequence

from inference.chat_template import ChatTemplate
from inference.protocol import ChatMessage

VICUNA_SYSTEM = (
    "A chat between a curious user and an artificial intelligence assistant. "
    "The assistant gives helpful, detailed, and polite answers to the user's questions."
)


def _vicuna(turns: Sequence[ChatMessage], add_generation_prompt: bool) -> str:
    # FastChat's "vicuna_v1.1" separator style: system + " ", turns joined by " ", replies end in </s>.
    parts = ["<s>"]
    for m in turns:
        if m.role == "system":
            parts.append(f"{m.content} ")
        elif m.role == "user":
            parts.append(f"USER: {m.content} ")
        else:
            parts.append(f"ASSISTANT: {m.content}</s>")
    if add_generation_prompt:
        parts.append("ASSISTANT:")
    return "".join(parts)


VICUNA = ChatTemplate(
    name="vicuna", render_turns=_vicuna, stop_tokens=("</s>",), default_system=VICUNA_SYSTEM
)
