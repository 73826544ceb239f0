"""The visitor cookie against a real ``streamlit run`` on loopback, spoken to like a browser does.

A websocket client connects to ``/_stcore/stream`` (with or without a ``Cookie`` header), asks for a
script run and reads the page's messages. It plays the browser's part honestly: the cookie it sends on
"reload" is the one the page's own script would have stored (read from the ``st.html`` element the
server sent). AppTest cannot send cookies, which is why this test exists.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import websockets
from sqlalchemy import create_engine, select
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.typing import Subprotocol

from db.models import Visitor

REPO = Path(__file__).resolve().parents[2]
SALT = "a-long-hashing-salt-for-cookies"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The app on a free loopback port with a fresh SQLite file and one remote model (loads at once)."""
    tmp = tmp_path_factory.mktemp("cookie-server")
    catalogue = tmp / "catalogue.toml"
    catalogue.write_text(
        '[[model]]\nslug = "nowhere"\nname = "Nowhere"\nfamily = "remote"\n'
        'source = "remote:http://127.0.0.1:9"\nremote_model = "m"\n'
    )
    db_url = f"sqlite:///{(tmp / 'arena.db').as_posix()}"
    env = {
        **os.environ,
        "ARENA_ENVIRONMENT": "test",
        "ARENA_DATABASE_URL": db_url,
        "ARENA_DATA_DIR": str(tmp),
        "ARENA_CATALOGUE_PATH": str(catalogue),
        "ARENA_HASH_SALT": SALT,
        # Trusted proxies mean a network: weak secrets are refused there even in test mode.
        "ARENA_ADMIN_PASSWORD": "a-long-admin-password-for-cookies",
        "ARENA_TRUSTED_PROXIES": '["127.0.0.1"]',  # the test client plays the reverse proxy too
    }
    env.pop("XLA_FLAGS", None)
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
        yield f"127.0.0.1:{port}", db_url
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


async def _page(host: str, *, cookie: str | None, query: str = "", forwarded: str = "") -> list[str]:
    """One browser session: connect, run the script once, return the bodies of its st.html elements."""
    headers = {"Origin": f"http://{host}"}
    if forwarded:
        headers["X-Forwarded-For"] = forwarded
    if cookie:
        headers["Cookie"] = cookie
    bodies: list[str] = []
    async with websockets.connect(
        f"ws://{host}/_stcore/stream", subprotocols=[Subprotocol("streamlit")], additional_headers=headers,
        max_size=None,
    ) as ws:
        back = BackMsg()
        back.rerun_script.query_string = query
        back.rerun_script.page_script_hash = ""
        await ws.send(back.SerializeToString())
        while True:
            raw = await asyncio.wait_for(ws.recv(), timeout=60)
            msg = ForwardMsg()
            msg.ParseFromString(raw)
            kind = msg.WhichOneof("type")
            if kind == "delta" and msg.delta.new_element.WhichOneof("type") == "html":
                bodies.append(msg.delta.new_element.html.body)
            if kind == "script_finished":
                return bodies


def _stored_cookie(bodies: list[str]) -> str | None:
    """What the page's script would store in the browser: ``fixit_visitor=<value>``."""
    for body in bodies:
        found = re.search(r"fixit_visitor=([0-9a-f]{32}\.[0-9a-f]{32})", body)
        if found:
            return f"fixit_visitor={found.group(1)}"
    return None


def _visitors(db_url: str) -> list[str]:
    with create_engine(db_url).connect() as conn:
        return list(conn.scalars(select(Visitor.anon_id).order_by(Visitor.id)))


def test_a_reload_with_the_cookie_is_the_same_visitor_and_a_v_link_is_not(server: tuple[str, str]) -> None:
    host, db_url = server
    first = asyncio.run(_page(host, cookie=None))
    cookie = _stored_cookie(first)
    assert cookie is not None, "a new visitor's page stores a signed cookie"
    visitor = cookie.split("=")[1].split(".")[0]
    assert _visitors(db_url) == [visitor]

    again = asyncio.run(_page(host, cookie=cookie))  # the reload: the browser sends the cookie back
    assert _stored_cookie(again) is None, "a known visitor gets no new cookie"
    assert _visitors(db_url) == [visitor], "the reload is the same visitor (so its open battle resumes)"

    copied = asyncio.run(_page(host, cookie=None, query=f"v={visitor}"))  # someone else's old link
    assert _visitors(db_url)[-1] != visitor and len(_visitors(db_url)) == 2
    assert _stored_cookie(copied) is not None

    forged = asyncio.run(_page(host, cookie=f"fixit_visitor={visitor}.{'0' * 32}"))
    assert len(_visitors(db_url)) == 3 and _stored_cookie(forged) is not None, "a bad signature is a stranger"


def test_behind_a_trusted_proxy_the_address_is_the_one_it_forwarded(server: tuple[str, str]) -> None:
    """The proxy appends the client's address to X-Forwarded-For; whatever the client put left of it is
    not believed."""
    from db.actions import hash_address

    host, db_url = server
    asyncio.run(_page(host, cookie=None, forwarded="203.0.113.9, 10.1.2.3"))
    with create_engine(db_url).connect() as conn:
        latest = conn.scalar(select(Visitor.address_hash).order_by(Visitor.id.desc()).limit(1))
    assert latest == hash_address("10.1.2.3", salt=SALT)


def _latest_address_hash(db_url: str) -> str | None:
    with create_engine(db_url).connect() as conn:
        return conn.scalar(select(Visitor.address_hash).order_by(Visitor.id.desc()).limit(1))


def test_ipv6_visitors_are_keyed_by_their_64(server: tuple[str, str]) -> None:
    """The probe: IPv6 was keyed by the full /128, so one subscriber rotating through its /64 was a new
    address (a new budget) every time. Two addresses of one /64 are one address now, another /64 is not,
    and an IPv4-mapped address is its IPv4 address."""
    from db.actions import hash_address

    host, db_url = server
    asyncio.run(_page(host, cookie=None, forwarded="2001:db8:7:8::1"))
    first = _latest_address_hash(db_url)
    asyncio.run(_page(host, cookie=None, forwarded="2001:db8:7:8:dead:beef:0:2"))
    assert _latest_address_hash(db_url) == first == hash_address("2001:db8:7:8::/64", salt=SALT)
    asyncio.run(_page(host, cookie=None, forwarded="2001:db8:7:9::1"))
    assert _latest_address_hash(db_url) != first
    asyncio.run(_page(host, cookie=None, forwarded="::ffff:198.51.100.4"))
    assert _latest_address_hash(db_url) == hash_address("198.51.100.4", salt=SALT)
