"""Reading one streamed reply from an OpenAI-compatible engine, within its bounds.

The half of :mod:`inference.remote` that knows nothing about connections or retries: given an HTTP response
whose body is server-sent events, it reads them and turns their content deltas into :class:`TextDelta`
events, gathering the reply in a :class:`Reply`.

* :func:`check_status`: a non-2xx answer or a body that is not an event stream becomes a
  :class:`RemoteError` (429 and 5xx retryable, with the server's ``Retry-After``).
* :func:`read_events` / :func:`read_line`: ``data:`` lines read with a bounded ``readline``
  (``Limits.max_line_bytes``), events capped at ``Limits.max_event_bytes``; neither is ever buffered whole.
  A line that is not UTF-8 ends the reply (:func:`decode_line`).
* :func:`apply_event`: one payload -- ``[DONE]``, an error object or a chat-completion chunk -- applied to
  the reply; the token and character caps (:func:`take_text`), usage figures clamped to what is plausible
  (:func:`plausible_count`, :func:`plausible_prompt_tokens`), every delta passed through
  :func:`inference.protocol.clean_text`.
* :class:`Clock` and :class:`Watcher`: the total and idle deadlines of a reply, and the thread that shuts
  the socket down when one of them passes or the caller cancels, also in the middle of a read.
* :func:`drained`: after ``[DONE]``, whether the rest of the body arrived so the connection may be kept.
* :func:`map_finish_reason`: the engine's finish reason mapped onto ours.

:class:`RemoteError` and :class:`Cancelled` are the two ways an attempt ends early; :mod:`inference.remote`
decides what to retry. This module does not import :mod:`inference.remote`.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from inference.protocol import CancelToken, ChatMessage, FinishReason, TextDelta, clean_text

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
CANCEL_POLL_S = 0.05  # how often the watcher (and a backoff sleep) looks at the cancel token and clock
_MAX_ERROR_BODY = 500  # characters of an engine's error message quoted in ours
_MAX_USAGE_TOKENS = 10**7  # a usage figure above this is absurd whatever the prompt
_TAIL_EVENTS = 4  # events read after the token cap, for the engine's finish reason and usage
_TAIL_IDLE_S = 1.0  # and the time they may take
_MAX_REASON_CHARS = 80  # of an engine's finish reason quoted in an error
_DRAIN_TIMEOUT_S = 0.5  # after [DONE], the end of the HTTP body; a server that sends none is not reused
_DRAIN_BYTES = 4096  # what may follow [DONE] on a connection that is kept (the chunked body's end)


class RemoteError(Exception):
    """A failed exchange with the engine; ``retryable`` says whether another attempt may succeed."""

    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


class Cancelled(Exception):
    """The caller cancelled; unwinds the attempt loop."""


@dataclass(frozen=True)
class Limits:
    """The bounds of one reply, from the model's settings and the request."""

    max_tokens: int  # content chunks
    max_chars: int
    max_line_bytes: int
    max_event_bytes: int
    max_prompt_tokens: int  # above this a reported prompt_tokens is absurd


@dataclass
class Reply:
    """What one attempt has gathered so far."""

    parts: list[str]
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    chunks_with_text: int = 0
    chars: int = 0
    first_token_at: float | None = None
    done: bool = False
    capped: bool = False  # the token or character cap is reached: no more text is taken
    truncated: bool = False  # we ended the reply at the cap (the engine did not): finish "length"

    @property
    def text(self) -> str:
        return "".join(self.parts)


class Clock:
    """A reply's deadline and its idle deadline; read by the watcher thread, moved by the reader."""

    def __init__(self, total: float, idle: float) -> None:
        self.total = total
        self.idle = idle
        self.deadline = time.monotonic() + total
        self.idle_deadline = time.monotonic() + idle

    def progress(self) -> None:
        """The reply advanced: the idle time starts again."""
        self.idle_deadline = time.monotonic() + self.idle

    def pause(self) -> None:
        """The caller holds the stream (a delta was handed over): its time is not the server's idleness."""
        self.idle_deadline = float("inf")

    def shorten_idle(self, seconds: float) -> None:
        self.idle_deadline = min(self.idle_deadline, time.monotonic() + seconds)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def expired(self) -> str | None:
        """``"total"``, ``"idle"`` or None."""
        now = time.monotonic()
        if now >= self.deadline:
            return "total"
        if now >= self.idle_deadline:
            return "idle"
        return None

    def overdue_error(self) -> RemoteError | None:
        """The error for an expired limit (the watcher has shut the socket down), else None."""
        reason = self.expired()
        if reason == "total":
            return RemoteError(f"no complete reply within the {self.total:g} s limit", retryable=False)
        if reason == "idle":
            return RemoteError(f"no progress from the server for {self.idle:g} s", retryable=True)
        return None


class Watcher:
    """A small thread that shuts the socket down when the caller cancels or a time limit passes, waking
    a blocked read (also one that a byte-by-byte trickle keeps inside ``read_timeout``)."""

    def __init__(self, cancel: CancelToken, clock: Clock) -> None:
        self._conn: http.client.HTTPConnection | None = None
        self._cancel = cancel
        self._clock = clock
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="remote-cancel-watch", daemon=True)
        self.fired = False

    def watch(self, conn: http.client.HTTPConnection) -> None:
        self._conn = conn

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stopped.wait(CANCEL_POLL_S):
            if self._cancel.cancelled or self._clock.expired() is not None:
                conn = self._conn
                sock = conn.sock if conn is not None else None
                if sock is not None:  # none yet while connecting (connect_timeout bounds that)
                    self.fired = True
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                    return


def check_status(response: http.client.HTTPResponse) -> None:
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
    raise RemoteError(f"HTTP {status} from server: {error_message(text) or response.reason}",
                      retryable=retryable, retry_after=_retry_after(response.getheader("Retry-After")))


def read_events(
    response: http.client.HTTPResponse, reply: Reply, cancel: CancelToken, clock: Clock, limits: Limits
) -> Iterator[TextDelta]:
    """Parse server-sent events (``data:`` lines, blank line ends an event) and apply each chunk.

    After the cap (``reply.capped``) only a few more events are read, for the engine's finish reason and
    usage; content among them, or more of them, ends the reply as truncated."""
    data_lines: list[str] = []
    event_bytes = 0
    tail_events = 0
    while not reply.done:
        raw = read_line(response, cancel, limits.max_line_bytes)
        if not raw:  # end of stream
            if data_lines:
                yield from apply_event("\n".join(data_lines), reply, clock, limits)
            break
        line = decode_line(raw)
        if not line:
            if data_lines:
                yield from apply_event("\n".join(data_lines), reply, clock, limits)
                data_lines, event_bytes = [], 0
                if reply.capped and not reply.done:
                    tail_events += 1
                    if reply.truncated or tail_events > _TAIL_EVENTS:
                        reply.truncated = True
                        return
                    clock.shorten_idle(_TAIL_IDLE_S)
        elif line.startswith("data:"):
            event_bytes += len(raw)
            if event_bytes > limits.max_event_bytes:
                raise RemoteError(f"malformed event from server: an event longer than "
                                  f"{limits.max_event_bytes} bytes", retryable=False)
            data_lines.append(line[5:].removeprefix(" "))
        # other fields (event:, id:, retry:) and ":" comments carry nothing we need, and are no progress
    if not reply.done and reply.finish_reason is None:
        raise RemoteError("the server closed the connection before the end of the reply", retryable=True)


def read_line(response: http.client.HTTPResponse, cancel: CancelToken, max_bytes: int) -> bytes:
    """One line of at most ``max_bytes`` (b"" at the end of the stream); a longer one is refused after
    reading ``max_bytes + 1`` of it, never buffered whole."""
    try:
        raw = response.readline(max_bytes + 1)
    except (TimeoutError, OSError, http.client.HTTPException, ValueError) as exc:
        if cancel.cancelled:
            raise Cancelled from exc
        raise RemoteError(f"stream broke: {describe(exc)}", retryable=True) from exc
    if cancel.cancelled:
        raise Cancelled
    if len(raw) > max_bytes:
        raise RemoteError(f"malformed event from server: a line longer than {max_bytes} bytes",
                          retryable=False)
    return raw


def decode_line(raw: bytes) -> str:
    """A line as text, without its line break. Bytes that are not UTF-8 are a broken stream, not text to
    patch with U+FFFD: JSON between systems is UTF-8 (RFC 8259), so an engine that sends anything else
    is corrupting its reply, and a reply with holes punched in it must not be graded or voted on."""
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise RemoteError(f"malformed event from server: bytes that are not UTF-8 at offset {exc.start}",
                          retryable=False) from exc


def apply_event(data: str, reply: Reply, clock: Clock, limits: Limits) -> Iterator[TextDelta]:
    """One ``data:`` payload: ``[DONE]``, an error object, or a chat-completion chunk."""
    if data.strip() == "[DONE]":
        reply.done = True
        return
    try:
        chunk = json.loads(data)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise RemoteError(f"malformed event from server: {data[:80]!r}", retryable=False) from exc
    if not isinstance(chunk, dict):
        raise RemoteError(f"malformed event from server: {data[:80]!r}", retryable=False)
    if "error" in chunk:
        raise RemoteError(f"server error: {error_message(json.dumps(chunk))}", retryable=False)
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        reply.prompt_tokens = plausible_count(usage.get("prompt_tokens"), limits.max_prompt_tokens)
        reply.completion_tokens = plausible_count(usage.get("completion_tokens"), limits.max_tokens)
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
        text = take_text(clean_text(str(content)), reply, limits)
        if text:
            if reply.first_token_at is None:
                reply.first_token_at = time.perf_counter()
            clock.pause()
            yield TextDelta(text)
            clock.progress()
    if choice.get("finish_reason"):
        reply.finish_reason = str(choice["finish_reason"])[:_MAX_REASON_CHARS]


def take_text(text: str, reply: Reply, limits: Limits) -> str:
    """The part of a content delta the caps leave room for, counted into ``reply``."""
    if reply.capped:  # content past the cap: the engine ignores max_tokens
        reply.truncated = True
        return ""
    room = limits.max_chars - reply.chars
    if len(text) > room:
        text, reply.truncated = text[:room], True
    reply.parts.append(text)
    reply.chars += len(text)
    reply.chunks_with_text += 1
    if reply.chunks_with_text >= limits.max_tokens or reply.chars >= limits.max_chars:
        reply.capped = True
    return text


def drained(response: http.client.HTTPResponse, sock: socket.socket | None) -> bool:
    """Read what is left of the body after ``[DONE]`` (a chunked stream's last chunk) within a short
    timeout: True when the connection may carry the next request."""
    if response.will_close or sock is None:
        return False
    try:
        sock.settimeout(_DRAIN_TIMEOUT_S)
        rest = response.read(_DRAIN_BYTES)
    except (TimeoutError, OSError, http.client.HTTPException):
        return False
    return not rest.strip() and response.isclosed()


def map_finish_reason(reason: str | None) -> tuple[FinishReason, str | None]:
    """The engine's finish reason as ours, with the error to report (a server abort), else None."""
    if reason is None:
        return "stop", None
    if reason in _SERVER_ABORTS:
        return "error", f"the server ended the reply: {reason}"
    return _FINISH_REASONS.get(reason, "stop"), None


def plausible_count(value: object, most: int) -> int | None:
    """A usage figure: an integer in ``[0, most]``, else None (dropped)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= most:
        return value
    return None


def plausible_prompt_tokens(messages: Sequence[ChatMessage]) -> int:
    """The most tokens a prompt of ``messages`` could take: no tokenizer makes more than one token of a
    byte (4 per character), plus a chat template's own tokens; never above :data:`_MAX_USAGE_TOKENS`."""
    return min(sum(4 * len(m.content) + 64 for m in messages) + 4096, _MAX_USAGE_TOKENS)


def error_message(text: str) -> str:
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
    """A ``Retry-After`` header in seconds, else None."""
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


def describe(exc: BaseException) -> str:
    """An exception in a few words for an error message (a timeout says so)."""
    if isinstance(exc, TimeoutError):
        return "timed out"
    return str(exc) or type(exc).__name__
