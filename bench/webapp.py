"""``python -m webapp bench``: how fast the leaderboard page renders, and whether both sides really stream
at the same time.

1. Leaderboard: a SQLite file seeded with ``votes`` votes over ``models`` contestants (db's bulk seeder),
   then the Leaderboard page rendered by Streamlit's AppTest (the real page script: SQL counts,
   Bradley-Terry fit, table, three Altair charts) with the data cache cleared (cold) and warm.
   Target: cold render <= 1.5 s at 1M votes over 100 contestants. The same page showing the Fixing board
   (people, then grader; each with its per-kind table), and that board's queries one by one, then the
   Automatic arena board; the publication delay is 0 here (the seeded battles closed just now); ``replies``
   graded replies (db.seed) are seeded with the votes (target: <= 1.5 s at 1M votes and 1M replies).
   ``replay`` replay answers (four models per correction) are seeded to the corrections, and the Fixing
   board's *Replay* and *Ratings* sources are rendered cold too (target: <= 1.5 s with 200k replay answers,
   issue 44).
2. Streaming: two tiny random keras models from the real pool answer the same prompt, first one after
   the other, then as the page runs them (:mod:`webapp.replies`, a job per side); overlap and the
   wall-time ratio show that the two sides generate concurrently.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RENDER_TARGET_S = 1.5
TINY_CATALOGUE = REPO / "tests" / "data" / "tiny_catalogue.toml"


def progress(line: str) -> None:
    """One line of progress on stderr (stdout carries only the JSON report)."""
    print(f"[webapp bench] {line}", file=sys.stderr, flush=True)


def seed(url: str, *, votes: int, models: int) -> float:
    """Create the schema and bulk-load ``votes`` voted battles; returns seconds taken."""
    from db import make_engine, upgrade_to_head
    from db.seed import bulk_votes, seed_contestants

    upgrade_to_head(url)
    engine = make_engine(url, durability="none")
    started = time.perf_counter()

    def loaded(done: int) -> None:
        elapsed = time.perf_counter() - started
        progress(f"votes: {done:,} of {votes:,} loaded ({elapsed:.0f} s, {done / elapsed:,.0f}/s)")

    bulk_votes(engine, seed_contestants(engine, models), votes, progress=loaded)
    engine.dispose()
    return time.perf_counter() - started


def render_leaderboard(url: str, *, rounds: int, board: str = "votes", source: str | None = None
                       ) -> dict[str, Any]:
    """Render the Leaderboard page ``rounds`` times cold (cache cleared) and once warm, showing ``board``
    (``votes``, the page's default, ``fixing`` or ``auto``) and, on the Fixing board, ``source``."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    os.environ["ARENA_DATABASE_URL"] = url
    os.environ.setdefault("ARENA_ENVIRONMENT", "development")  # placeholder secrets are fine for a bench
    # The seeded battles closed moments ago: with the publication delay they would all be hidden, and the
    # boards would time their empty notes.
    os.environ["ARENA_PUBLIC_EXPORT_DELAY_HOURS"] = "0"
    script = str(REPO / "webapp" / "pages" / "leaderboard.py")
    cold: list[float] = []
    votes_caption = ""
    for _ in range(rounds):
        st.cache_data.clear()
        app = AppTest.from_file(script, default_timeout=600)
        app.session_state["lb_board"] = board
        if source is not None:
            app.session_state["lb_fix_source"] = source
        started = time.perf_counter()
        app.run()
        cold.append(time.perf_counter() - started)
        if app.exception:
            raise RuntimeError(app.exception[0].value)
        votes_caption = next((c.value for c in app.caption if "Computed over" in c.value), "")
        if board != "auto" and (not votes_caption or "Computed over 0 " in votes_caption):
            # the board must show figures, not its empty note
            raise RuntimeError(f"the {board} board ({source or 'default'}) showed no figures")
    started = time.perf_counter()
    app.run()
    warm = time.perf_counter() - started
    best = min(cold)
    return {
        "caption": votes_caption,
        "cold_best_s": round(best, 3),
        "cold_median_s": round(statistics.median(cold), 3),
        "warm_s": round(warm, 3),
        "target_s": RENDER_TARGET_S,
        "target_over_cold_best": round(RENDER_TARGET_S / best, 2),
    }


def board_breakdown(url: str) -> dict[str, float]:
    """Where the cold render's time goes, without Streamlit: SQL counts, the fit, the whole board."""
    from db import VoteFilters, make_engine
    from db import boards as db_boards
    from ranking.leaderboard import leaderboard
    from webapp.leaderboard_data import build_board

    engine = make_engine(url)
    started = time.perf_counter()
    pairs = db_boards.pairwise_counts(engine)
    counted = time.perf_counter()
    leaderboard(pairs.models, pairs.wins, pairs.ties, pairs.both_bad, interval="sandwich", bootstrap=0)
    fitted = time.perf_counter()
    board = build_board(engine, VoteFilters())
    done = time.perf_counter()
    engine.dispose()
    return {
        "pairwise_counts_s": round(counted - started, 3),
        "fit_s": round(fitted - counted, 3),
        "build_board_s": round(done - fitted, 3),
        "rated_models": float(len(board.table)),
    }


def fixing_breakdown(url: str) -> dict[str, float]:
    """The Fixing board's two queries, then the whole board per judge, then the per-kind and replay-pair
    reads of the roll-ups kept on write (``side_kinds``, ``replay_tallies``, ``replay_pair_tallies``)."""
    from db import HUMAN_MODES, VoteFilters, make_engine
    from db import boards as db_boards
    from webapp.leaderboard_data import build_fixing_board

    engine = make_engine(url)
    steps: dict[str, Any] = {
        "fixing_totals_s": lambda: db_boards.fixing_totals(engine),
        "first_try_counts_s": lambda: db_boards.first_try_counts(engine, modes=HUMAN_MODES),
        "board_people_s": lambda: build_fixing_board(engine, VoteFilters(), "people"),
        "board_grader_s": lambda: build_fixing_board(engine, VoteFilters(), "grader"),
        **{f"kinds_{source}_s": (lambda source=source: db_boards.fix_counts_by_kind(engine, source=source))
           for source in db_boards.KIND_SOURCES},
        "replay_pair_counts_s": lambda: db_boards.replay_pair_counts(engine),
    }
    report: dict[str, float] = {}
    for name, step in steps.items():
        started = time.perf_counter()
        step()
        report[name] = round(time.perf_counter() - started, 3)
    engine.dispose()
    return report


def streaming_overlap(
    *, data_dir: Path, catalogue: Path = TINY_CATALOGUE, max_new_tokens: int = 64, budget_mb: int = 8000
) -> dict[str, Any]:
    """Sequential vs concurrent generation of the catalogue's first two models through the real pool."""
    from inference.catalogue import load_catalogue
    from inference.pool import ModelPool
    from inference.protocol import ChatMessage, GenerationParams, TextDelta, complete
    from webapp.replies import ReplyDesk, follow

    entries = load_catalogue(catalogue)
    with ModelPool(entries, memory_budget_mb=budget_mb, cache_dir=data_dir / "models") as pool:
        slugs = pool.wait_ready(count=2, timeout=600)[:2]
        models = [pool.get(s) for s in slugs]
        messages = [ChatMessage("user", "Add a meeting with Fred on Nov 11 at 5PM")]
        params = GenerationParams(max_new_tokens=max_new_tokens)
        for model in models:  # warm both (compile the prompt bucket) before timing
            complete(model, messages, params)
        started = time.perf_counter()
        sequential_first: dict[str, float] = {}
        for side, model in zip("ab", models, strict=True):  # one after the other
            for event in model.stream(messages, params):
                if isinstance(event, TextDelta) and side not in sequential_first:
                    sequential_first[side] = time.perf_counter() - started
        sequential = time.perf_counter() - started
        results: dict[str, Any] = {}
        first: dict[str, float] = {}
        ended: dict[str, float] = {}
        desk = ReplyDesk()  # as the page does: a reply job per side, followed
        started = time.perf_counter()
        jobs = {side: desk.start(battle_id="bench", side=side, model=m, messages=messages, params=params,
                                 finish=lambda job, result: results.__setitem__(job.side, result))
                for side, m in zip("ab", models, strict=True)}

        def on_text(side: str, text: str) -> None:
            first.setdefault(side, time.perf_counter() - started)

        def on_done(job: Any) -> None:
            ended[job.side] = time.perf_counter() - started

        follow(jobs, on_text=on_text, on_done=on_done)
        concurrent = time.perf_counter() - started
        concurrent_first = dict(first)
        overlap = min(ended.values()) if len(ended) == 2 else 0.0  # both started at 0: until the first ended
    return {
        "models": slugs,
        "new_tokens": {s: r.new_tokens for s, r in results.items()},
        "sequential_s": round(sequential, 3),
        "concurrent_s": round(concurrent, 3),
        "sequential_over_concurrent": round(sequential / concurrent, 2),
        "overlap_s": round(overlap, 3),
        "overlap_share_of_concurrent": round(overlap / concurrent, 2),
        "first_token_b_sequential_s": round(sequential_first.get("b", float("nan")), 3),
        "first_token_b_concurrent_s": round(concurrent_first.get("b") or float("nan"), 3),
    }


def seed_replies(url: str, *, replies: int) -> float:
    """Add ``replies`` graded replies (five per side, two corrections each) to the voted battles."""
    from db import make_engine
    from db.seed import seed_graded_replies

    engine = make_engine(url, durability="none")
    started = time.perf_counter()

    def told(line: str) -> None:
        progress(f"{line} ({time.perf_counter() - started:.0f} s)")

    seed_graded_replies(engine, replies=replies, progress=told)
    engine.dispose()
    return time.perf_counter() - started


def seed_replay(url: str, *, results: int) -> float:
    """Add ``results`` replay answers to the stored corrections (``db.seed.seed_replay_results``)."""
    from db import make_engine
    from db.seed import seed_replay_results

    started = time.perf_counter()
    engine = make_engine(url)
    seed_replay_results(engine, results=results, progress=progress)
    engine.dispose()
    return time.perf_counter() - started


def run(
    *,
    votes: int,
    models: int,
    rounds: int,
    database: Path | None,
    skip_streaming: bool,
    skip_leaderboard: bool = False,
    catalogue: Path = TINY_CATALOGUE,
    new_tokens: int = 64,
    replies: int = 0,
    replay: int = 0,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="webapp-bench-") as tmp:
        path = database or Path(tmp) / "bench.db"
        url = f"sqlite:///{path.as_posix()}"
        report: dict[str, Any] = {}
        if not skip_leaderboard:
            report.update(votes=votes, models=models, replies=replies, replay=replay, database="sqlite")
            if database is None or not path.exists():
                report["seed_s"] = round(seed(url, votes=votes, models=models), 1)
                if replies:
                    report["seed_replies_s"] = round(seed_replies(url, replies=replies), 1)
                if replay:
                    report["seed_replay_s"] = round(seed_replay(url, results=replay), 1)
            progress("rendering the Leaderboard page (Votes, Fixing, then Automatic arena board)")
            report["leaderboard"] = render_leaderboard(url, rounds=rounds)
            report["breakdown"] = board_breakdown(url)
            report["leaderboard_fixing"] = render_leaderboard(url, rounds=rounds, board="fixing")
            report["leaderboard_fixing_grader"] = render_leaderboard(url, rounds=rounds, board="fixing",
                                                                     source="grader")
            report["fixing_breakdown"] = fixing_breakdown(url)
            report["leaderboard_auto"] = render_leaderboard(url, rounds=rounds, board="auto")
            if replay:
                for source in ("replay", "ratings"):
                    report[f"leaderboard_{source}"] = render_leaderboard(url, rounds=rounds, board="fixing",
                                                                         source=source)
        if not skip_streaming:
            data_dir = Path(os.environ.get("ARENA_DATA_DIR", tmp))
            budget = int(os.environ.get("ARENA_MEMORY_BUDGET_MB", "8000"))
            report["streaming"] = streaming_overlap(
                data_dir=data_dir, catalogue=catalogue, max_new_tokens=new_tokens, budget_mb=budget
            )
        return report
