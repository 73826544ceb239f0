"""Web-app fixtures: a real pool of tiny random keras models (built once per session), a fresh SQLite
database per test, and a tiny OpenAI-compatible server for replies a random model would never write
(a model naming itself, a failing engine)."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.fake_openai import running

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "webapp" / "app.py")
TINY_CATALOGUE = REPO / "tests" / "data" / "tiny_catalogue.toml"
BUDGET_MB = 8000
TIMEOUT_S = 180


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("arena-data")


def warm_pool(catalogue: Path, data_dir: Path, *, count: int = 2, mesh: str = "off") -> None:
    """Build (or reuse) the app's cached pool for ``catalogue`` and wait until ``count`` models are ready."""
    from webapp import resources

    pool = resources.pool(str(catalogue), BUDGET_MB, str(data_dir), mesh)
    ready = pool.wait_ready(count=count, timeout=TIMEOUT_S)
    assert len(ready) >= count, pool.status()


@pytest.fixture
def arena_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, data_dir: Path) -> Callable[..., str]:
    """Point the app at a fresh database and the given catalogue (tiny models by default); returns the URL."""

    def configure(catalogue: Path = TINY_CATALOGUE, **settings: str) -> str:
        url = f"sqlite:///{(tmp_path / 'arena.db').as_posix()}"
        monkeypatch.setenv("ARENA_DATABASE_URL", url)
        monkeypatch.setenv("ARENA_DATA_DIR", str(data_dir))
        monkeypatch.setenv("ARENA_CATALOGUE_PATH", str(catalogue))
        monkeypatch.setenv("ARENA_MEMORY_BUDGET_MB", str(BUDGET_MB))
        # The tests' 8 virtual CPU devices would shard every model: one device unless a test asks.
        settings.setdefault("mesh", "off")
        for name, value in settings.items():
            monkeypatch.setenv(f"ARENA_{name.upper()}", value)
        warm_pool(catalogue, data_dir, mesh=settings["mesh"])
        return url

    return configure


def open_app(page: str | None = None, *, visitor: str | None = None) -> AppTest:
    """A fresh browser tab on the app, optionally of a known visitor: AppTest cannot send cookies, so
    the tab starts with the visitor id the signed cookie would have given it (the cookie itself is
    tested against a real server in ``test_visitor_cookie.py``)."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    if visitor:
        at.session_state["visitor_id"] = visitor
    at.run()
    if page:
        at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


# --- a scripted OpenAI-compatible engine ---------------------------------------------------------------


ERROR_PREFIX = "!error "  # a scripted reply starting with this: HTTP 400 with the rest as its message


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 -- quiet
        pass

    def do_POST(self) -> None:  # noqa: N802 -- http.server naming
        length = int(self.headers.get("Content-Length") or 0)
        model = json.loads(self.rfile.read(length) or b"{}").get("model", "")
        reply: str | None = self.server.replies.get(model, "Hello there.")  # type: ignore[attr-defined]
        if reply is None or reply.startswith(ERROR_PREFIX):
            message = "engine on fire" if reply is None else reply[len(ERROR_PREFIX) :]
            self.send_response(500 if reply is None else 400)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps({"error": {"message": message}}).encode())
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        words = reply.split(" ")
        for i, word in enumerate(words):
            text = word if i == 0 else " " + word
            last = i == len(words) - 1
            chunk = {
                "choices": [
                    {"index": 0, "delta": {"content": text}, "finish_reason": "stop" if last else None}
                ]
            }
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
            time.sleep(self.server.word_delay_s)  # type: ignore[attr-defined]
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


class ScriptedEngine(ThreadingHTTPServer):
    """Answers a chat request for engine model ``m`` with ``replies[m]`` streamed word by word ("Hello
    there." when unset), HTTP 500 when it is None, or HTTP 400 with the error message that follows
    ``ERROR_PREFIX``; ``word_delay_s`` between words (a slow engine)."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.replies: dict[str, str | None] = {}
        self.word_delay_s = 0.0

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    @classmethod
    @contextlib.contextmanager
    def running(cls) -> Iterator[ScriptedEngine]:
        """A scripted engine serving on a free loopback port for the block."""
        with running(cls()) as server:
            yield server

    def catalogue(self, path: Path, slugs: tuple[str, ...]) -> Path:
        """Write a catalogue at ``path`` of one remote model per slug, each served by this engine under
        its slug (so ``replies[slug]`` scripts it); returns ``path``."""
        path.write_text("".join(
            f'[[model]]\nslug = "{slug}"\nname = "{slug.title()}"\nfamily = "remote"\n'
            f'source = "remote:{self.url}"\nremote_model = "{slug}"\n\n'
            for slug in slugs
        ))
        return path

    @contextlib.contextmanager
    def scripted(self, replies: dict[str, str | None], *, word_delay_s: float = 0.0) -> Iterator[None]:
        """Answer with ``replies`` (and ``word_delay_s`` between words) inside the block; defaults after."""
        self.replies.update(replies)
        self.word_delay_s = word_delay_s
        try:
            yield
        finally:
            self.replies.clear()
            self.word_delay_s = 0.0


@pytest.fixture(scope="session")
def engine_server() -> Iterator[ScriptedEngine]:
    with ScriptedEngine.running() as server:
        yield server


@pytest.fixture(scope="session")
def mixed_catalogue(tmp_path_factory: pytest.TempPathFactory, engine_server: ScriptedEngine) -> Path:
    """Two models behind the scripted engine (engine model names "gemma" and "plain"): they load in no
    time, and each can be told what to answer."""
    path = tmp_path_factory.mktemp("catalogue") / "served.toml"
    entries = [("gemma-served", "Gemma Served", "gemma"), ("plain-served", "Plain Served", "plain")]
    path.write_text(
        "".join(
            f'[[model]]\nslug = "{slug}"\nname = "{name}"\nfamily = "remote"\n'
            f'source = "remote:{engine_server.url}"\nremote_model = "{model}"\n\n'
            for slug, name, model in entries
        )
    )
    return path


@pytest.fixture
def engine_reply(engine_server: ScriptedEngine) -> Iterator[Callable[[str | None], None]]:
    """Sets what the 'Gemma Served' model answers (None: HTTP 500); 'Plain Served' says hello."""

    def set_reply(reply: str | None) -> None:
        engine_server.replies["gemma"] = reply

    yield set_reply
    engine_server.replies.clear()
