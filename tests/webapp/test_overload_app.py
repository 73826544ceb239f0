"""Overload is explained: past a model's line limit the visitor reads that the arena is busy.

Probe of the old app: 50 visitors on 2 models were all queued, with no bound, no deadline and no word
about waiting.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from inference.protocol import ChatMessage, GenerationParams
from tests.webapp.conftest import open_app
from tests.webapp.test_arena_app import TURN_1, _send, _texts


def test_a_full_line_means_the_arena_is_busy_then_it_opens_again(
    arena_env: Callable[..., str], mixed_catalogue: Path
) -> None:
    from webapp import context

    arena_env(catalogue=mixed_catalogue, model_queue_limit="1")
    ctx = context.reader()
    held = context.model_for(ctx, "plain-served").stream([ChatMessage("user", "hi")], GenerationParams())
    next(held)  # another visitor's request: in the line until its stream is closed
    try:
        at = open_app("pages/arena.py")
        _send(at, TURN_1)
        assert "the arena is busy right now: try again in a minute." in [e.lower() for e in _texts(at.error)]
        assert "battle_id:anonymous" not in at.session_state, "nothing was written"
    finally:
        held.close()
    _send(at, TURN_1)
    assert not at.error and "battle_id:anonymous" in at.session_state
