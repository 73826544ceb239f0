"""Weak secrets only where nobody else can reach the app.

Probe of the old app: ``make run`` (development, Streamlit on 127.0.0.1) is exactly docs/OPERATIONS.md's
reverse-proxy set-up, and "served locally" looked only at the bound address, so through a proxy on the
same host the placeholder ``changethis`` opened the Admin page and the cookie key was the public
placeholder salt. A request is local now only without proxy headers and with a loopback ``Host`` (and
``Origin``); with ``ARENA_TRUSTED_PROXIES`` set weak secrets are refused even in development.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import websockets
from pydantic import SecretStr
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.typing import Subprotocol

from settings import DEV_ADMIN_PASSWORD, Settings
from tests.webapp.test_visitor_cookie import _free_port, _stored_cookie
from webapp.admin_gate import admin_available, is_loopback_host, request_is_local, serving_problem

REPO = Path(__file__).resolve().parents[2]
LOCAL = {"Host": "127.0.0.1:8501", "Origin": "http://127.0.0.1:8501"}


@pytest.mark.parametrize(
    "host",
    ["localhost", "localhost:8501", "LOCALHOST:80", "127.0.0.1", "127.0.0.1:8501", "127.9.8.7:1",
     "[::1]", "[::1]:8501", "::1"],
)
def test_loopback_hosts(host: str) -> None:
    assert is_loopback_host(host)


@pytest.mark.parametrize(
    "host",
    ["", "arena.example.com", "arena.example.com:443", "203.0.113.9", "[2001:db8::1]:8501", "10.0.0.1:8501",
     "localhost.example.com", "127.0.0.1.nip.io", "localhost:notaport", "[::1]x", "0.0.0.0:8501"],
)
def test_other_hosts(host: str) -> None:
    assert not is_loopback_host(host)


def test_a_browser_on_this_machine_is_local() -> None:
    assert request_is_local(LOCAL, server_address="127.0.0.1")
    assert request_is_local({"host": "localhost:8501"}, server_address="localhost"), "no Origin is fine"
    assert request_is_local({"Host": "[::1]:8501", "Origin": "http://[::1]:8501"}, server_address="::1")


@pytest.mark.parametrize(
    "extra",
    [
        {"X-Forwarded-For": "203.0.113.9"},
        {"x-forwarded-for": "127.0.0.1"},  # even one naming loopback: something relayed the request
        {"Forwarded": "for=203.0.113.9"},
        {"X-Real-IP": "203.0.113.9"},
        {"X-Forwarded-Host": "arena.example.com"},
        {"X-Forwarded-Proto": "https"},
        {"Via": "1.1 nginx"},
        {"Host": "arena.example.com"},
        {"Host": "arena.example.com", "Origin": "https://arena.example.com"},
        {"Origin": "https://arena.example.com"},
        {"Origin": "null"},
    ],
)
def test_a_relayed_or_foreign_request_is_not_local(extra: dict[str, str]) -> None:
    headers = {**LOCAL, **extra}
    assert not request_is_local(headers, server_address="127.0.0.1")


def test_no_host_or_a_network_binding_or_a_named_peer_is_not_local() -> None:
    assert not request_is_local({"Origin": "http://127.0.0.1:8501"}, server_address="127.0.0.1")
    assert not request_is_local(LOCAL, server_address="")
    assert not request_is_local(LOCAL, server_address="0.0.0.0")
    assert not request_is_local(LOCAL, server_address="127.0.0.1", peer="203.0.113.9")


def test_trusted_proxies_refuse_weak_secrets_even_in_development() -> None:
    weak = Settings(environment="development", trusted_proxies=["127.0.0.1"])
    problem = serving_problem(weak, local=True)
    assert problem is not None and "ARENA_TRUSTED_PROXIES" in problem and "placeholder" in problem
    assert not admin_available(weak).allowed, "no proxy header needed: the setting says it is networked"
    strong = Settings(environment="development", trusted_proxies=["127.0.0.1"],
                      admin_password=SecretStr("a-long-admin-password-1"),
                      hash_salt=SecretStr("a-long-hashing-salt-2"))
    assert serving_problem(strong, local=False) is None and admin_available(strong).allowed


# --- the real server: `make run`'s set-up with a proxy on the same host -----------------------------------


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``streamlit run`` as ``make run`` starts it (development, 127.0.0.1) with the placeholder secrets."""
    tmp = tmp_path_factory.mktemp("dev-server")
    catalogue = tmp / "catalogue.toml"
    catalogue.write_text(
        '[[model]]\nslug = "nowhere"\nname = "Nowhere"\nfamily = "remote"\n'
        'source = "remote:http://127.0.0.1:9"\nremote_model = "m"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_") and k != "XLA_FLAGS"}
    env.update({
        "ARENA_ENVIRONMENT": "development",
        "ARENA_DATABASE_URL": f"sqlite:///{(tmp / 'arena.db').as_posix()}",
        "ARENA_DATA_DIR": str(tmp),
        "ARENA_CATALOGUE_PATH": str(catalogue),
    })
    port = _free_port()
    command = [
        sys.executable, "-m", "streamlit", "run", str(REPO / "webapp" / "app.py"),
        "--server.headless", "true", "--server.port", str(port), "--server.address", "127.0.0.1",
        "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
    ]
    log = (tmp / "streamlit.log").open("wb")
    proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((tmp / "streamlit.log").read_text()) from None
                time.sleep(0.3)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


async def _visit(address: str, headers: dict[str, str]) -> tuple[list[str], list[str]]:
    """One session on the server at ``address`` with these request headers (a ``Host`` among them names
    the site the proxy serves): (st.error texts, st.html bodies) of one script run."""
    errors: list[str] = []
    bodies: list[str] = []
    extra = {k: v for k, v in headers.items() if k.lower() != "host"}
    site = headers.get("Host", address)
    ip, port = address.rsplit(":", 1)
    sock = socket.create_connection((ip, int(port)))
    async with websockets.connect(
        f"ws://{site}/_stcore/stream", sock=sock, subprotocols=[Subprotocol("streamlit")],
        additional_headers=extra, max_size=None,
    ) as ws:
        back = BackMsg()
        back.rerun_script.query_string = ""
        back.rerun_script.page_script_hash = ""
        await ws.send(back.SerializeToString())
        while True:
            msg = ForwardMsg()
            msg.ParseFromString(await asyncio.wait_for(ws.recv(), timeout=60))
            kind = msg.WhichOneof("type")
            element = msg.delta.new_element if kind == "delta" else None
            if element is not None and element.WhichOneof("type") == "alert":
                errors.append(element.alert.body)
            if element is not None and element.WhichOneof("type") == "html":
                bodies.append(element.html.body)
            if kind == "script_finished":
                return errors, bodies


def test_make_run_serves_this_machine_with_the_placeholders(dev_server: str) -> None:
    errors, bodies = asyncio.run(_visit(dev_server, {"Origin": f"http://{dev_server}"}))
    assert not any("not configured" in e for e in errors), errors
    assert _stored_cookie(bodies) is not None, "the page runs"


@pytest.mark.parametrize(
    "proxy_headers",
    [
        {"X-Forwarded-For": "203.0.113.9"},
        {"Forwarded": "for=203.0.113.9;proto=https"},
        {"X-Real-IP": "203.0.113.9"},
        {"Host": "arena.example.com", "Origin": "https://arena.example.com"},
    ],
)
def test_through_a_proxy_on_the_same_host_the_placeholders_are_refused(
    dev_server: str, proxy_headers: dict[str, str]
) -> None:
    errors, bodies = asyncio.run(_visit(dev_server, {"Origin": f"http://{dev_server}", **proxy_headers}))
    assert any("not configured for a network" in e for e in errors), errors
    assert _stored_cookie(bodies) is None, "no cookie is signed with the placeholder salt"
    assert DEV_ADMIN_PASSWORD not in " ".join(errors), "the message names no secret"
