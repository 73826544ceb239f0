"""Chat templates of the Llama-architecture models: ChatML (SmolLM2) and Llama 3 / 3.1 / 3.2."""

from __future__ import annotations

from collections.abc import Sequence

from inference.chat_template import ChatTemplate
from inference.protocol import ChatMessage


def _chatml(turns: Sequence[ChatMessage], add_generation_prompt: bool) -> str:
    # SmolLM2's file template: no BOS (add_bos is false), every turn closed by <|im_end|> and a newline.
    text = "".join(f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n" for m in turns)
    return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


def _llama3(turns: Sequence[ChatMessage], add_generation_prompt: bool) -> str:
    text = "<|begin_of_text|>" + "".join(
        f"<|start_header_id|>{m.role}<|end_header_id|>\n\n{m.content.strip()}<|eot_id|>" for m in turns
    )
    return text + ("<|start_header_id|>assistant<|end_header_id|>\n\n" if add_generation_prompt else "")


CHATML = ChatTemplate(name="chatml", render_turns=_chatml, stop_tokens=("<|im_end|>", "<|endoftext|>"))
LLAMA3 = ChatTemplate(
    name="llama3", render_turns=_llama3, stop_tokens=("<|eot_id|>", "<|end_of_text|>", "<|eom_id|>")
)
