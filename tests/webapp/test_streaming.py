"""The two sides stream at the same time, and one side's failure stays on that side."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

from inference.protocol import (
    CancelToken,
    ChatMessage,
    GenerationParams,
    GenerationResult,
    StreamEvent,
    TextDelta,
)
from webapp.streaming import StreamJob, stream_pair


class PacedModel:
    """Emits ``words`` one by one, sleeping ``delay`` seconds before each (a model's decode step)."""

    def __init__(self, slug: str, words: list[str], delay: float, fail_after: int | None = None) -> None:
        self._slug, self.words, self.delay, self.fail_after = slug, words, delay, fail_after

    @property
    def slug(self) -> str:
        return self._slug

    def stream(
        self, messages: Sequence[ChatMessage], params: GenerationParams, *, cancel: CancelToken | None = None
    ) -> Iterator[StreamEvent]:
        start = time.perf_counter()
        self.emitted = 0
        for i, word in enumerate(self.words):
            if cancel is not None and cancel.cancelled:
                yield GenerationResult(
                    text="",
                    finish_reason="cancelled",
                    prompt_tokens=0,
                    new_tokens=i,
                    ttft_ms=None,
                    total_ms=0.0,
                )
                return
            if self.fail_after is not None and i == self.fail_after:
                raise RuntimeError("device lost")
            time.sleep(self.delay)
            self.emitted += 1
            yield TextDelta(word)
        yield GenerationResult(
            text="".join(self.words),
            finish_reason="stop",
            prompt_tokens=len(messages),
            new_tokens=len(self.words),
            ttft_ms=self.delay * 1000,
            total_ms=(time.perf_counter() - start) * 1000,
        )


def _jobs(a: PacedModel, b: PacedModel) -> dict[str, StreamJob]:
    msgs = [ChatMessage("user", "hi")]
    return {"a": StreamJob(a, msgs, GenerationParams()), "b": StreamJob(b, msgs, GenerationParams())}


def test_sides_overlap_and_interleave() -> None:
    a = PacedModel("a", ["a"] * 10, 0.03)
    b = PacedModel("b", ["b"] * 10, 0.03)
    order: list[str] = []
    finished: list[str] = []
    began = time.perf_counter()
    outcome = stream_pair(
        _jobs(a, b),
        on_delta=lambda side, text: order.append(side),
        on_result=lambda side, result: finished.append(side),
    )
    wall = time.perf_counter() - began
    assert outcome.results["a"].text == "a" * 10 and outcome.results["b"].text == "b" * 10
    assert sorted(finished) == ["a", "b"]
    # Sequential would take >= 0.6 s; concurrent about 0.3 s.
    assert wall < 0.5, wall
    assert outcome.overlap_s() > 0.2
    # Deltas of the two sides interleave rather than arriving as two blocks.
    switches = sum(1 for x, y in zip(order, order[1:], strict=False) if x != y)
    assert switches >= 5, order


def test_failure_on_one_side_does_not_stop_the_other() -> None:
    a = PacedModel("a", ["x", "y", "z"], 0.01, fail_after=1)
    b = PacedModel("b", ["ok"] * 5, 0.01)
    written: dict[str, GenerationResult] = {}
    outcome = stream_pair(_jobs(a, b), on_delta=lambda s, t: None, on_result=written.__setitem__)
    assert outcome.results["a"].finish_reason == "error"
    assert "device lost" in (outcome.results["a"].error or "")
    assert outcome.results["b"].finish_reason == "stop"
    assert outcome.results["b"].text == "ok" * 5
    assert set(written) == {"a", "b"}


def test_single_side() -> None:
    a = PacedModel("a", ["one"], 0.0)
    outcome = stream_pair({"a": _jobs(a, a)["a"]}, on_delta=lambda s, t: None, on_result=lambda s, r: None)
    assert list(outcome.results) == ["a"]
    assert outcome.overlap_s() == 0.0


def test_leaving_the_page_mid_stream_cancels_both_sides() -> None:
    """Streamlit interrupts a script run by raising inside it (here: in on_delta); generation must stop."""
    a = PacedModel("a", ["a"] * 200, 0.005)
    b = PacedModel("b", ["b"] * 200, 0.005)

    def interrupted(side: str, text: str) -> None:
        if len(text) >= 3:
            raise KeyboardInterrupt("rerun requested")

    try:
        stream_pair(_jobs(a, b), on_delta=interrupted, on_result=lambda s, r: None)
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("the interruption must propagate")
    time.sleep(0.2)
    assert a.emitted < 100 and b.emitted < 100, (a.emitted, b.emitted)
