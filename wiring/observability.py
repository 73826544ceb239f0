"""What an operator watches: the metrics port (``/metrics`` and ``/ready``) and the log lines' format.

Each process that serves (a Streamlit app server, ``python -m inference serve``) starts one small WSGI
server on a thread, on ``ARENA_METRICS_HOST:ARENA_METRICS_PORT``: ``/metrics`` is Prometheus' text
format of the process's default registry (the model series of :mod:`inference.metrics`, the web app's
counters), and ``/ready`` answers 200 or 503 with a small JSON object from the process's own readiness
check. A second start on the same address (a Streamlit rerun, another test) keeps the running server
and only swaps the readiness check. Several processes on one host need one port each.

``ARENA_LOG_FORMAT=json`` turns every log line into one JSON object (time, level, logger, message and
an exception's traceback) with the process's secrets replaced by ``[redacted]``; ``text`` (the default)
leaves logging as it was.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import socket
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

__all__ = ["JsonFormatter", "MetricsServer", "Readiness", "configure_logging", "start_metrics_server"]

_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class Readiness:
    """A process's readiness answer: ``ready`` decides the status (200/503), ``detail`` is the body."""

    ready: bool
    detail: Mapping[str, Any]


ReadinessCheck = Callable[[], Readiness]


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - scrapes every 15 s are noise
        pass


class _ThreadingWSGIServer6(ThreadingWSGIServer):
    address_family = socket.AF_INET6


class MetricsServer:
    """``/metrics`` and ``/ready`` on one address, on a daemon thread (see :func:`start_metrics_server`)."""

    def __init__(self, host: str, port: int, ready: ReadinessCheck) -> None:
        self.ready = ready
        self._metrics = make_wsgi_app()
        server_class = _ThreadingWSGIServer6 if ":" in host else ThreadingWSGIServer
        self._server = make_server(host, port, self._app, server_class=server_class,
                                   handler_class=_QuietHandler)
        self.port: int = self._server.server_port
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"metrics-{self.port}",
                                        daemon=True)
        self._thread.start()

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            answer: Iterable[bytes] = self._metrics(environ, start_response)
            return answer
        if path == "/ready":
            answer_ready = self._readiness()
            body = json.dumps({"ready": answer_ready.ready, **answer_ready.detail}).encode()
            status = "200 OK" if answer_ready.ready else "503 Service Unavailable"
            start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                                    ("Cache-Control", "no-store")])
            return [body]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"/metrics or /ready\n"]

    def _readiness(self) -> Readiness:
        try:
            return self.ready()
        except Exception as exc:  # a probe answers, whatever the check hit
            _LOG.warning("readiness check failed: %s", type(exc).__name__)
            return Readiness(False, {"error": type(exc).__name__})

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


_SERVERS: dict[tuple[str, int], MetricsServer] = {}
_SERVERS_LOCK = threading.Lock()


def start_metrics_server(*, host: str, port: int, ready: ReadinessCheck) -> MetricsServer | None:
    """The process's metrics server on ``host:port``, started on the first call for that address; a
    later call swaps its readiness check. None (logged once per call) when the port cannot be bound: the
    process still serves, without metrics."""
    with _SERVERS_LOCK:
        server = _SERVERS.get((host, port))
        if server is not None:
            server.ready = ready
            return server
        try:
            server = MetricsServer(host, port, ready)
        except OSError as exc:
            _LOG.error("metrics server not started on %s:%d: %s", host, port, exc.strerror or exc)
            return None
        _SERVERS[(host, port)] = server
        _LOG.info("metrics on http://%s:%d/metrics, readiness on /ready", host, port)
        return server


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message`` and, for
    an exception, ``exception`` (its traceback). Every occurrence of a secret becomes ``[redacted]``."""

    def __init__(self, secrets: Sequence[str] = ()) -> None:
        super().__init__()
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": self._redact(record.getMessage()),
        }
        if record.exc_info:
            line["exception"] = self._redact(self.formatException(record.exc_info))
        return json.dumps(line, ensure_ascii=False)

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "[redacted]")
        return text


def configure_logging(*, log_format: str, secrets: Sequence[str] = ()) -> None:
    """``json``: the root logger writes :class:`JsonFormatter` lines to stderr (once, however often this
    is called), and the handlers libraries put on their own loggers (Streamlit's, uvicorn's) use it too.
    ``text``: logging is left as it is."""
    if log_format != "json":
        return
    formatter = JsonFormatter(secrets)
    root = logging.getLogger()
    if not any(isinstance(h.formatter, JsonFormatter) for h in root.handlers):
        root.addHandler(logging.StreamHandler())
    loggers = [root, *(item for item in logging.root.manager.loggerDict.values()
                       if isinstance(item, logging.Logger))]
    for handler in (h for logger in loggers for h in logger.handlers):
        if isinstance(handler, logging.StreamHandler):
            handler.setFormatter(formatter)
