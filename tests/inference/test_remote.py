"""RemoteChatModel against small OpenAI-compatible streaming servers on 127.0.0.1: the edge of our world.

Each test hands the fake engine of ``tests.fake_openai`` a *script* that writes the whole HTTP answer for
each request, so a test reads like the exchange it stages (normal, slow, failing, malformed, hanging up,
cancelled); the server records every request and whether the client hung up.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import Any

import pytest

from inference.protocol import (
    CancelToken,
    ChatMessage,
    ChatModel,
    GenerationParams,
    GenerationResult,
    StreamEvent,
    TextDelta,
)
from inference.remote import RemoteChatModel, request_body
from tests.fake_openai import FakeServer, Handler, Script, serve

# --- helpers ---------------------------------------------------------------------------------------------

HELLO = [ChatMessage("system", "Be brief."), ChatMessage("user", "Say hello.")]


def model_for(server: FakeServer, **kwargs: Any) -> RemoteChatModel:
    options: dict[str, Any] = {"connect_timeout": 2.0, "read_timeout": 2.0, "max_retries": 2, "backoff": 0.01}
    options.update(kwargs)
    return RemoteChatModel("remote-tiny", server.base_url, "tiny", **options)


def run(model: RemoteChatModel, *, params: GenerationParams | None = None,
        cancel: CancelToken | None = None) -> tuple[list[str], GenerationResult]:
    deltas: list[str] = []
    results: list[GenerationResult] = []
    for event in model.stream(HELLO, params or GenerationParams(max_new_tokens=16), cancel=cancel):
        if isinstance(event, TextDelta):
            assert not results, "a delta came after the final result"
            deltas.append(event.text)
        else:
            results.append(event)
    assert len(results) == 1, "the stream must end with exactly one GenerationResult"
    return deltas, results[0]


def say(*words: str, finish: str = "stop", usage: tuple[int, int] | None = None) -> Script:
    def script(h: Handler, attempt: int) -> None:
        h.start_sse()
        h.event({"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]})
        for word in words[:-1]:
            h.delta(word)
        h.delta(words[-1], finish_reason=finish)
        if usage is not None:
            h.event({"choices": [], "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]}})
        h.done()

    return script


def fail_then(failures: int, then: Script, *, status: int = 503) -> Script:
    def script(h: Handler, attempt: int) -> None:
        if attempt < failures:
            h.error_status(status, f"overloaded (attempt {attempt})")
        else:
            then(h, attempt)

    return script


# --- a normal exchange ---------------------------------------------------------------------------------


def test_streams_deltas_and_reports_usage_and_timings() -> None:
    with serve(say("Hel", "lo", " world", usage=(21, 3))) as server:
        model = RemoteChatModel("remote-tiny", server.base_url, "tiny", api_key="sk-test-123")
        assert isinstance(model, ChatModel)
        deltas, result = run(model, params=GenerationParams(max_new_tokens=7, temperature=0.5, top_p=0.9))

    assert deltas == ["Hel", "lo", " world"]
    assert result.text == "Hello world"
    assert (result.finish_reason, result.error) == ("stop", None)
    assert (result.prompt_tokens, result.new_tokens) == (21, 3)
    assert result.ttft_ms is not None and 0 < result.ttft_ms <= result.total_ms
    rec = server.recorded
    assert rec.paths == ["/v1/chat/completions"]
    assert rec.headers[0]["authorization"] == "Bearer sk-test-123"
    body = rec.requests[0]
    assert body["model"] == "tiny" and body["stream"] is True
    assert body["messages"] == [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "Say hello."}]
    assert (body["max_tokens"], body["temperature"], body["top_p"]) == (7, 0.5, 0.9)


def test_base_url_with_v1_prefix_and_no_key_sends_no_authorization() -> None:
    with serve(say("ok")) as server:
        model = RemoteChatModel("r", server.base_url + "/v1/", "tiny")
        _, result = run(model)
    assert result.text == "ok"
    assert server.recorded.paths == ["/v1/chat/completions"]
    assert "authorization" not in server.recorded.headers[0]
    assert "sk-" not in repr(RemoteChatModel("r", "http://h:1", "m", api_key="sk-secret"))


@pytest.mark.parametrize(("engine_reason", "ours"), [("length", "length"), ("eos_token", "stop"),
                                                      ("stop", "stop")])
def test_finish_reason_is_mapped_and_tokens_counted_without_usage(engine_reason: str, ours: str) -> None:
    with serve(say("a", "b", "c", "d", finish=engine_reason)) as server:
        _, result = run(model_for(server))
    assert result.finish_reason == ours
    assert (result.prompt_tokens, result.new_tokens) == (0, 4)  # no usage sent: one token per chunk


def test_server_abort_reason_is_an_error() -> None:
    with serve(say("partial", finish="abort")) as server:
        _, result = run(model_for(server))
    assert result.finish_reason == "error" and "abort" in (result.error or "")
    assert result.text == "partial"


def test_request_body_sends_every_sampling_setting_and_the_seed_only_when_set() -> None:
    plain = request_body(model="m", messages=HELLO, params=GenerationParams(temperature=0.0))
    assert "seed" not in plain  # the server draws one
    # Nothing is left to the server's defaults (llama.cpp's: top_k 40, min_p 0.05, repeat penalty 1.1).
    assert (plain["temperature"], plain["top_p"], plain["top_k"], plain["min_p"]) == (0.0, 1.0, 0, 0.0)
    assert plain["repeat_penalty"] == plain["repetition_penalty"] == 1.0
    assert plain["presence_penalty"] == plain["frequency_penalty"] == 0.0
    assert plain["stream_options"] == {"include_usage": True}
    tuned = request_body(model="m", messages=HELLO, params=GenerationParams(top_k=40, seed=7))
    assert (tuned["top_k"], tuned["seed"]) == (40, 7)


def test_one_keep_alive_connection_serves_consecutive_requests() -> None:
    with serve(say("Hi", "!", usage=(9, 2)), keep_alive=True) as server:
        model = model_for(server)
        for _ in range(3):
            deltas, result = run(model)
            assert "".join(deltas) == "Hi!" and result.error is None
        assert len(server.recorded.requests) == 3
        assert len(set(server.recorded.clients)) == 1  # one TCP connection, not one per request
        model.close()


def test_a_kept_connection_the_server_closed_is_replaced_without_a_retry() -> None:
    with serve(say("Hi"), keep_alive=False) as server:  # closes after every answer, without saying so
        model = model_for(server, max_retries=0)
        for _ in range(3):
            deltas, result = run(model)
            assert deltas == ["Hi"] and result.error is None
        assert len(server.recorded.requests) == 3 and len(set(server.recorded.clients)) == 3


@pytest.mark.parametrize("kwargs", [{"base_url": "ftp://h/"}, {"base_url": "localhost:8000"},
                                    {"read_timeout": 0}, {"connect_timeout": -1}, {"max_retries": -1},
                                    {"model": ""}])
def test_bad_configuration_is_refused(kwargs: dict[str, Any]) -> None:
    options: dict[str, Any] = {"slug": "r", "base_url": "http://127.0.0.1:9", "model": "m"}
    options.update(kwargs)
    with pytest.raises(ValueError):
        RemoteChatModel(**options)


# --- slow, failing and malformed servers -----------------------------------------------------------------


def test_slow_server_times_out_after_bounded_retries() -> None:
    def silent(h: Handler, attempt: int) -> None:
        time.sleep(1.5)

    with serve(silent) as server:
        started = time.perf_counter()
        deltas, result = run(model_for(server, read_timeout=0.2, max_retries=1))
        elapsed = time.perf_counter() - started
    assert deltas == []
    assert result.finish_reason == "error" and "timed out" in (result.error or "")
    assert len(server.recorded.requests) == 2  # the first try and one retry
    assert elapsed < 1.4  # gave up on read_timeout, did not wait for the server


def test_slow_first_attempt_is_retried() -> None:
    fast = say("late", " but fine")

    def script(h: Handler, attempt: int) -> None:
        if attempt == 0:
            time.sleep(1.0)
            return
        fast(h, attempt)

    with serve(script) as server:
        _, result = run(model_for(server, read_timeout=0.2))
    assert (result.text, result.finish_reason) == ("late but fine", "stop")
    assert len(server.recorded.requests) == 2


def test_5xx_then_success_is_retried_with_backoff() -> None:
    with serve(fail_then(2, say("recovered"))) as server:
        started = time.perf_counter()
        _, result = run(model_for(server, max_retries=2, backoff=0.1))
        elapsed = time.perf_counter() - started
    assert (result.text, result.finish_reason) == ("recovered", "stop")
    assert len(server.recorded.requests) == 3
    assert elapsed >= 0.1 + 0.2  # backoff doubles: 0.1 s then 0.2 s


def test_5xx_forever_gives_a_clear_error() -> None:
    with serve(fail_then(99, say("never"), status=500)) as server:
        deltas, result = run(model_for(server, max_retries=2))
    assert deltas == [] and result.text == ""
    assert result.finish_reason == "error"
    assert "HTTP 500" in (result.error or "") and "overloaded (attempt 2)" in (result.error or "")
    assert len(server.recorded.requests) == 3


def test_client_errors_are_not_retried_and_keep_the_key_secret() -> None:
    with serve(fail_then(99, say("never"), status=401)) as server:
        model = RemoteChatModel("r", server.base_url, "tiny", api_key="sk-very-secret", backoff=0.01)
        _, result = run(model)
    assert result.finish_reason == "error" and "HTTP 401" in (result.error or "")
    assert "sk-very-secret" not in (result.error or "")
    assert len(server.recorded.requests) == 1


def test_malformed_event_is_a_clear_error_and_not_retried() -> None:
    def script(h: Handler, attempt: int) -> None:
        h.start_sse()
        h.delta("fine ")
        h.raw('data: {"choices": [{"delta": {"content": "bro\n\n')
        h.done()

    with serve(script) as server:
        deltas, result = run(model_for(server))
    assert deltas == ["fine "] and result.text == "fine "
    assert result.finish_reason == "error" and "malformed" in (result.error or "")
    assert len(server.recorded.requests) == 1


def test_runaway_line_is_refused() -> None:
    def script(h: Handler, attempt: int) -> None:
        h.start_sse()
        h.raw("data: " + "x" * (1 << 20) + "\n\n")
        h.done()

    with serve(script) as server:
        _, result = run(model_for(server))
    assert result.finish_reason == "error" and "longer than" in (result.error or "")


def test_non_stream_answer_is_refused() -> None:
    def script(h: Handler, attempt: int) -> None:
        h.start_sse(content_type="text/html")
        h.raw("<html>proxy login</html>")
        h.done()

    with serve(script) as server:
        _, result = run(model_for(server))
    assert result.finish_reason == "error" and "text/event-stream" in (result.error or "")


def test_error_event_mid_stream_ends_the_reply() -> None:
    def script(h: Handler, attempt: int) -> None:
        h.start_sse()
        h.delta("so far")
        h.event({"error": {"message": "engine overloaded"}})
        h.done()

    with serve(script) as server:
        _, result = run(model_for(server))
    assert (result.text, result.finish_reason) == ("so far", "error")
    assert "engine overloaded" in (result.error or "")


def test_connection_refused_is_retried_then_reported() -> None:
    with serve(say("x")) as server:
        url = server.base_url
    model = RemoteChatModel("r", url, "tiny", max_retries=1, backoff=0.01, connect_timeout=0.5)
    _, result = run(model)
    assert result.finish_reason == "error" and "cannot connect" in (result.error or "")


# --- disconnects and cancellation ------------------------------------------------------------------------


def test_mid_stream_disconnect_is_an_error_and_not_retried() -> None:
    def script(h: Handler, attempt: int) -> None:
        h.start_sse()
        h.delta("a")
        h.delta("b")
        h.hang_up()

    with serve(script) as server:
        deltas, result = run(model_for(server, max_retries=3))
    assert deltas == ["a", "b"] and result.text == "ab"
    assert result.finish_reason == "error" and result.error
    assert len(server.recorded.requests) == 1  # the visitor already saw text: no second attempt


def test_disconnect_before_the_first_token_is_retried() -> None:
    good = say("second", " try")

    def script(h: Handler, attempt: int) -> None:
        if attempt == 0:
            h.start_sse()
            h.event({"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]})
            h.hang_up()
        else:
            good(h, attempt)

    with serve(script) as server:
        deltas, result = run(model_for(server))
    assert deltas == ["second", " try"] and result.finish_reason == "stop"
    assert len(server.recorded.requests) == 2


def _one_token_then_silence(h: Handler, attempt: int) -> None:
    h.start_sse()
    h.delta("first")
    h.wait_for_client_close(timeout=10)


def test_cancel_while_the_server_is_silent_closes_the_connection() -> None:
    cancel = CancelToken()
    with serve(_one_token_then_silence) as server:
        events: list[StreamEvent] = []
        started = time.perf_counter()
        for event in model_for(server, read_timeout=30).stream(HELLO, GenerationParams(), cancel=cancel):
            events.append(event)
            if isinstance(event, TextDelta):
                cancel.cancel()
        elapsed = time.perf_counter() - started
        assert server.recorded.client_closed.wait(timeout=3), "the server never saw the client hang up"
    result = events[-1]
    assert isinstance(result, GenerationResult)
    assert (result.text, result.finish_reason, result.error) == ("first", "cancelled", None)
    assert elapsed < 3  # did not wait for read_timeout
    assert len(server.recorded.requests) == 1


def test_abandoned_stream_closes_the_connection() -> None:
    with serve(_one_token_then_silence) as server:
        stream = model_for(server, read_timeout=30).stream(HELLO, GenerationParams())
        assert isinstance(stream, Generator)
        assert next(stream) == TextDelta("first")
        stream.close()  # a visitor who left: the generator is dropped
        assert server.recorded.client_closed.wait(timeout=3)


def test_cancelled_before_start_sends_nothing() -> None:
    cancel = CancelToken()
    cancel.cancel()
    with serve(say("x")) as server:
        deltas, result = run(model_for(server), cancel=cancel)
    assert deltas == [] and result.finish_reason == "cancelled"
    assert server.recorded.requests == []


def test_catalogue_remote_entry_builds_a_streaming_client(tmp_path: Any) -> None:
    """The catalogue's ``remote:`` entry, through the builder the pool uses, reaches the server."""
    from inference.builder import build_chat_model
    from inference.catalogue import parse_catalogue

    with serve(say("from", " the", " engine", usage=(9, 3))) as server:
        (entry,) = parse_catalogue(
            f'[[model]]\nslug = "remote-tiny"\nname = "Remote tiny"\nfamily = "remote"\n'
            f'source = "remote:{server.base_url}/v1"\nremote_model = "org/tiny-instruct"\n'
        )
        model = build_chat_model(entry, cache_dir=tmp_path, api_key="sk-from-settings")
        deltas, result = run(model)  # type: ignore[arg-type]
    assert (deltas, result.finish_reason, result.new_tokens) == (["from", " the", " engine"], "stop", 3)
    assert server.recorded.requests[0]["model"] == "org/tiny-instruct"
    assert server.recorded.headers[0]["authorization"] == "Bearer sk-from-settings"
