"""``python -m inference serve``'s API (Starlette on uvicorn, on loopback) over the real pool and a tiny
model, driven by the project's own remote client: the same greedy replies as in process, usage, a
bounded line answered 429 with Retry-After, a client that goes away freeing its slot at once, a bearer
token, and OpenAI-style errors for bad input."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from commands.inference_serve import serving
from inference.catalogue import load_catalogue
from inference.pool import ModelPool
from inference.protocol import ChatMessage, GenerationParams, complete
from inference.remote import RemoteChatModel
from inference.serve import create_app

REPO = Path(__file__).resolve().parents[2]
TINY = [e for e in load_catalogue(REPO / "tests/data/tiny_catalogue.toml") if e.slug == "tiny-llama"]
GREEDY = GenerationParams(max_new_tokens=12, temperature=0.0)
HELLO = [ChatMessage("user", "Tell me a story.")]
TOKEN = "s3cret-token"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelPool]:
    with ModelPool(TINY, memory_budget_mb=1000, cache_dir=tmp_path_factory.mktemp("c"), warm_up_prompts=(16,),
                   max_outstanding=1) as p:  # a line of one: the next request is refused
        assert p.wait_ready(timeout=300) == ["tiny-llama"]
        yield p


@pytest.fixture(scope="module")
def server(pool: ModelPool) -> Iterator[str]:
    """The API on a free loopback port, with a bearer token; yields its base URL."""
    port = _free_port()
    config = uvicorn.Config(create_app(serving(pool), token=TOKEN, max_body_bytes=20_000, max_tokens=2000),
                            host="127.0.0.1", port=port, log_level="warning")
    app_server = uvicorn.Server(config)
    thread = threading.Thread(target=app_server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not app_server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    app_server.should_exit = True
    thread.join(timeout=10)


def _call(url: str, path: str, body: Any = None, *, token: str | None = TOKEN, raw: bytes | None = None,
          method: str = "POST") -> tuple[int, dict[str, str], bytes]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    conn.request(method, path, body=data, headers=headers)
    response = conn.getresponse()
    out = (response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    conn.close()
    return out


def _line(pool: ModelPool) -> int:
    return pool.status()["tiny-llama"].outstanding


def test_the_remote_client_gets_the_in_process_reply_with_usage(pool: ModelPool, server: str) -> None:
    direct = complete(pool.get("tiny-llama"), HELLO, GREEDY)
    remote = RemoteChatModel("served", server, "tiny-llama", api_key=TOKEN)
    through = complete(remote, HELLO, GREEDY)
    assert through.error is None and through.text == direct.text and through.text
    assert (through.prompt_tokens, through.new_tokens) == (direct.prompt_tokens, direct.new_tokens)
    assert through.finish_reason == direct.finish_reason
    request = {"model": "tiny-llama", "max_tokens": 12,
               "messages": [{"role": "user", "content": HELLO[0].content}]}
    status, _, body = _call(server, "/v1/chat/completions", request)
    reply = json.loads(body)
    assert status == 200 and reply["choices"][0]["message"]["content"] == direct.text
    assert reply["usage"]["completion_tokens"] == direct.new_tokens
    status, _, body = _call(server, "/v1/models", method="GET")
    assert status == 200 and [m["id"] for m in json.loads(body)["data"]] == ["tiny-llama"]


def _read_until(sock: socket.socket, wanted: bytes, most: int = 1 << 16) -> bytes:
    """What ``sock`` sends until ``wanted`` appears (the headers and the first chunk may come in two
    reads), the connection closes, or ``most`` bytes have come."""
    got = b""
    while wanted not in got and len(got) < most:
        part = sock.recv(4096)
        if not part:
            break
        got += part
    return got


def test_a_full_line_is_answered_429_and_a_dropped_client_frees_its_slot(pool: ModelPool,
                                                                         server: str) -> None:
    host, port = server.removeprefix("http://").split(":")
    holder = socket.create_connection((host, int(port)))
    body = json.dumps({"model": "tiny-llama", "stream": True, "max_tokens": 2000,
                       "messages": [{"role": "user", "content": "Talk for a long time."}]}).encode()
    holder.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   + f"Authorization: Bearer {TOKEN}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    holder.settimeout(60)
    assert b"chat.completion.chunk" in _read_until(holder, b"chat.completion.chunk")  # holds the only place
    assert _line(pool) == 1
    status, headers, error = _call(server, "/v1/chat/completions", {
        "model": "tiny-llama", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})
    assert status == 429 and headers["retry-after"] == "1"
    assert json.loads(error)["error"]["type"] == "rate_limit_exceeded"
    holder.close()  # the client goes away mid-stream
    deadline = time.monotonic() + 10
    while _line(pool) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _line(pool) == 0, "the dropped stream's generation was cancelled and its place freed"
    remote = RemoteChatModel("served", server, "tiny-llama", api_key=TOKEN)
    assert complete(remote, HELLO, GREEDY).error is None


@pytest.mark.parametrize(("body", "status", "param"), [
    (b"{not json", 400, None),
    ({"model": "gpt-9", "messages": [{"role": "user", "content": "Hi"}]}, 404, "model"),
    ({"model": "tiny-llama", "messages": []}, 400, "messages"),
    ({"model": "tiny-llama", "messages": [{"role": "robot", "content": "Hi"}]}, 400, "messages[0]"),
    ({"model": "tiny-llama", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": -3}, 400,
     "max_tokens"),
    ({"model": "tiny-llama", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 10**6}, 400,
     "max_tokens"),
    ({"model": "tiny-llama", "messages": [{"role": "user", "content": "Hi"}], "temperature": "hot"}, 400,
     "temperature"),
    ({"model": "tiny-llama", "messages": [{"role": "user", "content": "x" * 30_000}]}, 413, None),
])
def test_bad_requests_get_openai_style_errors(server: str, body: Any, status: int, param: str | None) -> None:
    raw = body if isinstance(body, bytes) else None
    got, _, text = _call(server, "/v1/chat/completions", None if raw else body, raw=raw)
    error = json.loads(text)["error"]
    assert got == status and error["param"] == param and error["message"], text
    assert "Traceback" not in text.decode()


def test_a_token_is_required_when_set(server: str) -> None:
    for token in (None, "wrong"):
        status, _, text = _call(server, "/v1/models", token=token, method="GET")
        assert status == 401 and json.loads(text)["error"]["code"] == "invalid_api_key"
    remote = RemoteChatModel("served", server, "tiny-llama", api_key="wrong", max_retries=0)
    assert "HTTP 401" in (complete(remote, HELLO, GREEDY).error or "")
