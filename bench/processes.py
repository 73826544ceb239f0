"""Server processes on loopback for the benchmarks (and the end-to-end tests, which import these): a free
port, a child process that is always stopped, a wait until it answers, and the app server's command."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def streamlit_command(port: int) -> list[str]:
    """``streamlit run webapp/app.py`` headless on ``port`` of 127.0.0.1."""
    return [sys.executable, "-m", "streamlit", "run", str(REPO / "webapp" / "app.py"),
            "--server.headless", "true", "--server.port", str(port), "--server.address", "127.0.0.1",
            "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]


@contextmanager
def started(argv: Sequence[str], *, env: Mapping[str, str] | None, log: Path | None,
            stop_timeout: float = 20.0) -> Iterator[subprocess.Popen[bytes]]:
    """``argv`` as a child process (output to ``log``, else discarded), terminated (then killed) on exit."""
    with (log.open("wb") if log is not None else open("/dev/null", "wb")) as sink:
        process = subprocess.Popen(list(argv), cwd=REPO, env=dict(env) if env is not None else None,
                                   stdout=sink, stderr=subprocess.STDOUT)
        try:
            yield process
        finally:
            process.terminate()
            try:
                process.wait(timeout=stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def wait_for(ready: Callable[[], bool], process: subprocess.Popen[bytes], *, timeout: float, what: str,
             every: float = 0.5) -> None:
    """Poll ``ready`` (False or an OSError: not yet) until it answers True; an error if ``process`` exits
    first or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with status {process.returncode} before it was ready")
        try:
            if ready():
                return
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(every)
    raise TimeoutError(f"{what} was not ready after {timeout:.0f} s")


def healthy(url: str) -> bool:
    """Streamlit's own health check answers 200."""
    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as answer:
        return bool(answer.status == 200)
