"""Start-up progress while models load, and both sides of a battle generating at the same time with the
real pool's tiny keras models."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from inference.pool import ModelStatus
from inference.protocol import ChatMessage, GenerationParams, GenerationResult
from tests.webapp.conftest import APP, BUDGET_MB, TINY_CATALOGUE, ScriptedEngine, open_app
from tests.webapp.test_arena_app import _texts
from webapp.context import model_row
from webapp.pool_view import row_text
from webapp.replies import ReplyDesk, follow


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
    monkeypatch.setenv("ARENA_MESH", "off")
    from webapp import resources

    resources.pool(str(catalogue), BUDGET_MB, str(tmp_path), "off").wait_ready(timeout=30)
    at = open_app("pages/arena.py")
    assert any("page opens as soon as 2 are ready" in i for i in _texts(at.info))
    assert any(t.startswith("Lonely Served: ready (loaded in ") for t in _texts(at.text)), _texts(at.text)
    assert any("Not enough models" in e for e in _texts(at.error))
    assert not at.chat_input, "no battle can start"
    chat = open_app("pages/chat.py")  # one model is enough to chat with
    assert chat.chat_input


class SteppingPool:
    """A pool whose second model moves on one state each time anyone looks at the pool (``status`` or
    ``ready_slugs``), through ``states``; the first model is ready from the start."""

    def __init__(self, slugs: list[str], states: list[str]) -> None:
        self.slugs = slugs
        self.states = states
        self.reads = 0
        self.second_message = ""  # the second model's loading stage
        self.second_since: float | None = None  # when its load began

    def status(self) -> dict[str, ModelStatus]:
        second = self.states[min(self.reads, len(self.states) - 1)]
        self.reads += 1
        first, other = self.slugs
        return {
            first: ModelStatus(slug=first, name=first, state="ready"),
            other: ModelStatus(slug=other, name=other, state=second,  # type: ignore[arg-type]
                               message=self.second_message, loading_since=self.second_since),
        }

    def ready_slugs(self) -> list[str]:
        return [s for s, status in self.status().items() if status.state == "ready"]


@pytest.fixture
def stepping_pool(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, mixed_catalogue: Path
) -> Callable[[list[str]], SteppingPool]:
    """The app on a fresh database and the served catalogue, with its pool replaced by a SteppingPool."""
    monkeypatch.setenv("ARENA_DATABASE_URL", f"sqlite:///{(tmp_path / 'a.db').as_posix()}")
    monkeypatch.setenv("ARENA_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("ARENA_CATALOGUE_PATH", str(mixed_catalogue))
    from webapp import resources

    def make(states: list[str]) -> SteppingPool:
        pool = SteppingPool(["gemma-served", "plain-served"], states)
        monkeypatch.setattr(resources, "pool", lambda *args: pool)
        return pool

    return make


def test_a_model_that_finishes_while_the_page_looks_is_not_reported_as_failed(
    stepping_pool: Callable[[list[str]], SteppingPool],
) -> None:
    """The second model becomes ready between two looks at the pool. The start-up screen once read the
    ready models and the progress separately, saw '2 of 2 models ready' with too few usable models,
    said 'Not enough models could be loaded' and stopped polling: the battle screen never opened."""
    stepping_pool(["compiling", "ready"])
    at = AppTest.from_file(APP, default_timeout=30)
    at.run()  # the Arena is the default page
    assert not at.exception, [e.value for e in at.exception]
    assert not any("Not enough models" in e for e in _texts(at.error)), _texts(at.error)
    assert at.chat_input, "the progress saw both models ready and reran the page: the battle screen is up"


def test_start_up_screen_does_not_hold_the_script_while_models_load(
    stepping_pool: Callable[[list[str]], SteppingPool],
) -> None:
    """While a model loads, the run ends with the progress on screen; the browser polls (a fragment
    with run_every), instead of a script sleeping and calling st.rerun() in a loop."""
    stepping_pool(["loading"])
    at = AppTest.from_file(APP, default_timeout=30)
    at.run()  # the Arena is the default page
    assert not at.exception, [e.value for e in at.exception]
    assert "plain-served: loading" in _texts(at.text)
    assert any("1 of 2" in str(p.proto.text) for p in at.get("progress"))
    assert not at.error and not at.chat_input
    assert not any("First start" in c for c in _texts(at.caption)), "no conversion: no first-start words"


def test_start_up_screen_says_how_long_each_model_has_loaded(
    stepping_pool: Callable[[list[str]], SteppingPool],
) -> None:
    """A first start converts weights for minutes: the screen says which stage each model is in, for how
    long, and what a first start costs, so a visitor knows it is working and roughly how long is left."""
    pool = stepping_pool(["loading"])
    pool.second_message, pool.second_since = "convert", time.time() - 40
    at = AppTest.from_file(APP, default_timeout=30)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    (line,) = [t for t in _texts(at.text) if t.startswith("plain-served:")]
    assert re.fullmatch(r"plain-served: loading - convert \((4[0-9]) s so far\)", line), line
    assert any(c.startswith("First start on this machine") and "3 min 37 s" in c for c in _texts(at.caption))


def test_row_text_reads_each_state() -> None:
    now = time.time()
    assert row_text(model_row(ModelStatus("q", "Q", "queued"), now)) == "Q: queued"
    compiling = ModelStatus("q", "Q", "compiling", loading_since=now - 61.4)
    assert row_text(model_row(compiling, now)) == "Q: compiling (61 s so far)"
    ready = ModelStatus("q", "Q", "ready", loading_since=now - 300, load_seconds=12.4)
    assert row_text(model_row(ready, now)) == "Q: ready (loaded in 12 s)", "the load's own time, not since"
    failed = ModelStatus("q", "Q", "failed", message="OSError: gone", loading_since=now - 5)
    assert row_text(model_row(failed, now)) == "Q: failed - OSError: gone"
    assert model_row(ModelStatus("q", "Q", "loading", message="assemble 40%"), now).converting
    assert not model_row(ModelStatus("q", "Q", "loading", message="read"), now).converting


def test_both_sides_stream_through_the_real_pool(arena_env: Callable[..., str], data_dir: Path) -> None:
    """The pool's tiny keras models as reply jobs: every delta reaches the page and adds up to the final
    text of its own side. (Concurrency itself is measured by ``python -m webapp bench``; tiny models
    finish in milliseconds, too fast for a timing assertion on a shared CPU.)"""
    arena_env()
    from webapp import resources

    pool = resources.pool(str(TINY_CATALOGUE), BUDGET_MB, str(data_dir), "off")
    models = [pool.get(slug) for slug in pool.ready_slugs()[:2]]
    messages = [ChatMessage("user", "Add a meeting with Fred on Nov 11 at 5PM")]
    params = GenerationParams(max_new_tokens=16)
    stored: dict[str, GenerationResult] = {}
    desk = ReplyDesk()
    jobs = {side: desk.start(battle_id="pool", side=side, model=m, messages=messages, params=params,
                             finish=lambda job, result: stored.__setitem__(job.side, result))
            for side, m in zip("ab", models, strict=True)}
    shown: dict[str, str] = {}
    follow(jobs, on_text=shown.__setitem__, on_done=lambda job: None)
    assert set(stored) == {"a", "b"} and {r.finish_reason for r in stored.values()} <= {"stop", "length"}
    for side, result in stored.items():
        assert result.new_tokens > 0
        assert shown.get(side, "") == result.text, "the streamed text is the stored text"
