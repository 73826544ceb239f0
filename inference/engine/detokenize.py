"""UTF-8-safe incremental detokenisation for streaming.

Byte-level BPE and SentencePiece byte-fallback tokens can split one character over several tokens, and
SentencePiece decodes a token differently depending on its left neighbour (the leading-space rule). We
therefore decode a short window of ids twice (with and without the newest ids) and emit only the
difference, holding text back while it ends in U+FFFD, the mark of an unfinished character.
"""

from __future__ import annotations

from inference.families.base import TextTokenizer

_REPLACEMENT = "\ufffd"


class IncrementalDecoder:
    """Feed ids one at a time; ``push`` returns the new, complete text (possibly empty)."""

    def __init__(self, tokenizer: TextTokenizer) -> None:
        self._tokenizer = tokenizer
        self._ids: list[int] = []
        self._prefix = 0  # start of the decode window (context for the leading-space rule)
        self._read = 0  # ids before this index have been emitted

    def push(self, token_id: int) -> str:
        self._ids.append(token_id)
        emitted = self._tokenizer.decode(self._ids[self._prefix : self._read])
        current = self._tokenizer.decode(self._ids[self._prefix :])
        if current.endswith(_REPLACEMENT) or len(current) <= len(emitted):
            return ""
        self._prefix, self._read = self._read, len(self._ids)
        return current[len(emitted) :]

    def flush(self) -> str:
        """Whatever is still held back (an unfinished character decodes as U+FFFD) at the end."""
        emitted = self._tokenizer.decode(self._ids[self._prefix : self._read])
        current = self._tokenizer.decode(self._ids[self._prefix :])
        self._prefix = self._read = len(self._ids)
        return current[len(emitted) :] if len(current) > len(emitted) else ""
