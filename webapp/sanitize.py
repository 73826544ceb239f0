"""Model output made storable: what a model writes is text, and some of it cannot be stored as text.

A NUL character or a lone surrogate (a tokenizer can emit either) would be refused by ``db`` (both
backends refuse them alike); the visitor would lose the reply. They become U+FFFD, the replacement
character, so the reply is kept and the substitution is visible. Over-long text is cut at ``db``'s
absolute limit rather than refused, for the same reason.
"""

from __future__ import annotations

import re

from db.checks import HARD_MAX_CHARS

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def storable(text: str, *, max_chars: int = HARD_MAX_CHARS) -> str:
    """``text`` with NUL and lone surrogates replaced by U+FFFD, cut to ``max_chars``."""
    return _UNSTORABLE.sub(REPLACEMENT, text)[:max_chars]
