"""``python -m webapp bench --visitors 50``: simulated visitors on the real pool for a bounded time.

Each visitor is a thread that does what the Arena page does for a turn, through the same functions:
``flows.send_turn.send_problem`` (every limit, the in-flight rule and the model lines), ``db`` to open the
battle with its first request or append a turn, ``webapp.replies`` jobs for both sides at once,
``send_turn.add_reply`` for each finished side; at the turn limit it votes and starts over. Only the
rendering is left out. Afterwards the database is counted against what the visitors were told (every
turn they were told was sent, every reply they were told was stored): ``lost`` and ``duplicated`` must
both be 0.
"""

from __future__ import annotations

import collections
import datetime as dt
import functools
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TINY_CATALOGUE = REPO / "tests" / "data" / "tiny_catalogue.toml"
TURNS = (
    "Add a meeting with Fred on Nov 11 at 5PM",
    "The current year is 2024.",
    "Just the API call please.",
)
BOTH = ("a", "b")
_REASONS = (
    ("in the last minute (the limit", "rate_per_visitor"),
    ("for your network in the last minute", "rate_per_address"),
    ("battles in the last hour", "battles_per_hour"),
    ("from your network in the last hour", "battles_per_address"),
    ("arena is busy", "model_line_full"),
    ("still being generated", "generation_in_flight"),
    ("for your network right now", "in_flight_per_address"),
    ("limit of", "turn_limit"),
)


def reason_of(message: str) -> str:
    """A short machine name for a refusal sentence."""
    return next((name for text, name in _REASONS if text in message), "other")


@dataclass
class Tally:
    """What the visitors were told, shared by their threads (guarded by ``lock``)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    requests_told: int = 0  # visitor messages confirmed as sent (one per side)
    replies_told: int = 0  # replies confirmed as stored
    completed: int = 0
    failed: collections.Counter[str] = field(default_factory=collections.Counter)
    refusals: collections.Counter[str] = field(default_factory=collections.Counter)
    ttft_ms: list[float] = field(default_factory=list)
    votes: int = 0


def _visitor(ctx: Any, tally: Tally, stop_at: float) -> None:
    from db import actions as db_actions
    from webapp import context as run
    from webapp.flows import Refused, open_battle, send_turn
    from webapp.replies import DESK, ReplyJob, follow
    from webapp.views import model_history, turns_taken

    battle = None
    while time.monotonic() < stop_at:
        text = TURNS[0 if battle is None else turns_taken(battle) % len(TURNS)]
        problem = send_turn.send_problem(ctx, battle=battle, text=text, targets=BOTH, correction=False)
        if problem:
            with tally.lock:
                tally.refusals[reason_of(problem)] += 1
            if reason_of(problem) == "turn_limit" and battle is not None:
                _vote(ctx, battle, tally)
                battle = None
            time.sleep(1.0)  # a person reads the message before trying again
            continue
        if battle is None:
            picks = run.sample_pair(ctx, "calendar")
            opened = db_actions.open_battle(
                ctx.engine, mode="anonymous", scenario="calendar", contestant_a=picks[0],
                contestant_b=picks[1], visitor_id=ctx.visitor_id, first_request=text,
            )
            battle_id = opened.id
        else:
            battle_id = battle.id
            db_actions.append_turn(ctx.engine, battle_id=battle_id, sides=BOTH, kind="request", content=text)
        with tally.lock:
            tally.requests_told += 2
        battle = open_battle.load_battle(ctx, battle_id=battle_id)
        current = battle

        def on_result(job: ReplyJob, result: Any, current: Any = current,
                      ledger: dict[str, int] | None = None) -> None:
            side = job.side
            db_actions.finish_generations(ctx.engine, ids=[(ledger or {})[side]])
            raw_error = (result.error or "error").split(":")[0]
            result = send_turn.public_result(result, where=f"load bench battle {current.id} side {side}")
            unstored = send_turn.add_reply(ctx, battle=current, side=side, result=result, retry=False)
            with tally.lock:
                if unstored is None:
                    tally.replies_told += 1
                if result.finish_reason == "error":
                    tally.failed[raw_error] += 1
                else:
                    tally.completed += 1
                    if result.ttft_ms is not None:
                        tally.ttft_ms.append(float(result.ttft_ms))

        try:
            held = send_turn.start_ledger(ctx, battle_id=battle_id, sides=BOTH)
        except Refused as refused:
            with tally.lock:
                tally.refusals[reason_of(str(refused))] += 1
        else:  # as the page does: each side a reply job that stores its reply, followed to the end
            ledger = dict(zip(BOTH, held, strict=True))
            jobs = {
                side: DESK.start(battle_id=battle_id, side=side, model=run.model_for(ctx, view.contestant),
                                 messages=model_history(view), params=run.params_for(ctx, view.contestant),
                                 finish=functools.partial(on_result, ledger=ledger))
                for side, view in battle.sides.items()
            }
            follow(jobs, on_text=lambda side, text: None, on_done=lambda job: None)
        battle = open_battle.load_battle(ctx, battle_id=battle_id)


def _vote(ctx: Any, battle: Any, tally: Tally) -> None:
    from webapp.flows.vote import record_vote

    if record_vote(ctx, battle_id=battle.id, choice="tie") is None:
        with tally.lock:
            tally.votes += 1


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def run_visitors(
    *,
    visitors: int,
    seconds: float,
    catalogue: Path = TINY_CATALOGUE,
    addresses: int | None = None,
    data_dir: Path | None = None,
) -> dict[str, Any]:
    """Run ``visitors`` simulated visitors for ``seconds`` on a fresh SQLite file; the JSON report.

    Visitors share ``addresses`` network addresses (default: one per five visitors), so the per-address
    limits take part as they would behind a campus or office NAT. ``data_dir`` (default: a fresh
    folder) holds the model cache.
    """
    import os

    os.environ.setdefault("KERAS_BACKEND", "jax")
    from db import actions as db_actions
    from db import boards as db_boards
    from settings import Settings
    from webapp import context as run
    from webapp import resources

    workdir = Path(tempfile.mkdtemp(prefix="arena-load-"))
    url = f"sqlite:///{(workdir / 'arena.db').as_posix()}"
    os.environ.update(
        ARENA_DATABASE_URL=url, ARENA_CATALOGUE_PATH=str(catalogue), ARENA_DATA_DIR=str(data_dir or workdir),
        ARENA_ENVIRONMENT=os.environ.get("ARENA_ENVIRONMENT", "development"),
    )
    settings = Settings()
    engine = resources.engine(url)
    base = run.Context(settings=settings, engine=engine)
    run.ensure_contestants(base)
    pool = base.pool
    ready = pool.wait_ready(count=2, timeout=600)
    if len(ready) < 2:
        raise RuntimeError(f"fewer than two models became ready: {pool.status()}")
    groups = addresses or max(1, visitors // 5)
    salt = settings.hash_salt.get_secret_value()
    contexts = []
    for i in range(visitors):
        digest = db_actions.hash_address(f"198.51.100.{i % groups}", salt=salt)
        row = db_actions.get_or_create_visitor(engine, anon_id=f"load-{i:04d}", address_hash=digest)
        contexts.append(
            run.Context(settings=settings, engine=engine, visitor_id=row.id, anon_id=row.anon_id,
                            address_hash=digest)
        )
    tally = Tally()
    started = time.monotonic()
    stop_at = started + seconds
    threads = [threading.Thread(target=_visitor, args=(c, tally, stop_at), daemon=True) for c in contexts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=seconds + 600)
    wall = time.monotonic() - started
    stored = db_boards.message_counts(engine)
    stored_requests, stored_replies, duplicated = stored["requests"], stored["replies"], stored["duplicated"]
    lost = max(0, tally.requests_told - stored_requests) + max(0, tally.replies_told - stored_replies)
    unexpected = max(0, stored_requests - tally.requests_told) + max(0, stored_replies - tally.replies_told)
    return {
        "visitors": visitors,
        "addresses": groups,
        "seconds": seconds,
        "wall_s": round(wall, 1),
        "models": ready,
        "completed_replies": tally.completed,
        "failed_replies": dict(tally.failed),
        "refusals": dict(tally.refusals),
        "votes": tally.votes,
        "ttft_ms": {"p50": _percentile(tally.ttft_ms, 0.5), "p95": _percentile(tally.ttft_ms, 0.95)},
        "rows": {
            "requests_told": tally.requests_told,
            "requests_stored": stored_requests,
            "replies_told": tally.replies_told,
            "replies_stored": stored_replies,
            "lost": lost,
            "unexpected": unexpected,  # stored but never confirmed to a visitor
            "duplicated": duplicated,
        },
        "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
