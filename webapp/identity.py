"""Identity guard: does an anonymous reply give away which model wrote it?

A reply that names its own model or family ("As Gemma, I …", "I am SmolLM") breaks anonymity. The
battle's vote is still recorded but flagged as revealed and left out of the default leaderboard.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Words in display names that say nothing about identity.
_GENERIC = frozenset(
    {"instruct", "chat", "base", "model", "models", "it", "gguf", "tiny", "random", "test", "the", "and"}
)


def identity_terms(*, slug: str, display_name: str, family: str) -> frozenset[str]:
    """Lower-case words that would identify a contestant: family stem and the distinctive name words."""
    terms: set[str] = set()
    stem = re.sub(r"[\d._-]+$", "", family.lower())
    if len(stem) >= 3:
        terms.add(stem)
    for source in (display_name, slug):
        for word in re.split(r"[^a-z0-9]+", source.lower()):
            alpha = re.sub(r"[\d]+$", "", word)
            if len(alpha) >= 4 and alpha not in _GENERIC and not alpha.isdigit():
                terms.add(alpha)
    return frozenset(terms)


def reveals_identity(text: str, terms: Iterable[str]) -> bool:
    """True if ``text`` mentions any of ``terms`` as a word (case-insensitive; 'gemma3' counts for gemma)."""
    lowered = text.lower()
    return any(re.search(rf"(?<![a-z]){re.escape(term)}", lowered) for term in terms)
