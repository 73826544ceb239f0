"""Model output is text: it is shown with ``st.code``/``st.text`` (escaped), never as Markdown or HTML.

A reply containing ``<script>`` or Markdown links must appear verbatim, so nothing a model writes can
inject markup into the page.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from inference.protocol import clean_text
from scenarios.explain import LEGEND

# Grader labels (scenarios) -> the study's badges; LEGEND says what each means.
BADGES: dict[str, str] = {"correct": "✓", "partial": "🍄", "garbage": "🔥", "many": "🔥🔥", "fixed": "🥦"}
__all__ = ["BADGES", "LEGEND", "badge", "grader_notes", "reply", "show_error", "turn_caption", "visitor_text"]


def reply(container: Any, text: str, *, cursor: bool = False) -> None:
    """Show a model reply (possibly still streaming) as wrapped, escaped code text; what cannot be
    encoded (a lone surrogate from a broken engine) is drawn as U+FFFD instead of crashing the page."""
    shown = clean_text(text) + (" ▌" if cursor else "")
    container.code(shown or " ", language=None, wrap_lines=True)


def visitor_text(container: Any, text: str) -> None:
    """Show what the visitor typed; also escaped (and cleaned, as replies are)."""
    container.text(clean_text(text))


def grader_notes(container: Any, notes: Sequence[str]) -> None:
    """A graded reply's mistakes in words, under it (plain text: a note may quote the reply)."""
    container.text("Grader: " + "; ".join(clean_text(note) for note in notes))


def badge(label: str | None) -> str:
    return BADGES.get(label or "", "")


def turn_caption(*, role: str, kind: str, badge_text: str = "") -> str:
    """A short plain-text caption above a message (no Markdown from user or model content)."""
    who = "You" if role == "user" else "Model"
    what = {"correction": " (correction)", "request": "", "reply": ""}.get(kind, "")
    return f"{who}{what} {badge_text}".strip()


def show_error(container: Any, message: str) -> None:
    """A failed generation: a clear error on that side only, in our words (``message`` never holds an
    engine's own text, which could name the model: see ``webapp.flows.send_turn.public_error``).

    The message is shown with ``st.text`` below a fixed headline, never inside ``st.error`` (whose body
    is Markdown).
    """
    box = container.container()
    box.error("This model could not reply. Retry this side, or go on with the other.", icon="⚠️")
    box.text(clean_text(message))
