"""The two sides stream at the same time, one side's failure stays on that side, and a page that stops
following a reply (a rerun, a closed tab) stops nothing: the reply is still generated and stored."""

from __future__ import annotations

import threading
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
from webapp.replies import UNSTORED, ReplyDesk, ReplyJob, follow


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


MESSAGES = [ChatMessage("user", "hi")]


def _start(desk: ReplyDesk, models: dict[str, PacedModel], stored: dict[str, GenerationResult],
           *, battle: str = "battle-1") -> dict[str, ReplyJob]:
    def finish(job: ReplyJob, result: GenerationResult) -> None:  # the app writes the reply here
        stored[job.side] = result

    return {side: desk.start(battle_id=battle, side=side, model=model, messages=MESSAGES,
                             params=GenerationParams(), finish=finish)
            for side, model in models.items()}


def test_sides_overlap_and_interleave() -> None:
    desk, stored = ReplyDesk(), {}
    jobs = _start(desk, {"a": PacedModel("a", ["a"] * 10, 0.03), "b": PacedModel("b", ["b"] * 10, 0.03)},
                  stored)
    order: list[str] = []
    done: list[str] = []
    follow(jobs, on_text=lambda side, text: order.append(side), on_done=lambda job: done.append(job.side))
    assert stored["a"].text == "a" * 10 and stored["b"].text == "b" * 10
    assert sorted(done) == ["a", "b"] and not desk.running("battle-1")
    # The sides' texts grow together rather than one after the other.
    switches = sum(1 for x, y in zip(order, order[1:], strict=False) if x != y)
    assert switches >= 3, order


def test_failure_on_one_side_keeps_its_partial_text_and_does_not_stop_the_other() -> None:
    desk, stored = ReplyDesk(), {}
    jobs = _start(desk, {"a": PacedModel("a", ["x", "y", "z"], 0.01, fail_after=1),
                         "b": PacedModel("b", ["ok"] * 5, 0.01)}, stored)
    follow(jobs, on_text=lambda s, t: None, on_done=lambda job: None)
    assert stored["a"].finish_reason == "error" and "device lost" in (stored["a"].error or "")
    assert stored["a"].text == "x", "what streamed before the failure is kept"
    assert stored["b"].finish_reason == "stop" and stored["b"].text == "ok" * 5


def test_leaving_the_page_mid_stream_stops_nothing() -> None:
    """Streamlit interrupts a script run by raising inside it (here: while drawing the text)."""
    desk, stored = ReplyDesk(), {}
    a, b = PacedModel("a", ["a"] * 40, 0.005), PacedModel("b", ["b"] * 40, 0.005)
    jobs = _start(desk, {"a": a, "b": b}, stored)

    def interrupted(side: str, text: str) -> None:
        if len(text) >= 3:
            raise KeyboardInterrupt("rerun requested")

    try:
        follow(jobs, on_text=interrupted, on_done=lambda job: None)
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("the interruption must propagate")
    assert set(desk.running("battle-1")) <= {"a", "b"}
    for job in jobs.values():
        assert job.done.wait(timeout=10)
    assert a.emitted == b.emitted == 40 and stored["a"].text == "a" * 40 and stored["b"].text == "b" * 40
    assert not desk.running("battle-1") and not desk.running("another battle")


def test_a_failing_store_still_ends_the_job() -> None:
    desk = ReplyDesk()
    gate = threading.Event()

    def finish(job: ReplyJob, result: GenerationResult) -> None:
        gate.wait(timeout=10)
        raise RuntimeError("database gone")

    job = desk.start(battle_id="b", side="a", model=PacedModel("a", ["hi"], 0.0), messages=MESSAGES,
                     params=GenerationParams(), finish=finish)
    assert desk.running("b") == {"a": job}, "on the desk while it is stored"
    gate.set()
    assert job.done.wait(timeout=10) and job.result is not None and job.result.text == "hi"
    assert not desk.running("b") and job.notes == [("error", f"Model A: {UNSTORED}")]
