"""A fake OpenAI-compatible streaming engine on 127.0.0.1: the edge of our world, for tests.

A threaded ``http.server`` is handed a *script*: a function ``(handler, attempt) -> None`` that writes
the whole HTTP answer for the ``attempt``-th request (0-based), so a test reads like the exchange it
stages (normal, slow, failing, malformed, hanging up). The server records every request (headers, JSON
body, the time it came) and whether the client hung up; ``handler.body`` is the request being answered
(a script serving several models reads ``body["model"]``). The client-level tests
(``tests/inference/test_remote*.py``) and the app-level fault drills (``tests/webapp/test_remote_faults.py``)
share it.
"""

from __future__ import annotations

import json
import select
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

__all__ = ["FakeServer", "Handler", "Recorded", "Script", "chunk", "running", "serve"]

Script = Callable[["Handler", int], None]
S = TypeVar("S", bound=ThreadingHTTPServer)


@dataclass
class Recorded:
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    clients: list[tuple[str, int]] = field(default_factory=list)  # the TCP peer of each request
    times: list[float] = field(default_factory=list)  # time.monotonic() when each request arrived
    client_closed: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 -- keep test output quiet
        pass

    def do_POST(self) -> None:  # noqa: N802 -- http.server's naming
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length))
        self.body: dict[str, Any] = body
        rec = self.server.recorded
        with rec.lock:
            attempt = len(rec.requests)
            rec.requests.append(body)
            rec.headers.append({k.lower(): v for k, v in self.headers.items()})
            rec.paths.append(self.path)
            rec.clients.append(self.client_address[:2])
            rec.times.append(time.monotonic())
        try:
            self.server.script(self, attempt)
        except (BrokenPipeError, ConnectionResetError):
            rec.client_closed.set()
        self.close_connection = not self.server.keep_alive

    # --- pieces a script writes -------------------------------------------------------------------
    def start_sse(self, *, content_type: str = "text/event-stream") -> None:
        """Status 200 with chunked transfer encoding, as uvicorn-based engines (vLLM) answer."""
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.wfile.flush()

    def raw(self, text: str | bytes) -> None:
        """One HTTP chunk of ``text`` (bytes are sent as they are: invalid UTF-8 too)."""
        data = text if isinstance(text, bytes) else text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def end_body(self) -> None:
        """The chunked body's last chunk: the answer ends properly (whatever came before it)."""
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def event(self, payload: dict[str, Any] | str) -> None:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        self.raw(f"data: {data}\n\n")

    def delta(self, text: str, *, finish_reason: str | None = None) -> None:
        self.event(chunk(text, finish_reason=finish_reason))

    def done(self) -> None:
        self.raw("data: [DONE]\n\n")
        self.end_body()

    def error_status(self, status: int, message: str, *, retry_after: str | None = None) -> None:
        body = json.dumps({"error": {"message": message, "type": "server_error"}}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if retry_after is not None:
            self.send_header("Retry-After", retry_after)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def hang_up(self) -> None:
        """Drop the TCP connection in the middle of the answer (no final chunk)."""
        self.wfile.flush()
        self.connection.shutdown(2)

    def wait_for_client_close(self, timeout: float) -> bool:
        """Block until the client closes its side (recv returns EOF) or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            readable, _, _ = select.select([self.connection], [], [], 0.05)
            if readable:
                try:
                    if not self.connection.recv(1):
                        self.server.recorded.client_closed.set()
                        return True
                except OSError:
                    self.server.recorded.client_closed.set()
                    return True
        return False


def chunk(text: str, *, finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "model": "tiny",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish_reason}],
    }


class FakeServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, script: Script, *, keep_alive: bool = False) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.script = script
        self.keep_alive = keep_alive
        self.recorded = Recorded()

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


@contextmanager
def serve(script: Script, *, keep_alive: bool = False) -> Iterator[FakeServer]:
    """A fake engine running ``script`` on a free loopback port for the block."""
    with running(FakeServer(script, keep_alive=keep_alive)) as server:
        yield server


@contextmanager
def running(server: S) -> Iterator[S]:
    """``server`` serving on a thread of its own for the block, shut down and closed after it."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
