"""What the export keeps of a failed reply: a category from a closed set, never the error's own words.

A stored error text can hold anything an engine chose to say: its model's name, its endpoint, an account
or organisation id. :func:`error_category` reads the text only to choose one of :data:`ERROR_CATEGORIES`
(constants of ours), so nothing of the text itself can reach a download. It understands the shapes the
project writes (``inference.protocol.error_text``'s ``"ClassName: message"``, ``inference.remote``'s
``RemoteError`` messages such as ``"HTTP 500 from server: ..."``, ``inference.pool``'s busy and queue
messages) and the public form the web app stores (``"<category> (error <id>)"``); anything else is
``error``. Pure Python, no I/O: the web app reuses it for what a visitor reads.
"""

from __future__ import annotations

import re

TIMEOUT = "timeout"  # a deadline passed: in the model's line, waiting for the engine, or for the whole reply
BUSY = "busy"  # the model's line was full, or the engine said 429 / rate limited
UNAVAILABLE = "unavailable"  # the model or engine was not there: not ready, shut down, could not connect
REFUSED = "refused"  # the engine refused the request (HTTP 4xx other than the ones above)
TOO_LONG = "too_long"  # the prompt did not fit the context, or the engine said 413
ENGINE_ERROR = "engine_error"  # the engine failed: HTTP 5xx, a broken or malformed stream, a server error
CANCELLED = "cancelled"  # the request was cancelled
OTHER = "error"  # anything else

ERROR_CATEGORIES: tuple[str, ...] = (TIMEOUT, BUSY, UNAVAILABLE, REFUSED, TOO_LONG, ENGINE_ERROR, CANCELLED,
                                     OTHER)

# The web app's stored form: "<category> (error 1a2b3c4d)" (webapp.flows.send_turn.public_error).
_PUBLIC_FORM = re.compile(r"^([a-z_]+)(?:\s*\(error [0-9a-z]+\))?$")
_HTTP_STATUS = re.compile(r"\bhttp\s*(?:status\s*)?([1-5][0-9]{2})\b")

# Our own wording at the start of the text (exception class names and inference.remote's messages),
# checked before the HTTP status: "no complete reply within ... (last attempt: HTTP 503 ...)" is a timeout.
_LEADING: tuple[tuple[str, str], ...] = (
    ("modelbusyerror", BUSY),
    ("modelnotreadyerror", UNAVAILABLE),
    ("prompttoolongerror", TOO_LONG),
    ("timeouterror", TIMEOUT),
    ("cancellederror", CANCELLED),
    ("no complete reply within", TIMEOUT),
    ("no progress from the server", TIMEOUT),  # a stalled stream (inference.remote_stream's idle limit)
    ("cannot connect to", UNAVAILABLE),
    ("connectionrefusederror", UNAVAILABLE),
)

_TOO_LONG_WORDS = ("too long", "context length", "context window", "maximum context", "too many tokens")

# Words anywhere in the text, in order of precedence, when neither the start nor an HTTP status decides.
_KEYWORDS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("timed out", "timeout", "deadline", "waited"), TIMEOUT),
    (_TOO_LONG_WORDS, TOO_LONG),
    (("busy", "rate limit", "too many requests", "requests in line"), BUSY),
    (("cancelled", "canceled"), CANCELLED),
    (("not ready", "unavailable", "shut down", "connection refused", "cannot connect"), UNAVAILABLE),
    (("server", "remote", "engine", "stream", "malformed", "event", "chunk", "connection"), ENGINE_ERROR),
)


def _from_status(status: int) -> str:
    """The category of an HTTP status an engine answered with."""
    if status == 429:
        return BUSY
    if status in (408, 504):
        return TIMEOUT
    if status == 413:
        return TOO_LONG
    if status == 503:
        return UNAVAILABLE
    if status >= 500:
        return ENGINE_ERROR
    if status >= 400:
        return REFUSED
    return ENGINE_ERROR  # an engine that fails with a 1xx-3xx answered something it should not have


def error_category(text: str | None) -> str | None:
    """The category of a stored error text (one of :data:`ERROR_CATEGORIES`); None only for None (the
    reply did not fail). An empty text is still a failure: ``error``.

    The result is always one of our constants, whatever the text says: it never carries a word of it.
    """
    if text is None:
        return None
    lowered = " ".join(text.lower().split())
    public = _PUBLIC_FORM.match(lowered)
    if public is not None and public.group(1) in ERROR_CATEGORIES:
        return public.group(1)
    for prefix, category in _LEADING:
        if lowered.startswith(prefix):
            return category
    status = _HTTP_STATUS.search(lowered)
    if status is not None:
        category = _from_status(int(status.group(1)))
        if category == REFUSED and any(word in lowered for word in _TOO_LONG_WORDS):
            return TOO_LONG  # a 400 that says the prompt does not fit (vLLM, llama.cpp)
        return category
    for words, category in _KEYWORDS:
        if any(word in lowered for word in words):
            return category
    return OTHER
