"""The power-of-two shape buckets both engines compile for, so a handful of programs serve every request.

Prompts are right-padded to a prompt bucket and caches sized to a cache bucket; padding after the prompt
is harmless (attention is causal, and decode steps overwrite cache slots in order).
"""

from __future__ import annotations

MIN_PROMPT_BUCKET = 32
MIN_CACHE_BUCKET = 128


def bucket(n: int, *, minimum: int, maximum: int) -> int:
    """Smallest power of two >= ``n`` (and >= ``minimum``), capped at ``maximum``."""
    if n > maximum:
        raise ValueError(f"length {n} exceeds the maximum {maximum}")
    size = minimum
    while size < n:
        size *= 2
    return min(size, maximum)


def cache_bucket(total: int, *, max_length: int) -> int:
    """The cache length that holds ``total`` tokens (prompt + new) in a context of ``max_length``."""
    return bucket(total, minimum=min(MIN_CACHE_BUCKET, max_length), maximum=max_length)


def prompt_bucket(length: int, *, max_length: int) -> int:
    """The padded width of a prompt of ``length`` tokens (at most ``max_length``)."""
    return bucket(length, minimum=min(MIN_PROMPT_BUCKET, max_length), maximum=max_length)
