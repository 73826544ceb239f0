"""An OpenAI-compatible HTTP API over chat models (``python -m inference serve``): Starlette on uvicorn.

Routes: ``GET /v1/models`` and ``POST /v1/chat/completions`` (``stream`` true: server-sent events, one
chunk per text delta, a last chunk with ``finish_reason``, a usage chunk when ``stream_options.
include_usage`` is set, then ``[DONE]``; false: one ``chat.completion`` object with ``usage``). Behind it
is the pool's fast engine with continuous batching, so many app servers can share one model server: each
points its catalogue at it with ``family = "remote"``.

The server's own limits, each answered with an OpenAI-style error object (``{"error": {"message",
"type", "param", "code"}}``), never a traceback:

- a model's line is bounded (the pool's ``max_outstanding``): one request more is answered 429 with
  ``Retry-After`` before anything is queued;
- a body over ``max_body_bytes`` is 413; malformed JSON, a field of the wrong type or out of range
  (``max_tokens`` above ``max_tokens``' cap, negative, …) is 400; an unknown model 404; a model still
  loading 503;
- with a ``token``, a request without ``Authorization: Bearer <token>`` is 401;
- a client that disconnects mid-stream cancels its generation at once, which frees its slot.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import math
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from inference.pool import ModelBusyError, ModelNotReadyError
from inference.protocol import (
    CancelToken,
    ChatMessage,
    ChatModel,
    GenerationParams,
    GenerationResult,
    TextDelta,
)

DEFAULT_MAX_BODY_BYTES = 1_000_000
DEFAULT_MAX_TOKENS = 4096
RETRY_AFTER_S = 1
ADMISSION_WAIT_S = 0.05  # how long a request waits to learn whether its model's line took it
ROLES = ("system", "user", "assistant")
MAX_STREAMS = 512  # threads that step streams: each open stream holds one while it waits for a token


class ApiError(Exception):
    """An OpenAI-style error answer."""

    def __init__(self, status: int, message: str, *, kind: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None, headers: Mapping[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.kind, self.param, self.code = status, message, kind, param, code
        self.headers = dict(headers or {})

    def response(self) -> JSONResponse:
        body = {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}
        return JSONResponse(body, status_code=self.status, headers=self.headers)


@dataclass(frozen=True)
class ChatRequest:
    """A validated ``/v1/chat/completions`` body."""

    model: str
    messages: tuple[ChatMessage, ...]
    params: GenerationParams
    stream: bool
    include_usage: bool


def _number(body: Mapping[str, Any], name: str, default: float, *, low: float, high: float,
            integer: bool = False) -> Any:
    value = body.get(name, default)
    if value is None:
        return default
    wrong_type = isinstance(value, bool) or not isinstance(value, int | float)
    if wrong_type or (integer and not isinstance(value, int)):
        raise ApiError(400, f"{name} must be {'an integer' if integer else 'a number'}", param=name)
    if not (math.isfinite(value) and low <= value <= high):
        raise ApiError(400, f"{name} must be between {low:g} and {high:g}, got {value}", param=name)
    return value


def parse_request(raw: bytes, *, max_tokens: int) -> ChatRequest:
    """The body checked field by field; :class:`ApiError` (400) naming the first bad one."""
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise ApiError(400, "the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "model must be a non-empty string", param="model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list", param="messages")
    parsed = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES \
                or not isinstance(message.get("content"), str):
            raise ApiError(400, f"messages[{i}] must be {{role: system|user|assistant, content: string}}",
                           param=f"messages[{i}]")
        parsed.append(ChatMessage(role=message["role"], content=message["content"]))
    new_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    params = GenerationParams(
        max_new_tokens=_number({"max_tokens": new_tokens}, "max_tokens", 128, low=1, high=max_tokens,
                               integer=True),
        temperature=float(_number(body, "temperature", 0.0, low=0.0, high=100.0)),
        top_p=float(_number(body, "top_p", 1.0, low=1e-9, high=1.0)),
        top_k=int(_number(body, "top_k", 0, low=0, high=1_000_000, integer=True)),
        seed=None if body.get("seed") is None else int(_number(body, "seed", 0, low=0, high=2**63 - 1,
                                                                 integer=True)),
    )
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ApiError(400, "stream must be true or false", param="stream")
    options = body.get("stream_options") or {}
    include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    return ChatRequest(model=model, messages=tuple(parsed), params=params, stream=stream,
                       include_usage=include_usage)


class _Generation:
    """One model stream driven from the event loop: each ``next`` runs on a worker thread; ``cancel``
    stops the generation and closes the stream once its pending step returns."""

    def __init__(self, model: ChatModel, request: ChatRequest, executor: Executor) -> None:
        self.cancel_token = CancelToken()
        self._events: Iterator[Any] = model.stream(list(request.messages), request.params,
                                                   cancel=self.cancel_token)
        self._executor = executor
        self._pending: concurrent.futures.Future[Any] | None = None

    def step(self) -> asyncio.Future[Any]:
        """The next event, stepped on a worker thread (None once the stream has ended)."""
        self._pending = self._executor.submit(next, self._events, None)
        return asyncio.wrap_future(self._pending)

    def cancel(self) -> None:
        """Stop generating; the stream is closed once a step still running on its thread returns (a
        cancelled await does not stop that thread)."""
        self.cancel_token.cancel()
        if self._pending is not None and not self._pending.done():
            self._pending.add_done_callback(lambda _: self._close())
        else:
            self._close()

    def _close(self) -> None:
        """End the stream (its ``finally`` frees the model's line); a plain iterator has nothing to end."""
        close = getattr(self._events, "close", None)
        if close is not None:
            close()


def _chunk(ident: str, model: str, created: int, delta: dict[str, Any], finish: str | None = None) -> str:
    body = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


def _usage(result: GenerationResult) -> dict[str, int]:
    return {"prompt_tokens": result.prompt_tokens, "completion_tokens": result.new_tokens,
            "total_tokens": result.prompt_tokens + result.new_tokens}


def _finish(result: GenerationResult) -> str:
    return "length" if result.finish_reason == "length" else "stop"


async def _events(generation: _Generation, first: asyncio.Future[Any],
                  request: ChatRequest) -> AsyncIterator[str]:
    """The server-sent events of one streamed reply (an engine error becomes an error event)."""
    ident, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
    try:
        yield _chunk(ident, request.model, created, {"role": "assistant", "content": ""})
        try:
            event = await first
        except Exception as exc:  # noqa: BLE001 - the engine failed before its first event
            event = GenerationResult(text="", finish_reason="error", prompt_tokens=0, new_tokens=0,
                                     ttft_ms=None, total_ms=0.0, error=f"{type(exc).__name__}: {exc}")
        while event is not None:
            if isinstance(event, TextDelta):
                yield _chunk(ident, request.model, created, {"content": event.text})
            elif isinstance(event, GenerationResult):
                if event.error:
                    error = {"error": {"message": event.error, "type": "server_error", "param": None,
                                       "code": None}}
                    yield f"data: {json.dumps(error, ensure_ascii=False)}\n\n"
                    return
                yield _chunk(ident, request.model, created, {}, _finish(event))
                if request.include_usage:
                    usage = {"id": ident, "object": "chat.completion.chunk", "created": created,
                             "model": request.model, "choices": [], "usage": _usage(event)}
                    yield f"data: {json.dumps(usage)}\n\n"
                yield "data: [DONE]\n\n"
                return
            event = await generation.step()
    finally:
        generation.cancel()  # a disconnect lands here too (the task is cancelled): free the slot at once


async def _complete(generation: _Generation, first: asyncio.Future[Any],
                    request: ChatRequest) -> JSONResponse:
    text: list[str] = []
    try:
        try:
            event = await first
        except Exception as exc:  # noqa: BLE001 - the engine failed before its first event
            raise ApiError(500, f"{type(exc).__name__}: {exc}", kind="server_error") from None
        while not isinstance(event, GenerationResult):
            if isinstance(event, TextDelta):
                text.append(event.text)
            event = await generation.step()
    finally:
        generation.cancel()
    if event.error:
        raise ApiError(500, event.error, kind="server_error")
    return JSONResponse({
        "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
        "model": request.model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "".join(text)},
                     "finish_reason": _finish(event)}],
        "usage": _usage(event),
    })


def create_app(models: Callable[[], Mapping[str, ChatModel | None]], *, token: str | None = None,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
               max_tokens: int = DEFAULT_MAX_TOKENS) -> Starlette:
    """The API over ``models()``: slug → a ready model, or None while it loads (asked on every request,
    so models that finish loading are served at once)."""
    executor = ThreadPoolExecutor(max_workers=MAX_STREAMS, thread_name_prefix="serve")

    def check_token(request: Request) -> None:
        if token is not None and request.headers.get("authorization") != f"Bearer {token}":
            raise ApiError(401, "a valid bearer token is required", kind="authentication_error",
                           code="invalid_api_key")

    async def list_models(request: Request) -> Response:
        try:
            check_token(request)
        except ApiError as exc:
            return exc.response()
        data = [{"id": slug, "object": "model", "created": 0, "owned_by": "fixit-arena",
                 "ready": m is not None} for slug, m in models().items()]
        return JSONResponse({"object": "list", "data": data})

    async def chat(request: Request) -> Response:
        try:
            check_token(request)
            declared = request.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > max_body_bytes:
                raise ApiError(413, f"the body is over {max_body_bytes} bytes")
            raw = bytearray()
            async for part in request.stream():
                raw += part
                if len(raw) > max_body_bytes:
                    raise ApiError(413, f"the body is over {max_body_bytes} bytes")
            parsed = parse_request(bytes(raw), max_tokens=max_tokens)
            served = models()
            if parsed.model not in served:
                raise ApiError(404, f"unknown model {parsed.model!r}; served: {', '.join(served)}",
                               param="model", code="model_not_found")
            model = served[parsed.model]
            if model is None:
                raise ApiError(503, f"model {parsed.model!r} is still loading", kind="server_error",
                               headers={"Retry-After": "5"})
            generation = _Generation(model, parsed, executor)
            first = generation.step()
            await asyncio.wait({first}, timeout=ADMISSION_WAIT_S)
            if first.done() and isinstance(first.exception(), ModelBusyError | ModelNotReadyError):
                busy = isinstance(first.exception(), ModelBusyError)
                raise ApiError(429 if busy else 503, str(first.exception()), kind="rate_limit_exceeded"
                               if busy else "server_error", headers={"Retry-After": str(RETRY_AFTER_S)})
            if parsed.stream:
                return StreamingResponse(_events(generation, first, parsed), media_type="text/event-stream",
                                         headers={"Cache-Control": "no-cache"})
            return await _complete(generation, first, parsed)
        except ApiError as exc:
            return exc.response()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            executor.shutdown(wait=False, cancel_futures=True)

    return Starlette(routes=[Route("/v1/models", list_models, methods=["GET"]),
                             Route("/v1/chat/completions", chat, methods=["POST"])], lifespan=lifespan)
