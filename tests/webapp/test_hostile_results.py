"""What a broken or hostile engine hands back is made public and storable before it is drawn or stored
(issue 39: usage of 2**40 made the database refuse the reply the visitor had seen; a lone surrogate in a
delta crashed the page's drawing and both sides' replies were lost)."""

from __future__ import annotations

from collections.abc import Callable

from db import actions as db_actions
from inference.protocol import GenerationResult
from tests.webapp.test_limits_app import _context
from webapp import render
from webapp.flows import send_turn
from webapp.flows.open_battle import load_battle


def _result(**fields: object) -> GenerationResult:
    base: dict[str, object] = {"text": "ok", "finish_reason": "stop", "prompt_tokens": 5, "new_tokens": 3,
                               "ttft_ms": 10.0, "total_ms": 20.0, "error": None}
    return GenerationResult(**{**base, **fields})  # type: ignore[arg-type]


def test_absurd_usage_and_lone_surrogates_are_stored_not_lost(arena_env: Callable[..., str]) -> None:
    url = arena_env()
    ctx = _context(url, "victim", "198.51.100.7")
    opened = db_actions.open_battle(ctx.engine, mode="named", scenario="free-chat", contestant_a="tiny-llama",
                                    contestant_b="tiny-gemma3", visitor_id=ctx.visitor_id, first_request="hi")
    battle = load_battle(ctx, battle_id=opened.id)
    hostile = _result(text="bad \ud800 text", prompt_tokens=2**40, new_tokens=-3, total_ms=float("inf"))
    shown = send_turn.public_result(hostile, where="test")
    assert shown.text == "bad \ufffd text" and shown.prompt_tokens == 0 and shown.new_tokens == 0
    assert send_turn.add_reply(ctx, battle=battle, side="a", result=shown, retry=False) is None
    fine = send_turn.public_result(_result(), where="test")
    assert send_turn.add_reply(ctx, battle=battle, side="b", result=fine, retry=False) is None
    stored = db_actions.get_battle(ctx.engine, battle_id=opened.id)
    (a_reply,) = stored.sides["a"].replies
    assert a_reply.content == "bad \ufffd text" and a_reply.prompt_tokens == 0
    assert stored.sides["b"].replies[0].content == "ok", "the other side is untouched"


class _Slot:
    """Records what a page element is asked to draw, and refuses text a browser could not be sent."""

    def __init__(self) -> None:
        self.drawn: list[str] = []

    def code(self, text: str, **_: object) -> None:
        text.encode("utf-8")  # what Streamlit's protobuf does: a lone surrogate raises here
        self.drawn.append(text)

    text = code


def test_a_lone_surrogate_is_drawn_as_a_replacement_character() -> None:
    slot = _Slot()
    render.reply(slot, "half \udc00 a pair", cursor=True)
    render.visitor_text(slot, "\ud83d")
    assert slot.drawn == ["half \ufffd a pair ▌", "\ufffd"]


def test_a_failure_is_stored_as_a_category_and_an_id_only() -> None:
    failed = _result(text="partial", finish_reason="error",
                     error="RemoteError: HTTP 401 from https://api.example/v1: org-xyz, model llama-70b")
    public = send_turn.public_result(failed, where="test")
    assert public.text == "partial", "what the visitor was shown is kept"
    category, _, rest = (public.error or "").partition(" ")
    assert category == "refused" and rest.startswith("(error ") and "org-xyz" not in (public.error or "")
