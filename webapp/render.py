"""Model output is text: it is shown with ``st.code``/``st.text`` (escaped), never as Markdown or HTML.

A reply containing ``<script>`` or Markdown links must appear verbatim, so nothing a model writes can
inject markup into the page.
"""

from __future__ import annotations

from typing import Any

# Grader labels (scenarios) -> the study's badges.
BADGES: dict[str, str] = {"correct": "✓", "partial": "🍄", "garbage": "🔥", "many": "🔥🔥", "fixed": "🥦"}


def reply(container: Any, text: str, *, cursor: bool = False) -> None:
    """Show a model reply (possibly still streaming) as wrapped, escaped code text."""
    shown = text + (" ▌" if cursor else "")
    container.code(shown or " ", language=None, wrap_lines=True)


def visitor_text(container: Any, text: str) -> None:
    """Show what the visitor typed; also escaped."""
    container.text(text)


def badge(label: str | None) -> str:
    return BADGES.get(label or "", "")


def turn_caption(*, role: str, kind: str, badge_text: str = "") -> str:
    """A short plain-text caption above a message (no Markdown from user or model content)."""
    who = "You" if role == "user" else "Model"
    what = {"correction": " (correction)", "request": "", "reply": ""}.get(kind, "")
    return f"{who}{what} {badge_text}".strip()


def show_error(container: Any, message: str) -> None:
    """A failed generation: a clear error on that side only.

    The engine's message is shown with ``st.text`` below a fixed headline, never inside ``st.error``
    (whose body is Markdown): an error text like ``![x](http://…)`` would otherwise load a remote image
    in the visitor's browser.
    """
    box = container.container()
    box.error("Generation failed. The engine said:", icon="⚠️")
    box.text(message)
