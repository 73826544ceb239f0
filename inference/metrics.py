"""The model series a process exports to Prometheus, recorded by the model pool for every request.

Every request of every model goes through :class:`inference.pool.PooledChatModel`, in the web app and in
``python -m inference serve`` alike, so the pool is where these are recorded and both processes export
the same names (each on its own metrics port). A request is *queued* from its submission until its
first event (waiting in the model's line, then its prefill), then *in flight* until its result; the two
gauges add up to the line ``ARENA_MODEL_QUEUE_LIMIT`` bounds. Labels are the catalogue slug and, for
errors, a kind from a closed set chosen by the pool's owner (the web app and the model server pass
``db.export.error_category``), never an engine's own words.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import Counter, Gauge, Histogram

from inference.protocol import GenerationResult, StreamEvent, TextDelta

__all__ = [
    "ERRORS",
    "IN_FLIGHT",
    "QUEUE_LENGTH",
    "READY",
    "REPLIES",
    "REPLY_SECONDS",
    "TIME_TO_FIRST_TOKEN",
    "TOKENS",
    "TOKENS_PER_SECOND",
    "ErrorKind",
    "RequestMeter",
    "record_refused",
    "set_ready",
]

ErrorKind = Callable[[str], str | None]  # a failed result's error text -> a kind from a closed set

_SECONDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 60.0, 120.0)

QUEUE_LENGTH = Gauge("arena_model_queue_length", "Requests waiting for their first token (in line or in "
                     "prefill)", ["model"])
IN_FLIGHT = Gauge("arena_model_in_flight", "Requests streaming their reply", ["model"])
READY = Gauge("arena_model_ready", "1 while the model is loaded and can serve, else 0", ["model"])
TIME_TO_FIRST_TOKEN = Histogram("arena_model_time_to_first_token_seconds",
                                "From submission (time in line included) to the first token", ["model"],
                                buckets=_SECONDS)
REPLY_SECONDS = Histogram("arena_model_reply_seconds",
                          "From submission (time in line included) to the reply's end, failures included",
                          ["model"], buckets=_SECONDS)
TOKENS_PER_SECOND = Histogram("arena_model_tokens_per_second",
                              "Decode speed of one reply: tokens after the first over the time after it",
                              ["model"], buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000))
TOKENS = Counter("arena_model_generated_tokens", "Tokens generated", ["model"])
REPLIES = Counter("arena_model_replies", "Replies ended, by finish reason (stop, length, error)",
                  ["model", "finish"])
ERRORS = Counter("arena_model_errors", "Requests that failed, by kind (timeout, busy, engine_error ...)",
                 ["model", "kind"])


def set_ready(model: str, ready: bool) -> None:
    READY.labels(model).set(1 if ready else 0)


def record_refused(model: str, error: str, *, error_kind: ErrorKind) -> None:
    """A request refused before it was queued (a full line)."""
    ERRORS.labels(model, error_kind(error) or "error").inc()


class RequestMeter:
    """One request's passage through its model's line: queued, then in flight, then ended. Feed it every
    event (:meth:`event`) and :meth:`close` it however the stream ends; it records each thing once."""

    def __init__(self, model: str, *, error_kind: ErrorKind) -> None:
        self._model = model
        self._error_kind = error_kind
        self._submitted = time.perf_counter()
        self._first: float | None = None  # when the first event came (None: still queued)
        self._closed = False
        QUEUE_LENGTH.labels(model).inc()

    def event(self, event: StreamEvent) -> None:
        now = time.perf_counter()
        if self._first is None:
            self._first = now
            QUEUE_LENGTH.labels(self._model).dec()
            IN_FLIGHT.labels(self._model).inc()
            if isinstance(event, TextDelta):
                TIME_TO_FIRST_TOKEN.labels(self._model).observe(now - self._submitted)
        if isinstance(event, GenerationResult):
            self._ended(event, now)

    def _ended(self, result: GenerationResult, now: float) -> None:
        model = self._model
        REPLY_SECONDS.labels(model).observe(now - self._submitted)
        REPLIES.labels(model, result.finish_reason).inc()
        tokens = max(0, result.new_tokens)
        TOKENS.labels(model).inc(tokens)
        decoding = now - self._first if self._first is not None else 0.0
        if tokens >= 2 and decoding > 0:
            TOKENS_PER_SECOND.labels(model).observe((tokens - 1) / decoding)
        if result.finish_reason == "error":
            ERRORS.labels(model, self._error_kind(result.error or "") or "error").inc()
        self.close()

    def close(self) -> None:
        """Leave the gauges (a stream closed early, or ended); idempotent."""
        if self._closed:
            return
        self._closed = True
        (QUEUE_LENGTH if self._first is None else IN_FLIGHT).labels(self._model).dec()
