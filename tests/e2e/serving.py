"""Real app servers and a real browser for the end-to-end tests: ``streamlit run webapp/app.py`` headless on
free loopback ports, and Debian's chromium driven by Playwright."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from bench.processes import free_port, healthy, started, streamlit_command, wait_for

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "var" / "test-artifacts"
def chromium() -> str:
    """Debian's chromium, or a visible skip when it is not installed."""
    path = shutil.which("chromium")
    if path is None:
        pytest.skip("Debian's chromium is not on PATH (apt-get install chromium)")
    return path


def app_env(tmp_path: Path, catalogue: Path, database_url: str, **settings: str) -> dict[str, str]:
    """The environment of an app server: test mode, ``database_url``, the models of ``catalogue``, and
    ``settings`` as ``ARENA_<NAME>`` variables."""
    env = {
        **os.environ,
        "KERAS_BACKEND": "jax",
        "ARENA_ENVIRONMENT": "test",
        "ARENA_DATABASE_URL": database_url,
        "ARENA_DATA_DIR": str(tmp_path),
        "ARENA_CATALOGUE_PATH": str(catalogue),
        # Boards count closed battles past the publication delay: 0 here, so the battle just voted on
        # shows (tests/webapp/test_leaderboard_unmasking.py tests the delay itself).
        "ARENA_PUBLIC_EXPORT_DELAY_HOURS": "0",
        **{f"ARENA_{name.upper()}": value for name, value in settings.items()},
    }
    env.pop("XLA_FLAGS", None)  # one CPU device is enough for the app
    return env


@contextlib.contextmanager
def serve(tmp_path: Path, env: Mapping[str, str], *, count: int = 1) -> Iterator[list[str]]:
    """``count`` app servers (``streamlit run webapp/app.py``, headless, each on a free loopback port,
    all with ``env``), started together; yields their URLs once every one answers its health check.
    Each server's log is ``<tmp_path>/streamlit-<i>.log``."""
    with contextlib.ExitStack() as stack:
        ports = [free_port() for _ in range(count)]
        servers = [(f"http://127.0.0.1:{port}",
                    stack.enter_context(started(streamlit_command(port), env=env,
                                                log=tmp_path / f"streamlit-{i}.log", stop_timeout=10)))
                   for i, port in enumerate(ports)]
        for url, proc in servers:
            wait_for(lambda url=url: healthy(url), proc, timeout=90.0, what="streamlit")
        yield [url for url, _ in servers]


def wait_for_models(page, timeout_s: float = 480.0) -> None:  # noqa: ANN001
    """The start-up screen shows loading progress and re-renders itself until the battle screen is up.

    On a timeout, the page's text (each model's loading state) and a screenshot are kept, so a start-up
    that never finishes says where it stopped.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.get_by_test_id("stChatInputTextArea").wait_for(state="visible", timeout=timeout_s * 1000)
    except PlaywrightTimeout:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "startup_timeout.png"), full_page=True)
        text = page.inner_text("body")[-2000:]
        raise AssertionError(f"the battle screen never opened; the page said:\n{text}") from None


def send(page, text: str) -> None:  # noqa: ANN001
    """Type ``text`` in the chat box and press Enter."""
    box = page.get_by_test_id("stChatInputTextArea")
    box.fill(text)
    box.press("Enter")
