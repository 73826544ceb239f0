"""Metrics, readiness and JSON logs: a battle in AppTest, then ``/metrics`` and ``/ready`` read over real
HTTP on loopback from the process's metrics server (``ARENA_METRICS_PORT``)."""

from __future__ import annotations

import datetime as dt
import io
import json
import logging
import re
import socket
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine

from db import actions as db_actions
from tests.webapp.conftest import BUDGET_MB, ScriptedEngine, open_app
from tests.webapp.test_arena_app import ARENA, CORRECTION, TURN_1, _send, play_the_study
from wiring import Readiness
from wiring.observability import JsonFormatter, start_metrics_server

ADMIN_PASSWORD = "pw-metrics-Zq81-admin-secret"
HASH_SALT = "salt-metrics-Wv42-hashing-secret"
SLUGS = ("gemma-served", "plain-served")
DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json"
Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def metrics_port() -> int:
    """One port for the module: a process keeps its metrics server (one per address) to the end."""
    return _free_port()


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """What the root logger's JSON handler writes during the test (it is installed by the app's first
    run with ``ARENA_LOG_FORMAT=json``); every logger's handlers and formatters are put back afterwards."""
    root = logging.getLogger()
    before = list(root.handlers)
    loggers = [root, *(item for item in logging.root.manager.loggerDict.values()
                       if isinstance(item, logging.Logger))]
    formatters = [(handler, handler.formatter) for logger in loggers for handler in logger.handlers]
    sink = io.StringIO()
    yield sink
    root.handlers[:] = before
    for handler, formatter in formatters:
        handler.setFormatter(formatter)


def _capture(sink: io.StringIO) -> None:
    handlers = [h for h in logging.getLogger().handlers if isinstance(h.formatter, JsonFormatter)]
    assert handlers, "ARENA_LOG_FORMAT=json installs a JSON handler on the root logger"
    for handler in handlers:
        assert isinstance(handler, logging.StreamHandler)
        handler.setStream(sink)


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


def _scrape(port: int) -> Series:
    status, text = _get(port, "/metrics")
    assert status == 200
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _value(series: Series, name: str, **labels: str) -> float:
    return series.get((name, frozenset(labels.items())), 0.0)


def test_metrics_show_a_battle_and_ready_turns_200(
    arena_env: Callable[..., str], mixed_catalogue: Path, engine_server: ScriptedEngine, metrics_port: int,
    json_log: io.StringIO,
) -> None:
    url = arena_env(mixed_catalogue, metrics_port=str(metrics_port), log_format="json",
                    max_message_chars="300", admin_password=ADMIN_PASSWORD, hash_salt=HASH_SALT)
    at = open_app(ARENA)  # the first run starts the metrics server and JSON logging
    _capture(json_log)
    before = _scrape(metrics_port)

    play_the_study(at)
    _send(at, TURN_1)
    _send(at, CORRECTION, route="Model A", correction=True)
    _send(at, "x" * 301)  # refused: ARENA_MAX_MESSAGE_CHARS
    at.button(key="anonymous:vote_a").click().run()
    after = _scrape(metrics_port)

    def grew(name: str, by: float = 1, **labels: str) -> bool:
        return _value(after, name, **labels) - _value(before, name, **labels) == by

    assert grew("arena_battles_opened_total", mode="anonymous")
    assert grew("arena_votes_total", mode="anonymous")
    assert grew("arena_corrections_total", mode="anonymous")
    assert grew("arena_refusals_total", limit="message_chars")
    assert ("arena_refusals_total", frozenset({("limit", "votes_per_day")})) in after, "every limit, at 0"
    replies = [sum(_value(at_time, "arena_model_reply_seconds_count", model=s) for s in SLUGS)
               for at_time in (before, after)]
    assert replies[1] - replies[0] == 3, "one reply each, then the corrected side's second"
    for slug in SLUGS:
        assert _value(after, "arena_model_time_to_first_token_seconds_count", model=slug) >= 1
        assert _value(after, "arena_model_tokens_per_second_count", model=slug) >= 1
        assert _value(after, "arena_model_replies_total", model=slug, finish="stop") >= 1
        assert _value(after, "arena_model_queue_length", model=slug) == 0, "nothing waits after the battle"
        assert _value(after, "arena_model_in_flight", model=slug) == 0
        assert _value(after, "arena_model_ready", model=slug) == 1

    status, body = _get(metrics_port, "/ready")
    assert status == 200 and json.loads(body) == {"ready": True, "database": True, "contestants_ready": 2,
                                                  "needed": 2, "resting": 0}

    # A failing engine is an error of its kind; the visitor's words never reach the log.
    at.button(key="anonymous:new").click().run()
    play_the_study(at)
    with engine_server.scripted({"gemma": None, "plain": None}):
        _send(at, TURN_1)
    failed = _scrape(metrics_port)
    for slug in SLUGS:
        assert _value(failed, "arena_model_errors_total", model=slug, kind="engine_error") \
            - _value(after, "arena_model_errors_total", model=slug, kind="engine_error") == 1
    exported = {name for name, _ in failed}
    queried = {name for panel in json.loads(DASHBOARD.read_text())["panels"] for target in panel["targets"]
               for name in re.findall(r"\barena_[a-z_]+", target["expr"])}
    assert queried and queried <= exported, f"the dashboard queries unexported {queried - exported}"

    logging.getLogger("webapp").warning("salt %s and password %s", HASH_SALT, ADMIN_PASSWORD)
    lines = json_log.getvalue().splitlines()
    records = [json.loads(line) for line in lines]
    assert any(r["message"].startswith("reply failed") and r["level"] == "WARNING" for r in records)
    assert {"time", "level", "logger", "message"} <= set(records[-1])
    assert records[-1]["message"] == "salt [redacted] and password [redacted]"
    text = json_log.getvalue()
    for never in (TURN_1, CORRECTION, ADMIN_PASSWORD, HASH_SALT):
        assert never not in text
    assert db_actions.list_contestants(create_engine(url)), "the test ran on its own database"


def test_ready_is_503_until_two_contestants_serve_and_while_the_database_is_unreachable(
    arena_env: Callable[..., str], mixed_catalogue: Path, data_dir: Path, metrics_port: int, tmp_path: Path,
) -> None:
    from settings import Settings
    from webapp import breaker, resources
    from webapp.metrics import readiness

    url = arena_env(mixed_catalogue)
    engine = resources.engine(url)  # upgraded and registered like the app's
    resources.sync_contestants(engine, resources.catalogue(str(mixed_catalogue)))
    pool = resources.pool(str(mixed_catalogue), BUDGET_MB, str(data_dir), "off")
    settings = Settings()
    server = start_metrics_server(host="127.0.0.1", port=metrics_port,
                                  ready=lambda: readiness(settings, engine, pool))
    assert server is not None and server.port == metrics_port
    assert _get(metrics_port, "/ready")[0] == 200

    rules = breaker.rules(settings)  # a failing engine rests its model in every app server at once
    assert rules is not None
    for _ in range(rules.failures):
        db_actions.record_reply(engine, slug=SLUGS[1], failed=True, rules=rules, now=dt.datetime.now(dt.UTC))
    status, body = _get(metrics_port, "/ready")
    assert status == 200 and json.loads(body)["resting"] == 1, "reported, but no server leaves the pool"

    db_actions.set_contestant_enabled(engine, slug=SLUGS[0], enabled=False)  # the admin disables one
    status, body = _get(metrics_port, "/ready")
    assert status == 503 and json.loads(body)["contestants_ready"] == 1

    gone = create_engine(f"sqlite:///{(tmp_path / 'no-such-folder' / 'arena.db').as_posix()}")
    server.ready = lambda: readiness(settings, gone, pool)
    status, body = _get(metrics_port, "/ready")
    assert status == 503 and json.loads(body) == {
        "ready": False, "database": False, "database_error": "OperationalError", "contestants_ready": 0,
        "needed": 2}
    assert _get(metrics_port, "/nothing")[0] == 404


def test_a_database_error_shows_no_stored_text(tmp_path: Path) -> None:
    """What ``_LOG.exception`` would print of a failed write: the statement, never its values."""
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    from db import make_engine

    engine = make_engine(f"sqlite:///{(tmp_path / 'arena.db').as_posix()}")
    with pytest.raises(SQLAlchemyError) as failed, engine.begin() as connection:
        connection.execute(text("INSERT INTO no_such_table VALUES (:content)"), {"content": TURN_1})
    assert "no_such_table" in str(failed.value) and TURN_1 not in str(failed.value)


def _never_asked() -> Readiness:
    raise AssertionError("no server, no readiness check")


def test_a_busy_metrics_port_leaves_the_process_serving(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        with caplog.at_level(logging.ERROR, logger="wiring.observability"):
            assert start_metrics_server(host="127.0.0.1", port=port, ready=_never_asked) is None
    assert f"metrics server not started on 127.0.0.1:{port}" in caplog.text
