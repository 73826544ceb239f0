"""RemoteChatModel against hostile or broken OpenAI-compatible engines: every reply stays bounded.

The servers are real ``http.server`` instances on 127.0.0.1 (the pattern and helpers of
``test_remote.py``); each script stages one probe: a stream that ignores ``max_tokens``, keep-alive
comments forever, a byte trickle inside one line, megabyte lines, absurd ``usage`` figures, lone
surrogates. The limits are set small here (sub-second timeouts) so each probe ends quickly.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from inference.protocol import ChatMessage, GenerationParams, clean_text
from inference.remote import RemoteChatModel
from tests.fake_openai import Handler, chunk, serve
from tests.inference.test_remote import model_for, run, say

SERVER_GIVES_UP_S = 5.0  # a hostile script stops after this: an unbounded client fails, not hangs


def _stream_forever(piece: str, *, pause: float = 0.0) -> Any:
    """Content deltas, as fast as the client takes them, until it hangs up (or the server gives up)."""

    def script(h: Handler, attempt: int) -> None:
        h.start_sse()
        stop = time.monotonic() + SERVER_GIVES_UP_S
        while time.monotonic() < stop:
            h.delta(piece)
            if pause:
                time.sleep(pause)
        h.done()

    return script


# --- tokens and characters -------------------------------------------------------------------------------


def test_a_stream_that_ignores_max_tokens_stops_at_the_cap_and_drops_the_connection() -> None:
    with serve(_stream_forever("word "), keep_alive=True) as server:
        model = model_for(server, idle_timeout=1.0)
        deltas, result = run(model, params=GenerationParams(max_new_tokens=16))
        assert len(deltas) == 16 and result.text == "word " * 16
        assert (result.finish_reason, result.error, result.new_tokens) == ("length", None, 16)
        assert server.recorded.client_closed.wait(timeout=3), "the runaway connection was kept open"
        # The connection was not pooled: the next reply opens a new one.
        run(model, params=GenerationParams(max_new_tokens=2))
        assert len(set(server.recorded.clients)) == 2
        model.close()


def test_huge_deltas_are_cut_at_the_character_cap() -> None:
    with serve(_stream_forever("x" * 30_000)) as server:
        deltas, result = run(model_for(server, max_chars_per_token=32),
                             params=GenerationParams(max_new_tokens=16))
    assert result.finish_reason == "length" and result.error is None
    assert result.text == "x" * (16 * 32) and "".join(deltas) == result.text


def test_megabyte_lines_under_the_default_caps_keep_the_reply_small() -> None:
    def script(h: Handler, attempt: int) -> None:
        h.start_sse()
        for _ in range(5):
            h.delta("y" * 1_000_000)  # a line just under a megabyte
        h.done()

    with serve(script) as server:
        deltas, result = run(RemoteChatModel("r", server.base_url, "tiny", backoff=0.01),
                             params=GenerationParams(max_new_tokens=16))
    assert len(result.text) <= 16 * 32 and len("".join(deltas)) <= 16 * 32
    assert result.finish_reason in ("length", "error")


def test_a_well_behaved_reply_at_exactly_the_cap_keeps_its_usage_and_connection() -> None:
    words = [f"w{i} " for i in range(4)]
    with serve(say(*words, finish="length", usage=(12, 4)), keep_alive=True) as server:
        model = model_for(server)
        for _ in range(2):
            _, result = run(model, params=GenerationParams(max_new_tokens=4))
            assert (result.text, result.finish_reason, result.error) == ("".join(words), "length", None)
            assert (result.prompt_tokens, result.new_tokens) == (12, 4)
        assert len(set(server.recorded.clients)) == 1
        model.close()


@pytest.mark.parametrize("after_the_cap", ["empty chunks", "silence"])
def test_after_the_cap_an_endless_tail_ends_the_reply_as_length(after_the_cap: str) -> None:
    def script(h: Handler, attempt: int) -> None:
        h.start_sse()
        for word in ("a", "b", "c"):
            h.delta(word)
        if after_the_cap == "silence" and h.wait_for_client_close(SERVER_GIVES_UP_S):
            return
        stop = time.monotonic() + SERVER_GIVES_UP_S
        while time.monotonic() < stop:
            h.event({"choices": [{"index": 0, "delta": {}, "finish_reason": None}]})
            time.sleep(0.01)
        h.done()

    with serve(script) as server:
        _, result = run(model_for(server, idle_timeout=0.3), params=GenerationParams(max_new_tokens=3))
        assert server.recorded.client_closed.wait(timeout=3)
    assert (result.text, result.finish_reason, result.error) == ("abc", "length", None)
    assert result.total_ms < SERVER_GIVES_UP_S * 1000


# --- lines and events ------------------------------------------------------------------------------------


def test_a_line_over_the_byte_cap_ends_the_reply_and_keeps_the_text() -> None:
    def script(h: Handler, attempt: int) -> None:
        h.start_sse()
        h.delta("ok")
        h.raw("data: " + "z" * 100_000 + "\n\n")
        h.done()

    with serve(script) as server:
        deltas, result = run(model_for(server, max_line_bytes=4096))
    assert deltas == ["ok"] and result.text == "ok"
    assert result.finish_reason == "error" and "4096 bytes" in (result.error or "")
    assert len(server.recorded.requests) == 1  # text was shown: no second attempt


def test_an_event_of_many_small_data_lines_over_the_event_cap_is_refused() -> None:
    def script(h: Handler, attempt: int) -> None:
        h.start_sse()
        for _ in range(400):
            h.raw("data: " + "q" * 100 + "\n")  # no blank line: all one event
        h.raw("\n")
        h.done()

    with serve(script) as server:
        _, result = run(model_for(server, max_line_bytes=1024, max_event_bytes=8192, max_retries=0))
    assert result.finish_reason == "error" and "8192 bytes" in (result.error or "")


# --- time ------------------------------------------------------------------------------------------------


def test_keep_alive_comments_do_not_reset_the_idle_timeout() -> None:
    def script(h: Handler, attempt: int) -> None:
        h.start_sse()
        h.delta("first")
        stop = time.monotonic() + SERVER_GIVES_UP_S
        while time.monotonic() < stop:
            h.raw(": keep-alive\n\n")
            time.sleep(0.02)
        h.done()

    with serve(script) as server:
        deltas, result = run(model_for(server, idle_timeout=0.3, read_timeout=2.0))
        assert server.recorded.client_closed.wait(timeout=3)
    assert deltas == ["first"] and result.text == "first"
    assert result.finish_reason == "error" and "no progress" in (result.error or "")
    assert result.total_ms < SERVER_GIVES_UP_S * 1000


def test_keep_alive_comments_before_any_text_end_after_bounded_attempts() -> None:
    def script(h: Handler, attempt: int) -> None:
        h.start_sse()
        stop = time.monotonic() + SERVER_GIVES_UP_S
        while time.monotonic() < stop:
            h.raw(": ping\n\n")
            time.sleep(0.02)
        h.done()

    with serve(script) as server:
        deltas, result = run(model_for(server, idle_timeout=0.2, max_retries=1))
    assert deltas == [] and result.finish_reason == "error" and "no progress" in (result.error or "")
    assert len(server.recorded.requests) == 2  # the first try and one retry
    assert result.total_ms < SERVER_GIVES_UP_S * 1000


def test_a_byte_trickle_inside_one_line_is_idle() -> None:
    def script(h: Handler, attempt: int) -> None:
        h.start_sse()
        h.delta("so far")
        h.raw("data: ")
        stop = time.monotonic() + SERVER_GIVES_UP_S
        while time.monotonic() < stop:
            h.raw(" ")  # never a newline: each read returns in time, the line never ends
            time.sleep(0.02)
        h.done()

    with serve(script) as server:
        _, result = run(model_for(server, idle_timeout=0.3, read_timeout=2.0))
    assert result.text == "so far" and result.finish_reason == "error"
    assert "no progress" in (result.error or "")
    assert result.total_ms < SERVER_GIVES_UP_S * 1000


def test_the_total_deadline_ends_a_reply_that_keeps_advancing() -> None:
    with serve(_stream_forever("t", pause=0.02)) as server:
        deltas, result = run(model_for(server, total_timeout=0.5, idle_timeout=1.0),
                             params=GenerationParams(max_new_tokens=30_000))
    assert result.finish_reason == "error" and "0.5 s" in (result.error or "")
    assert result.text == "".join(deltas) and 0 < len(result.text) < 30_000
    assert result.total_ms < SERVER_GIVES_UP_S * 1000


def test_the_total_deadline_covers_retries_and_backoff() -> None:
    def busy(h: Handler, attempt: int) -> None:
        h.error_status(503, "busy", retry_after="0.2")

    with serve(busy) as server:
        _, result = run(model_for(server, total_timeout=0.5, max_retries=20, backoff=0.2))
    assert result.finish_reason == "error" and "0.5 s" in (result.error or "")
    assert "HTTP 503" in (result.error or "")
    assert 1 <= len(server.recorded.requests) <= 3  # not 21 attempts


@pytest.mark.parametrize("kwargs", [{"total_timeout": 0}, {"idle_timeout": -1}, {"max_chars_per_token": 0},
                                    {"max_line_bytes": 0}, {"max_event_bytes": 0}])
def test_bad_limits_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        RemoteChatModel("r", "http://127.0.0.1:9", "m", **kwargs)


# --- usage figures ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("usage", [
    {"prompt_tokens": 2**40, "completion_tokens": 2**40},
    {"prompt_tokens": -5, "completion_tokens": -1},
    {"prompt_tokens": 3.5, "completion_tokens": "3"},
    {"prompt_tokens": True, "completion_tokens": None},
    {"prompt_tokens": 10**12, "completion_tokens": 17},  # more than max_new_tokens=16 asked for
])
def test_absurd_usage_is_dropped(usage: dict[str, Any]) -> None:
    def script(h: Handler, attempt: int) -> None:
        h.start_sse()
        for word in ("a", "b", "c"):
            h.delta(word)
        h.event({"choices": [], "usage": usage})
        h.done()

    with serve(script) as server:
        _, result = run(model_for(server), params=GenerationParams(max_new_tokens=16))
    assert (result.text, result.finish_reason) == ("abc", "stop")
    assert (result.prompt_tokens, result.new_tokens) == (0, 3)  # dropped: no prompt count, one per chunk


def test_plausible_usage_is_kept() -> None:
    with serve(say("a", "b", usage=(4000, 2))) as server:
        _, result = run(model_for(server))
    assert (result.prompt_tokens, result.new_tokens) == (4000, 2)


# --- text that cannot be encoded -------------------------------------------------------------------------


def test_lone_surrogates_and_nul_in_deltas_become_replacement_characters() -> None:
    def script(h: Handler, attempt: int) -> None:
        h.start_sse()
        h.event('{"choices": [{"index": 0, "delta": {"content": "a\\ud800b"}, "finish_reason": null}]}')
        h.event('{"choices": [{"index": 0, "delta": {"content": "\\udfff\\u0000c"}, "finish_reason": null}]}')
        h.event(chunk("\U0001F600 ok", finish_reason="stop"))
        h.done()

    with serve(script) as server:
        deltas, result = run(model_for(server))
    assert deltas == ["a\ufffdb", "\ufffd\ufffdc", "\U0001F600 ok"]
    assert result.text == "a\ufffdb\ufffd\ufffdc\U0001F600 ok"
    result.text.encode("utf-8")  # drawable and storable
    assert "\x00" not in result.text


def test_bytes_that_are_not_utf8_end_the_reply_and_keep_the_text_so_far() -> None:
    def script(h: Handler, attempt: int) -> None:
        h.start_sse()
        h.raw(b'data: {"choices": [{"index": 0, "delta": {"content": "caf\xc3\xa9 \xf0\x9f\x98\x80"}}]}\n\n')
        h.raw(b'data: {"choices": [{"index": 0, "delta": {"content": "caf\xe9"}}]}\n\n')  # Latin-1
        h.done()

    with serve(script) as server:
        deltas, result = run(model_for(server))
    assert deltas == ["caf\u00e9 \U0001F600"], "raw UTF-8 (not only JSON escapes) is text"
    assert result.text == "caf\u00e9 \U0001F600" and result.finish_reason == "error"
    assert "not UTF-8" in (result.error or "")
    assert len(server.recorded.requests) == 1  # text was shown: no second attempt


def test_a_surrogate_in_the_servers_error_text_is_cleaned() -> None:
    def script(h: Handler, attempt: int) -> None:
        body = b'{"error": {"message": "bad \\ud800 request"}}'
        h.send_response(400)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
        h.wfile.flush()

    with serve(script) as server:
        _, result = run(model_for(server))
    assert result.finish_reason == "error" and "bad \ufffd request" in (result.error or "")
    (result.error or "").encode("utf-8")


@pytest.mark.parametrize(("dirty", "clean"), [
    ("plain", "plain"),
    ("", ""),
    ("a\ud800b", "a\ufffdb"),
    ("\udc00\ud800", "\ufffd\ufffd"),
    ("nul\x00here", "nul\ufffdhere"),
    ("\U0001F600 é \n\t", "\U0001F600 é \n\t"),
])
def test_clean_text(dirty: str, clean: str) -> None:
    assert clean_text(dirty) == clean
    clean_text(dirty).encode("utf-8")


def test_clean_text_of_a_json_decoded_surrogate() -> None:
    decoded = json.loads('"x\\ud83dy"')
    assert clean_text(decoded) == "x\ufffdy"


def test_request_carries_a_prompt_with_a_surrogate() -> None:
    with serve(say("fine")) as server:
        model = model_for(server)
        deltas = [e for e in model.stream([ChatMessage("user", "hi \ud800")], GenerationParams())]
    assert len(deltas) == 2
