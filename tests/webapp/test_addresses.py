"""What the per-address limits count under: IPv6 by its /64, unknown addresses in one shared bucket.

Probes of the old app: with no known address (AppTest, a loopback peer with no ``X-Forwarded-For``) every
per-address limit became per visitor, so a new cookie was a new budget; IPv6 was keyed by the full /128,
so one subscriber rotating through its /64 was a new address every time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from db import actions as db_actions
from settings import Settings
from tests.webapp.conftest import open_app
from tests.webapp.test_arena_app import TURN_1, _send, _texts
from webapp import visitor
from webapp.visitor import UNKNOWN_ADDRESS, address_key, client_address, peer_is_trusted

ARENA = "pages/arena.py"


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("203.0.113.9", "203.0.113.9"),
        ("203.0.113.9:4711", "203.0.113.9"),
        (" 203.0.113.9 ", "203.0.113.9"),
        ("2001:db8:1:2::5", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
        ("[2001:db8:1:2::5]:443", "2001:db8:1:2::/64"),
        ("2001:DB8:1:2::5", "2001:db8:1:2::/64"),
        ("fe80::1%eth0", "fe80::/64"),
        ("::ffff:203.0.113.9", "203.0.113.9"),  # IPv4-mapped: the IPv4 address, not a /64 of them all
        ('"[2001:db8::1]:80"', "2001:db8::/64"),
        (None, UNKNOWN_ADDRESS),
        ("", UNKNOWN_ADDRESS),
        ("unknown", UNKNOWN_ADDRESS),
        ("_hidden", UNKNOWN_ADDRESS),
        ("999.1.1.1", UNKNOWN_ADDRESS),
        ("0.0.0.0", UNKNOWN_ADDRESS),
        ("::", UNKNOWN_ADDRESS),
        ("<script>", UNKNOWN_ADDRESS),
    ],
)
def test_address_key(address: str | None, key: str) -> None:
    assert address_key(address) == key


def test_one_ipv6_subscriber_is_one_address_and_its_neighbour_another() -> None:
    rotating = {address_key(f"2001:db8:aa:bb:{n:x}::{n:x}") for n in range(1, 200)}
    assert rotating == {"2001:db8:aa:bb::/64"}
    assert address_key("2001:db8:aa:bc::1") != address_key("2001:db8:aa:bb::1")


def test_a_trusted_proxy_is_believed_and_only_it() -> None:
    proxies = ["10.0.0.0/8", "192.0.2.1"]
    assert client_address("10.9.8.7", "198.51.100.1, 203.0.113.9", proxies) == "203.0.113.9"
    assert client_address("192.0.2.1", "203.0.113.9", proxies) == "203.0.113.9"
    assert client_address("198.51.100.50", "203.0.113.9", proxies) == "198.51.100.50", "not a proxy"
    assert client_address("10.9.8.7", None, proxies) is None, "a proxy that says nothing: unknown"
    assert client_address("10.9.8.7", " , ", proxies) is None
    # Streamlit names a loopback peer None: it is a trusted proxy when loopback is listed.
    assert peer_is_trusted(None, ["127.0.0.1"]) and peer_is_trusted(None, ["::1"])
    assert not peer_is_trusted(None, ["10.0.0.0/8"])
    assert client_address(None, "203.0.113.9", ["127.0.0.1"]) == "203.0.113.9"
    assert client_address(None, "203.0.113.9", []) is None, "an unlisted loopback peer: unknown"
    assert peer_is_trusted("::ffff:10.1.1.1", proxies)
    assert not peer_is_trusted("10.1.1.1", ["not an address"])


def test_without_a_request_the_address_is_the_shared_unknown_key(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The probe's root: ``address_digest`` returned None (no per-address limit) without an address."""
    from webapp.context import address_digest

    monkeypatch.setattr(visitor, "_UNKNOWN_WARNED", threading.Event())
    settings = Settings(environment="test")
    with caplog.at_level(logging.WARNING, logger="webapp.visitor"):
        first, second = address_digest(settings), address_digest(settings)
    assert first is not None and first == second
    salt = settings.hash_salt.get_secret_value()
    assert first == db_actions.hash_address(UNKNOWN_ADDRESS, salt=salt), "salted like every other address"
    warnings = [r for r in caplog.records if "addresses are unknown" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING, "warned once per process"


def test_visitors_of_unknown_address_share_one_bucket(
    arena_env: Callable[..., str], mixed_catalogue: Path
) -> None:
    """Two tabs with two cookies and no known address (AppTest has none): the second is refused once
    the first has used the address's replies for the minute."""
    arena_env(mixed_catalogue, generations_per_minute="2", address_limit_factor="1")
    first = open_app(ARENA)
    _send(first, TURN_1)
    assert not first.error, _texts(first.error)
    second = open_app(ARENA)
    assert second.session_state["visitor_id"] != first.session_state["visitor_id"]
    _send(second, TURN_1)
    assert any("your network" in e for e in _texts(second.error)), _texts(second.error)
