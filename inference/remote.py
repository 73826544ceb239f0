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

The API key is passed in by the caller (the pool reads it from ``settings.remote_api_keys``); this module
reads no environment variables and never writes the key into errors or ``repr``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
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
)

logger = logging.getLogger(__name__)

# How the engines name the end of a reply, mapped onto ours. Unknown reasons count as a normal stop.
_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "eos": "stop",
    "eos_token": "stop",  # TGI
    "stop_sequence": "stop",  # TGI
    "end_turn": "stop",
    "tool_calls": "stop",
    "function_call": "stop",
    "length": "length",
    "max_tokens": "length",
    "model_length": "length",
}
_SERVER_ABORTS = frozenset({"abort", "error", "content_filter", "cancelled"})
_MAX_BACKOFF_S = 30.0
_CANCEL_POLL_S = 0.05
_MAX_ERROR_BODY = 500
_MAX_LINE_BYTES = 1 << 20  # one SSE line; a chunk is a few hundred bytes, so this only stops a runaway
_MAX_IDLE_CONNECTIONS = 8  # kept alive per remote model (one per stream that ran at once, up to this)
_DRAIN_TIMEOUT_S = 0.5  # after [DONE], the end of the HTTP body; a server that sends none is not reused


class RemoteError(Exception):
    """A failed exchange with the engine; ``retryable`` says whether another attempt may succeed."""

    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


class _Cancelled(Exception):
    """The caller cancelled; unwinds the attempt loop."""


@dataclass
class _Reply:
    """What one attempt has gathered so far."""

    parts: list[str]
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    chunks_with_text: int = 0
    first_token_at: float | None = None
    done: bool = False

    @property
    def text(self) -> str:
        return "".join(self.parts)


class RemoteChatModel:
    """A chat model behind an OpenAI-compatible streaming endpoint.

    ``base_url`` is the server root (``http://host:8000``) or its ``/v1`` prefix; both reach
    ``<root>/v1/chat/completions``. ``model`` is the engine's own model name (the ``model`` field of the
    request). ``connect_timeout`` bounds the TCP connect, ``read_timeout`` the silence between two reads.
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
        reply = _Reply(parts=[])
        error: str | None = None
        try:
            body = json.dumps(request_body(model=self._model, messages=messages, params=params)).encode()
            yield from self._attempts(body, reply, cancel)
        except _Cancelled:
            pass
        except RemoteError as exc:
            error = str(exc)
        except Exception as exc:  # noqa: BLE001 -- the protocol promises no exception escapes stream()
            logger.exception("remote model %s failed", self._slug)
            error = f"{type(exc).__name__}: {exc}"
        yield self._result(reply, started=started, cancelled=cancel.cancelled, error=error)

    def _attempts(self, body: bytes, reply: _Reply, cancel: CancelToken) -> Iterator[TextDelta]:
        """Run attempts until one succeeds, retrying only while nothing was yielded."""
        attempt = 0
        while True:
            if cancel.cancelled:
                raise _Cancelled
            try:
                yield from self._one_attempt(body, reply, cancel)
                return
            except RemoteError as exc:
                if cancel.cancelled:
                    raise _Cancelled from exc
                if not exc.retryable or reply.parts or attempt >= self._max_retries:
                    raise
                delay = min(self._backoff * 2**attempt, _MAX_BACKOFF_S)
                if exc.retry_after is not None:
                    delay = max(delay, min(exc.retry_after, _MAX_BACKOFF_S))
                logger.warning(
                    "remote model %s: attempt %d failed (%s); retrying in %.2fs",
                    self._slug, attempt + 1, exc, delay,
                )
                _sleep_unless_cancelled(delay, cancel)
                reply.finish_reason = reply.prompt_tokens = reply.completion_tokens = None
                attempt += 1

    def _one_attempt(self, body: bytes, reply: _Reply, cancel: CancelToken) -> Iterator[TextDelta]:
        conn, response = self._send(body)
        watcher = _CancelWatcher(conn, cancel)
        reusable = False
        try:
            watcher.start()
            _check_status(response)
            yield from _read_events(response, reply, cancel)
            reusable = reply.done and not cancel.cancelled and _drained(response, conn.sock)
        finally:
            watcher.stop()
            if reusable:
                self._give_back(conn)
            else:
                conn.close()

    def _send(self, body: bytes) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """POST the request on an idle keep-alive connection, else a new one; a kept connection the server
        has closed meanwhile is dropped and the request sent once more on a fresh one (not a retry: the
        server never saw it)."""
        conn = self._take_idle()
        if conn is not None:
            try:
                return conn, self._post(conn, body)
            except RemoteError:
                conn.close()
        conn = self._connection()
        try:
            conn.connect()
        except (TimeoutError, OSError) as exc:
            conn.close()
            raise RemoteError(f"cannot connect to {self.endpoint}: {_describe(exc)}", retryable=True) from exc
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
            raise RemoteError(f"no response from {self.endpoint}: {_describe(exc)}", retryable=True) from exc

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

    def _connection(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        return cls(self._host, self._port, timeout=self._connect_timeout)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _result(
        self, reply: _Reply, *, started: float, cancelled: bool, error: str | None
    ) -> GenerationResult:
        finish: FinishReason
        if cancelled:
            finish, error = "cancelled", None
        elif error is not None:
            finish = "error"
        else:
            finish, error = _map_finish_reason(reply.finish_reason)
        ttft = None if reply.first_token_at is None else (reply.first_token_at - started) * 1000.0
        return GenerationResult(
            text=reply.text,
            finish_reason=finish,
            prompt_tokens=reply.prompt_tokens or 0,
            new_tokens=reply.chunks_with_text if reply.completion_tokens is None else reply.completion_tokens,
            ttft_ms=ttft,
            total_ms=(time.perf_counter() - started) * 1000.0,
            error=error,
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


def _check_status(response: http.client.HTTPResponse) -> None:
    """Raise a :class:`RemoteError` for a non-2xx answer or a body that is not an event stream."""
    status = response.status
    if 200 <= status < 300:
        ctype = response.getheader("Content-Type", "")
        if "text/event-stream" not in ctype:
            raise RemoteError(f"expected a text/event-stream reply, got {ctype or 'no content type'!r}",
                              retryable=False)
        return
    try:
        text = response.read(_MAX_ERROR_BODY * 4).decode("utf-8", "replace")
    except (TimeoutError, OSError, http.client.HTTPException):
        text = ""
    retryable = status == 429 or status >= 500
    raise RemoteError(f"HTTP {status} from server: {_error_message(text) or response.reason}",
                      retryable=retryable, retry_after=_retry_after(response.getheader("Retry-After")))


def _read_events(
    response: http.client.HTTPResponse, reply: _Reply, cancel: CancelToken
) -> Iterator[TextDelta]:
    """Parse server-sent events (``data:`` lines, blank line ends an event) and apply each chunk."""
    data_lines: list[str] = []
    while not reply.done:
        try:
            raw = response.readline(_MAX_LINE_BYTES + 1)
        except (TimeoutError, OSError, http.client.HTTPException) as exc:
            if cancel.cancelled:
                raise _Cancelled from exc
            raise RemoteError(f"stream broke: {_describe(exc)}", retryable=True) from exc
        if cancel.cancelled:
            raise _Cancelled
        if not raw:  # end of stream
            if data_lines:
                yield from _apply_event("\n".join(data_lines), reply)
            break
        if len(raw) > _MAX_LINE_BYTES:
            raise RemoteError(f"malformed event from server: a line longer than {_MAX_LINE_BYTES} bytes",
                              retryable=False)
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if not line:
            if data_lines:
                yield from _apply_event("\n".join(data_lines), reply)
                data_lines = []
        elif line.startswith("data:"):
            data_lines.append(line[5:].removeprefix(" "))
        # other fields (event:, id:, retry:) and ":" comments carry nothing we need
    if not reply.done and reply.finish_reason is None:
        raise RemoteError("the server closed the connection before the end of the reply", retryable=True)


def _apply_event(data: str, reply: _Reply) -> Iterator[TextDelta]:
    """One ``data:`` payload: ``[DONE]``, an error object, or a chat-completion chunk."""
    if data.strip() == "[DONE]":
        reply.done = True
        return
    try:
        chunk = json.loads(data)
    except json.JSONDecodeError as exc:
        raise RemoteError(f"malformed event from server: {data[:80]!r}", retryable=False) from exc
    if not isinstance(chunk, dict):
        raise RemoteError(f"malformed event from server: {data[:80]!r}", retryable=False)
    if "error" in chunk:
        raise RemoteError(f"server error: {_error_message(json.dumps(chunk))}", retryable=False)
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        reply.prompt_tokens = _int_or_none(usage.get("prompt_tokens"))
        reply.completion_tokens = _int_or_none(usage.get("completion_tokens"))
    choices = chunk.get("choices")
    if not isinstance(choices, list):
        raise RemoteError(f"malformed chunk from server (no choices): {data[:80]!r}", retryable=False)
    if not choices:
        return  # the usage-only chunk
    choice = choices[0]
    if not isinstance(choice, dict):
        raise RemoteError(f"malformed chunk from server: {data[:80]!r}", retryable=False)
    delta = choice.get("delta") or {}
    content = delta.get("content") if isinstance(delta, dict) else None
    if content:
        if reply.first_token_at is None:
            reply.first_token_at = time.perf_counter()
        reply.parts.append(str(content))
        reply.chunks_with_text += 1
        yield TextDelta(str(content))
    if choice.get("finish_reason"):
        reply.finish_reason = str(choice["finish_reason"])


def _drained(response: http.client.HTTPResponse, sock: socket.socket | None) -> bool:
    """Read what is left of the body after ``[DONE]`` (a chunked stream's last chunk) within a short
    timeout: True when the connection may carry the next request."""
    if response.will_close or sock is None:
        return False
    try:
        sock.settimeout(_DRAIN_TIMEOUT_S)
        rest = response.read(_MAX_LINE_BYTES)
    except (TimeoutError, OSError, http.client.HTTPException):
        return False
    return not rest.strip() and response.isclosed()


def _map_finish_reason(reason: str | None) -> tuple[FinishReason, str | None]:
    if reason is None:
        return "stop", None
    if reason in _SERVER_ABORTS:
        return "error", f"the server ended the reply: {reason}"
    return _FINISH_REASONS.get(reason, "stop"), None


class _CancelWatcher:
    """A small thread that shuts the socket down when the caller cancels, waking a blocked read."""

    def __init__(self, conn: http.client.HTTPConnection, cancel: CancelToken) -> None:
        self._conn = conn
        self._cancel = cancel
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="remote-cancel-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stopped.wait(_CANCEL_POLL_S):
            if self._cancel.cancelled:
                sock = self._conn.sock
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                return


def _sleep_unless_cancelled(seconds: float, cancel: CancelToken) -> None:
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if cancel.cancelled:
            raise _Cancelled
        time.sleep(min(left, _CANCEL_POLL_S))
    if cancel.cancelled:
        raise _Cancelled


def _error_message(text: str) -> str:
    """The ``error.message`` of an OpenAI-style error body, else the body itself (shortened)."""
    try:
        payload = json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return text.strip()[:_MAX_ERROR_BODY]
    if isinstance(payload, dict):
        err = payload.get("error", payload)
        if isinstance(err, dict):
            return str(err.get("message") or err)[:_MAX_ERROR_BODY]
        return str(err)[:_MAX_ERROR_BODY]
    return text.strip()[:_MAX_ERROR_BODY]


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    return str(exc) or type(exc).__name__
