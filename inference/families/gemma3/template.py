"""The Gemma chat template (Gemma, Gemma 2, CodeGemma, Gemma 3): no system role, ``model`` speaks."""

from __future__ import annotations

from collections.abc import Sequence

from inference.chat_template import ChatTemplate
from inference.protocol import ChatMessage


def _gemma(turns: Sequence[ChatMessage], add_generation_prompt: bool) -> str:
    # Gemma has no system role: ChatTemplate.normalise folds it into the first user turn.
    text = "<bos>" + "".join(
        f"<start_of_turn>{'model' if m.role == 'assistant' else 'user'}\n{m.content}<end_of_turn>\n"
        for m in turns
    )
    return text + ("<start_of_turn>model\n" if add_generation_prompt else "")


GEMMA = ChatTemplate(
    name="gemma", render_turns=_gemma, stop_tokens=("<end_of_turn>", "<eos>"), supports_system=False
)
