"""A contestant served by any OpenAI-compatible engine (vLLM, JetStream, TGI, llama.cpp's server).

:class:`RemoteChatModel` implements :class:`inference.protocol.ChatModel` over ``POST /v1/chat/completions``
with ``stream: true``: the server answers with server-sent events, one JSON chunk per ``data:`` line, and we
turn their content deltas into :class:`TextDelta` events as they arrive. It uses only the standard library
(``http.client``), so timeouts and closing the socket are under our control.

Failure policy, chosen so that a visitor never sees a reply spliced from two attempts:

* Connection errors, timeouts, HTTP 429 and 5xx, and a stream that ends before any text are retried with
  exponential backoff (``backoff * 2**attempt`` seconds, at most ``max_retries`` times) -- but only while
  no text has been handed to the caller. After the first token, any failure ends the reply with
  ``finish_reason="error"`` and the text so far.
* Other HTTP errors (400, 401, 404 ...) and malformed events are not retried: they will not heal.
* ``stream()`` never raises: every failure becomes a final :class:`GenerationResult` with ``error`` set.
* Cancellation (the caller's :class:`CancelToken`) shuts the socket down at once, also while the server
  is silent, and ends with ``finish_reason="cancelled"``.

Bounds, so that a hostile or broken engine cannot hold a reply, a thread or memory (constructor arguments,
see :class:`RemoteChatModel`):

* ``total_timeout``: a wall-clock deadline for the whole reply, every attempt and backoff included.
* ``idle_timeout``: the longest time without progress. Only a content delta is progress: keep-alive
  comments, empty chunks and a line that trickles in byte by byte do not reset it (``read_timeout``
  still bounds the silence between two reads). A watcher thread shuts the socket down when either
  expires, also in the middle of a read.
* Tokens and characters: the request's own ``max_new_tokens`` is enforced on our side (one content chunk
  counts as one token; engines send at most one chunk per token), and the text is cut at
  ``max_chars_per_token * max_new_tokens`` characters. At the cap the reply ends with
  ``finish_reason="length"``; a few more events are read for the engine's finish reason and usage, then
  the connection is closed (not pooled) unless the engine ended the stream properly.
* ``max_line_bytes`` / ``max_event_bytes``: a longer line or event is refused while it is read (a bounded
  ``readline``), never buffered whole.
* Usage figures that are negative, not integers, larger than the prompt could plausibly be, or larger
  than the tokens asked for are dropped (the token count falls back to the chunks received).
* Text: every delta, the result's text and the error are passed through
  :func:`inference.protocol.clean_text` (lone surrogates and NUL become U+FFFD).

A reply that breaks one of these ends with ``finish_reason="error"`` (time, oversized lines, bytes that
are not UTF-8) or ``"length"`` (tokens, characters), keeping the text so far; its connection is closed.

Layout: this module holds the model -- the request body (:func:`request_body`), connections (kept alive
between requests, at most eight idle), the attempt loop with its retries and backoff, and the final
:class:`GenerationResult`. Reading one response (status, server-sent events and their byte caps, the token
and character caps, usage clamping, the deadlines and the watcher thread, finish reasons) lives in
:mod:`inference.remote_stream`; :class:`RemoteError` is defined there and importable from here.

The API key is passed in by the caller (the pool reads it from ``settings.remote_api_keys``); this module
reads no environment variables and never writes the key into errors or ``repr``.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

from inference.protocol import (
    CancelToken,
    ChatMessage,
    FinishReason,
    GenerationParams,
    GenerationResult,
    StreamEvent,
    TextDelta,
    clean_text,
)
from inference.remote_stream import (
    CANCEL_POLL_S,
    Cancelled,
    Clock,
    Limits,
    RemoteError,
    Reply,
    Watcher,
    check_status,
    describe,
    drained,
    map_finish_reason,
    plausible_prompt_tokens,
    read_events,
)

__all__ = [
    "DEFAULT_IDLE_TIMEOUT_S",
    "DEFAULT_MAX_CHARS_PER_TOKEN",
    "DEFAULT_MAX_EVENT_BYTES",
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_TOTAL_TIMEOUT_S",
    "RemoteChatModel",
    "RemoteError",
    "request_body",
]

logger = logging.getLogger(__name__)

_MAX_BACKOFF_S = 30.0
_MAX_IDLE_CONNECTIONS = 8  # kept alive per remote model (one per stream that ran at once, up to this)

# The defaults of the bounds (see the module docstring).
DEFAULT_TOTAL_TIMEOUT_S = 300.0
DEFAULT_IDLE_TIMEOUT_S = 60.0
DEFAULT_MAX_CHARS_PER_TOKEN = 32
DEFAULT_MAX_LINE_BYTES = 64 * 1024  # a chunk is a few hundred bytes
DEFAULT_MAX_EVENT_BYTES = 256 * 1024


class RemoteChatModel:
    """A chat model behind an OpenAI-compatible streaming endpoint.

    ``base_url`` is the server root (``http://host:8000``) or its ``/v1`` prefix; both reach
    ``<root>/v1/chat/completions``. ``model`` is the engine's own model name (the ``model`` field of the
    request). ``connect_timeout`` bounds the TCP connect, ``read_timeout`` the silence between two reads.

    The bounds of every reply (see the module docstring): ``total_timeout`` seconds for the whole reply,
    retries included; ``idle_timeout`` seconds without a content delta; at most
    ``max_chars_per_token * params.max_new_tokens`` characters and ``params.max_new_tokens`` content
    chunks; lines of at most ``max_line_bytes`` and events of at most ``max_event_bytes`` bytes.
    """

    def __init__(
        self,
        slug: str,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        connect_timeout: float = 5.0,
        read_timeout: float = 60.0,
        max_retries: int = 2,
        backoff: float = 0.5,
        total_timeout: float = DEFAULT_TOTAL_TIMEOUT_S,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S,
        max_chars_per_token: int = DEFAULT_MAX_CHARS_PER_TOKEN,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        if not slug:
            raise ValueError("slug must not be empty")
        if not model:
            raise ValueError("model must not be empty")
        if connect_timeout <= 0 or read_timeout <= 0:
            raise ValueError("connect_timeout and read_timeout must be > 0 seconds")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if backoff < 0:
            raise ValueError("backoff must be >= 0 seconds")
        if not (total_timeout > 0 and idle_timeout > 0):  # also refuses NaN
            raise ValueError("total_timeout and idle_timeout must be > 0 seconds")
        if min(max_chars_per_token, max_line_bytes, max_event_bytes) < 1:
            raise ValueError("max_chars_per_token, max_line_bytes and max_event_bytes must be >= 1")
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url must be an http(s) URL with a host, got {base_url!r}")
        self._slug = slug
        self._model = model
        self._api_key = api_key
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        root = parts.path.rstrip("/")
        self._path = root + ("/chat/completions" if root.endswith("/v1") else "/v1/chat/completions")
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._max_retries = max_retries
        self._backoff = backoff
        self._total_timeout = total_timeout
        self._idle_timeout = idle_timeout
        self._max_chars_per_token = max_chars_per_token
        self._max_line_bytes = max_line_bytes
        self._max_event_bytes = max_event_bytes
        self._idle: list[http.client.HTTPConnection] = []  # keep-alive connections between requests
        self._idle_lock = threading.Lock()

    @property
    def slug(self) -> str:
        return self._slug

    @property
    def endpoint(self) -> str:
        """The full URL requests go to (no credentials in it), for logs and ``inference list``."""
        scheme = "https" if self._https else "http"
        port = f":{self._port}" if self._port else ""
        return f"{scheme}://{self._host}{port}{self._path}"

    def __repr__(self) -> str:
        return f"RemoteChatModel(slug={self._slug!r}, endpoint={self.endpoint!r}, model={self._model!r})"

    def stream(
        self,
        messages: Sequence[ChatMessage],
        params: GenerationParams,
        *,
        cancel: CancelToken | None = None,
    ) -> Iterator[StreamEvent]:
        """Stream the engine's reply; always ends with exactly one :class:`GenerationResult`."""
        cancel = cancel or CancelToken()
        started = time.perf_counter()
        reply = Reply(parts=[])
        error: str | None = None
        try:
            body = json.dumps(request_body(model=self._model, messages=messages, params=params)).encode()
            limits = self._limits(messages, params)
            yield from self._attempts(body, reply, cancel, limits)
        except Cancelled:
            pass
        except RemoteError as exc:
            error = str(exc)
        except Exception as exc:  # noqa: BLE001 -- the protocol promises no exception escapes stream()
            logger.exception("remote model %s failed", self._slug)
            error = f"{type(exc).__name__}: {exc}"
        yield self._result(reply, started=started, cancelled=cancel.cancelled, error=error)

    def _limits(self, messages: Sequence[ChatMessage], params: GenerationParams) -> Limits:
        return Limits(
            max_tokens=params.max_new_tokens,
            max_chars=params.max_new_tokens * self._max_chars_per_token,
            max_line_bytes=self._max_line_bytes,
            max_event_bytes=self._max_event_bytes,
            max_prompt_tokens=plausible_prompt_tokens(messages),
        )

    def _attempts(
        self, body: bytes, reply: Reply, cancel: CancelToken, limits: Limits
    ) -> Iterator[TextDelta]:
        """Run attempts until one succeeds, retrying only while nothing was yielded, all within
        ``total_timeout``."""
        clock = Clock(self._total_timeout, self._idle_timeout)
        attempt = 0
        while True:
            if cancel.cancelled:
                raise Cancelled
            clock.progress()  # each attempt has its own idle time (the deadline stays)
            try:
                yield from self._one_attempt(body, reply, cancel, clock, limits)
                return
            except RemoteError as exc:
                if cancel.cancelled:
                    raise Cancelled from exc
                if reply.capped:  # the text we take is complete; what failed is the tail after the cap
                    reply.truncated = True
                    return
                if not exc.retryable or reply.parts or attempt >= self._max_retries:
                    raise
                delay = min(self._backoff * 2**attempt, _MAX_BACKOFF_S)
                if exc.retry_after is not None:
                    delay = max(delay, min(exc.retry_after, _MAX_BACKOFF_S))
                if delay >= clock.left():
                    raise RemoteError(f"no complete reply within the {clock.total:g} s limit "
                                      f"(last attempt: {exc})", retryable=False) from exc
                logger.warning(
                    "remote model %s: attempt %d failed (%s); retrying in %.2fs",
                    self._slug, attempt + 1, exc, delay,
                )
                _sleep_unless_cancelled(delay, cancel)
                reply.finish_reason = reply.prompt_tokens = reply.completion_tokens = None
                attempt += 1

    def _one_attempt(
        self, body: bytes, reply: Reply, cancel: CancelToken, clock: Clock, limits: Limits
    ) -> Iterator[TextDelta]:
        watcher = Watcher(cancel, clock)
        conn: http.client.HTTPConnection | None = None
        reusable = False
        watcher.start()
        try:
            conn, response = self._send(body, watcher, clock)
            check_status(response)
            yield from read_events(response, reply, cancel, clock, limits)
            reusable = (reply.done and not cancel.cancelled and not watcher.fired
                        and drained(response, conn.sock))
        except RemoteError as exc:
            if cancel.cancelled:
                raise Cancelled from exc
            overdue = clock.overdue_error()  # the watcher cut the connection: say why
            if overdue is not None:
                raise overdue from exc
            raise
        finally:
            watcher.stop()
            if conn is not None:
                if reusable:
                    self._give_back(conn)
                else:
                    conn.close()

    def _send(
        self, body: bytes, watcher: Watcher, clock: Clock
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """POST the request on an idle keep-alive connection, else a new one; a kept connection the server
        has closed meanwhile is dropped and the request sent once more on a fresh one (not a retry: the
        server never saw it)."""
        conn = self._take_idle()
        if conn is not None:
            watcher.watch(conn)
            try:
                return conn, self._post(conn, body)
            except RemoteError:
                conn.close()
        conn = self._connection(timeout=max(min(self._connect_timeout, clock.left()), 0.001))
        watcher.watch(conn)
        try:
            conn.connect()
        except (TimeoutError, OSError) as exc:
            conn.close()
            raise RemoteError(f"cannot connect to {self.endpoint}: {describe(exc)}", retryable=True) from exc
        try:
            return conn, self._post(conn, body)
        except RemoteError:
            conn.close()
            raise

    def _post(self, conn: http.client.HTTPConnection, body: bytes) -> http.client.HTTPResponse:
        if conn.sock is not None:
            conn.sock.settimeout(self._read_timeout)
        try:
            conn.request("POST", self._path, body=body, headers=self._headers())
            return conn.getresponse()
        except (TimeoutError, OSError, http.client.HTTPException) as exc:
            raise RemoteError(f"no response from {self.endpoint}: {describe(exc)}", retryable=True) from exc

    def _take_idle(self) -> http.client.HTTPConnection | None:
        with self._idle_lock:
            return self._idle.pop() if self._idle else None

    def _give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._idle_lock:
            if len(self._idle) < _MAX_IDLE_CONNECTIONS:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        """Close the idle keep-alive connections (a stream in progress keeps its own)."""
        with self._idle_lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _connection(self, *, timeout: float) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        return cls(self._host, self._port, timeout=timeout)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _result(
        self, reply: Reply, *, started: float, cancelled: bool, error: str | None
    ) -> GenerationResult:
        finish: FinishReason
        if cancelled:
            finish, error = "cancelled", None
        elif error is not None:
            finish = "error"
        elif reply.truncated:
            finish = "length"
        else:
            finish, error = map_finish_reason(reply.finish_reason)
        ttft = None if reply.first_token_at is None else (reply.first_token_at - started) * 1000.0
        return GenerationResult(
            text=clean_text(reply.text),  # each part is clean already; cheap insurance for the whole
            finish_reason=finish,
            prompt_tokens=reply.prompt_tokens or 0,
            new_tokens=reply.chunks_with_text if reply.completion_tokens is None else reply.completion_tokens,
            ttft_ms=ttft,
            total_ms=(time.perf_counter() - started) * 1000.0,
            error=None if error is None else clean_text(error),
        )


def request_body(*, model: str, messages: Sequence[ChatMessage], params: GenerationParams) -> dict[str, Any]:
    """The JSON request. Every sampling setting is sent explicitly, so the server's own defaults never
    apply (llama.cpp's server samples with top_k 40, min_p 0.05 and a repeat penalty of 1.1 unless told
    otherwise): ``top_k`` 0 and ``min_p`` 0 are off, penalties are neutral. ``seed`` only when set (none:
    the server draws one). Usage is asked for in the stream (``stream_options.include_usage``)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": m.role, "content": m.content} for m in messages],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": params.max_new_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k,  # vLLM, TGI and llama.cpp read it
        "min_p": 0.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "repeat_penalty": 1.0,  # llama.cpp's name
        "repetition_penalty": 1.0,  # vLLM's and TGI's
    }
    if params.seed is not None:
        body["seed"] = params.seed
    return body


def _sleep_unless_cancelled(seconds: float, cancel: CancelToken) -> None:
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if cancel.cancelled:
            raise Cancelled
        time.sleep(min(left, CANCEL_POLL_S))
    if cancel.cancelled:
        raise Cancelled
