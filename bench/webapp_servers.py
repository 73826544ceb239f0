"""``python -m webapp bench --servers 2 --visitors 200``: real app servers on one PostgreSQL database, the
models behind ``python -m inference serve``, real browsers as visitors (issue 45, item 5).

What runs, all on loopback:

- a fresh PostgreSQL database (created on the server of ``--postgres-url``, migrated to head, dropped at
  the end), so a run never depends on what an earlier one left;
- ``python -m inference serve`` with the catalogue's first two enabled models (default: the tiny test
  models), the one process that holds models;
- ``--servers`` Streamlit app servers (``streamlit run webapp/app.py``), each on its own port, all on that
  database, their catalogue two ``family = "remote"`` entries pointing at the model server: they hold no
  model;
- ``--visitors`` headless Chromium contexts (Playwright; one context, one visitor cookie), at most
  ``--concurrency`` at once, spread over the servers in turn. Each opens the Arena, waits for the battle
  screen (*page* time), sends the battle's hinted request with one click, waits until both replies are in
  and the vote buttons are enabled, votes for A and waits for the page to confirm it.

Reported: page p50/p99 (from navigation to the battle screen), reply p50/p99 (from the click to both
replies in and the vote buttons enabled), TTFT p50/p99 (the replies' stored time to
first token, as the app measured it through the model server), votes per second (confirmed votes over the
visitors' wall time), and the database counted against what the visitors were told: ``lost`` (a
confirmed vote or a sent request with no row) and ``duplicated`` (a visitor with two battles, a battle
with two votes, a turn stored twice) must both be 0.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.processes import CHROMIUM_ARGS, free_port, healthy, started, streamlit_command, wait_for
from bench.serve import server

REPO = Path(__file__).resolve().parent.parent
TINY_CATALOGUE = REPO / "tests" / "data" / "tiny_catalogue.toml"
DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
VISITOR_TIMEOUT_MS = 300_000
# Every visitor comes from 127.0.0.1: the per-address limits would refuse the crowd, so they are opened
# wide here (the limits themselves are the two-server test's subject, tests/e2e/test_two_servers.py).
OPEN_LIMITS = {
    "ARENA_GENERATIONS_PER_MINUTE": "100000", "ARENA_ADDRESS_LIMIT_FACTOR": "1000",
    "ARENA_GENERATIONS_IN_FLIGHT_PER_ADDRESS": "1000", "ARENA_BATTLES_PER_VISITOR_PER_HOUR": "100000",
    "ARENA_MODEL_QUEUE_LIMIT": "100000",
}


@dataclass
class Visit:
    """What one visitor did and was told."""

    server: int
    cookie: str | None = None
    page_s: float | None = None
    reply_s: float | None = None
    sent: bool = False
    voted: bool = False
    error: str | None = None


@dataclass
class Crowd:
    visits: list[Visit] = field(default_factory=list)
    wall_s: float = 0.0


@contextmanager
def fresh_database(admin_url: str) -> Iterator[str]:
    """A new database on the server of ``admin_url``, migrated to head; dropped afterwards."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from db import upgrade_to_head

    name = f"arena_load_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    try:
        upgrade_to_head(url)
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def remote_catalogue(path: Path, base_url: str, slugs: Sequence[str]) -> Path:
    """A catalogue of ``slugs`` as remote contestants behind ``base_url``."""
    path.write_text("".join(
        f'[[model]]\nslug = "{slug}"\nname = "{slug}"\nfamily = "remote"\nsource = "remote:{base_url}"\n'
        f'remote_model = "{slug}"\n\n' for slug in slugs))
    return path


@contextmanager
def app_server(env: dict[str, str], log: Path) -> Iterator[str]:
    """``streamlit run webapp/app.py`` headless on a free loopback port; its URL once healthy."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with started(streamlit_command(port), env=env, log=log) as process:
        wait_for(lambda: healthy(url), process, timeout=180.0, what="an app server")
        yield url


async def _visit(browser: Any, url: str, visit: Visit) -> None:
    from playwright.async_api import expect

    context = await browser.new_context(viewport={"width": 1300, "height": 1000})
    page = await context.new_page()
    page.set_default_timeout(VISITOR_TIMEOUT_MS)
    try:
        started = time.perf_counter()
        await page.goto(url)
        await page.get_by_test_id("stChatInputTextArea").wait_for(state="visible")
        visit.page_s = time.perf_counter() - started
        started = time.perf_counter()
        await page.get_by_role("button", name="Send this request").click()
        visit.sent = True
        vote = page.get_by_role("button", name="👈 A is better")
        await expect(vote).to_be_enabled(timeout=VISITOR_TIMEOUT_MS)
        visit.reply_s = time.perf_counter() - started
        await vote.click()
        await expect(page.get_by_text("Your vote: Model A")).to_be_visible(timeout=VISITOR_TIMEOUT_MS)
        visit.voted = True
    except Exception as exc:  # noqa: BLE001 - a visitor's failure is a figure, not the end of the run
        said = " ".join((await page.inner_text("body")).split())[-400:]
        visit.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]} (the page said: …{said})"
    finally:
        cookies = {c["name"]: c["value"] for c in await context.cookies()}
        visit.cookie = cookies.get("fixit_visitor")
        await context.close()


async def _crowd(urls: Sequence[str], visitors: int, concurrency: int, chromium: str) -> Crowd:
    from playwright.async_api import async_playwright

    crowd = Crowd(visits=[Visit(server=i % len(urls)) for i in range(visitors)])
    gate = asyncio.Semaphore(concurrency)
    done: list[Visit] = []

    async def one(visit: Visit, browser: Any) -> None:
        async with gate:
            await _visit(browser, urls[visit.server], visit)
        done.append(visit)
        if len(done) % 10 == 0 or len(done) == visitors:
            failed = sum(v.error is not None for v in done)
            print(f"[webapp bench] visitors: {len(done)} of {visitors} done ({failed} failed)",
                  file=sys.stderr)

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium, headless=True,
                                                   args=CHROMIUM_ARGS)
        started = time.perf_counter()
        await asyncio.gather(*(one(visit, browser) for visit in crowd.visits))
        crowd.wall_s = time.perf_counter() - started
        await browser.close()
    return crowd


def _percentiles(values: Sequence[float], scale: float = 1.0) -> dict[str, float | None]:
    """Median and 99th percentile (nearest rank) of ``values`` times ``scale``."""
    if not values:
        return {"p50": None, "p99": None}
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered) * scale, 1), "p99": round(p99 * scale, 1)}


_BY_VISITOR = """SELECT v.anon_id, COUNT(*) FROM visitors v JOIN battles b ON b.visitor_id = v.id {join}
                  {where} GROUP BY v.anon_id"""
_COUNTS = {
    "battles": _BY_VISITOR.format(join="", where=""),
    "votes": _BY_VISITOR.format(join="JOIN votes vo ON vo.battle_id = b.id", where=""),
    "requests": _BY_VISITOR.format(join="JOIN conversations c ON c.battle_id = b.id "
                                        "JOIN messages m ON m.conversation_id = c.id",
                                   where="WHERE m.kind = 'request'"),
}


def count_rows(db_url: str, crowd: Crowd) -> dict[str, Any]:
    """The database against what the visitors were told (see the module docstring)."""
    from sqlalchemy import text

    from db import make_engine

    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            per: dict[str, dict[str, int]] = {name: {anon: int(n) for anon, n in conn.execute(text(query))}
                                              for name, query in _COUNTS.items()}
            ttfts = [float(v) for v in conn.execute(text(
                "SELECT ttft_ms FROM messages WHERE kind = 'reply' AND ttft_ms IS NOT NULL")).scalars()]
            total_votes = int(conn.execute(text("SELECT COUNT(*) FROM votes")).scalar_one())
    finally:
        engine.dispose()
    battles, votes, requests = per["battles"], per["votes"], per["requests"]
    lost = duplicated = 0
    for visit in crowd.visits:
        anon = visit.cookie.split(".", 1)[0] if visit.cookie else None
        if anon is None:
            lost += visit.voted or visit.sent  # told something was stored, and no cookie to find it by
            continue
        lost += int(visit.voted and votes.get(anon, 0) < 1) + int(visit.sent and requests.get(anon, 0) < 2)
        duplicated += int(battles.get(anon, 0) > 1) + int(votes.get(anon, 0) > 1)
        duplicated += int(requests.get(anon, 0) > 2)  # one request on each of the two sides
    return {"lost": lost, "duplicated": duplicated, "votes": total_votes, "ttft_ms": _percentiles(ttfts)}


def run_servers(*, servers: int, visitors: int, concurrency: int, catalogue: Path = TINY_CATALOGUE,
                postgres_url: str = DEFAULT_POSTGRES_URL, chromium: str = "chromium") -> dict[str, Any]:
    """Start everything, let the crowd in, count; one report (see the module docstring)."""
    from inference.catalogue import enabled, load_catalogue

    slugs = [entry.slug for entry in enabled(load_catalogue(catalogue))][:2]
    if len(slugs) < 2:
        raise ValueError(f"{catalogue} has fewer than two enabled models")
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="webapp-servers-")))
        db_url = stack.enter_context(fresh_database(postgres_url))
        base = {**os.environ, "KERAS_BACKEND": "jax", "ARENA_ENVIRONMENT": "test", "ARENA_DATA_DIR": str(tmp)}
        base.pop("XLA_FLAGS", None)
        model_env = {**base, **OPEN_LIMITS, "ARENA_CATALOGUE_PATH": str(catalogue)}
        serve = [sys.executable, "-m", "inference", "serve", "--models", ",".join(slugs), "--port", "{port}"]
        print(f"[webapp bench] starting inference serve ({', '.join(slugs)}) and {servers} app servers",
              file=sys.stderr)
        models_url = stack.enter_context(server(serve, slugs=slugs, env=model_env, log=tmp / "serve.log"))
        app_env = {**base, **OPEN_LIMITS, "ARENA_DATABASE_URL": db_url,
                   "ARENA_CATALOGUE_PATH": str(remote_catalogue(tmp / "remote.toml", models_url, slugs))}
        urls = [stack.enter_context(app_server(app_env, tmp / f"app{n}.log")) for n in range(servers)]
        crowd = asyncio.run(_crowd(urls, visitors, concurrency, chromium))
        rows = count_rows(db_url, crowd)
    errors = [v.error for v in crowd.visits if v.error]
    return {
        "servers": servers, "visitors": visitors, "concurrency": concurrency, "models": slugs,
        "database": "postgresql", "wall_s": round(crowd.wall_s, 1),
        "page_ms": _percentiles([v.page_s for v in crowd.visits if v.page_s is not None], 1000.0),
        "reply_ms": _percentiles([v.reply_s for v in crowd.visits if v.reply_s is not None], 1000.0),
        "ttft_ms": rows["ttft_ms"],
        "votes_per_s": round(sum(v.voted for v in crowd.visits) / crowd.wall_s, 2) if crowd.wall_s else 0.0,
        "voted": sum(v.voted for v in crowd.visits),
        "failed": len(errors), "first_error": errors[0] if errors else None,
        "rows": {"votes": rows["votes"], "lost": rows["lost"], "duplicated": rows["duplicated"]},
    }
