"""Start-up progress while models load, and both sides of a battle generating at the same time with the
real pool's tiny keras models."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from inference.protocol import ChatMessage, GenerationParams
from tests.webapp.conftest import BUDGET_MB, TINY_CATALOGUE, ScriptedEngine, open_app
from tests.webapp.test_arena_app import _texts
from webapp.streaming import StreamJob, stream_pair


def test_start_up_shows_each_models_state(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, engine_server: ScriptedEngine
) -> None:
    """One model is not enough for a battle: the page shows the pool's progress instead of the arena."""
    catalogue = tmp_path / "one.toml"
    catalogue.write_text(
        f'[[model]]\nslug = "lonely"\nname = "Lonely Served"\nfamily = "remote"\n'
        f'source = "remote:{engine_server.url}"\nremote_model = "x"\n'
    )
    monkeypatch.setenv("ARENA_DATABASE_URL", f"sqlite:///{(tmp_path / 'a.db').as_posix()}")
    monkeypatch.setenv("ARENA_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("ARENA_CATALOGUE_PATH", str(catalogue))
    from webapp import resources

    resources.pool(str(catalogue), BUDGET_MB, str(tmp_path)).wait_ready(timeout=30)
    at = open_app("pages/arena.py")
    assert any("page opens as soon as 2 are ready" in i for i in _texts(at.info))
    assert "Lonely Served: ready" in _texts(at.text)
    assert any("Not enough models" in e for e in _texts(at.error))
    assert not at.chat_input, "no battle can start"
    chat = open_app("pages/chat.py")  # one model is enough to chat with
    assert chat.chat_input


def test_both_sides_stream_through_the_real_pool(arena_env: Callable[..., str], data_dir: Path) -> None:
    """The pool's tiny keras models behind stream_pair: every delta reaches the page and adds up to the
    final text of its own side. (Concurrency itself is measured by ``python -m webapp bench``; tiny
    models finish in milliseconds, too fast for a timing assertion on a shared CPU.)"""
    arena_env()
    from webapp import resources

    pool = resources.pool(str(TINY_CATALOGUE), BUDGET_MB, str(data_dir))
    models = [pool.get(slug) for slug in pool.ready_slugs()[:2]]
    messages = [ChatMessage("user", "Add a meeting with Fred on Nov 11 at 5PM")]
    params = GenerationParams(max_new_tokens=16)
    jobs = {side: StreamJob(m, messages, params) for side, m in zip("ab", models, strict=True)}
    shown: dict[str, str] = {}
    outcome = stream_pair(jobs, on_delta=shown.__setitem__, on_result=lambda s, r: None)
    assert {r.finish_reason for r in outcome.results.values()} <= {"stop", "length"}
    for side, result in outcome.results.items():
        assert result.new_tokens > 0
        assert shown.get(side, "") == result.text, "the streamed text is the stored text"
        assert outcome.timings[side].first_delta is not None
