"""Process-wide resources, created once per process by ``st.cache_resource`` and shared by all visitors.

Factories are keyed by plain values (database URL, catalogue path), so tests that point the app at a
fresh database or catalogue get fresh resources instead of another test's. The engine factory upgrades
the schema to head and registers the catalogue's contestants, so a fresh ``make run`` just works.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import streamlit as st

from db import HUMAN_MODES
from db import actions as db_actions
from db import boards as db_boards
from inference.catalogue import CatalogueEntry, load_catalogue, play_order
from settings import Settings
from wiring import configure_logging, database, model_pool, start_metrics_server

_LOG = logging.getLogger(__name__)


def settings() -> Settings:
    """Fresh settings each run (cheap): the environment is the source of truth."""
    return Settings()


@st.cache_resource(show_spinner="Opening the database…")
def engine(url: str) -> Any:
    return database(url)


@st.cache_resource(show_spinner=False)
def catalogue(path: str) -> list[CatalogueEntry]:
    return load_catalogue(Path(path))


def sync_contestants(db_engine: Any, entries: list[CatalogueEntry]) -> None:
    """Register catalogue entries as contestants; the admin's enable/disable choices are kept."""
    for entry in entries:
        db_actions.upsert_contestant(
            db_engine,
            slug=entry.slug,
            display_name=entry.name,
            family=entry.family,
            source=entry.source,
            params={
                "max_new_tokens": entry.sampling.max_new_tokens,
                "temperature": entry.sampling.temperature,
                "top_p": entry.sampling.top_p,
                "top_k": entry.sampling.top_k,
            },
            enabled=None if entry.enabled else False,
        )


@st.cache_resource(show_spinner=False)
def synced(url: str, path: str) -> bool:
    """The catalogue's contestants registered in this database (once per process)."""
    sync_contestants(engine(url), catalogue(path))
    return True


@st.cache_resource(show_spinner=False)
def pool(catalogue_path: str, memory_budget_mb: int, data_dir: str, mesh: str = "auto") -> Any:
    """The model pool; it starts loading every enabled catalogue model in the background, each sharded
    on the ``mesh`` setting's device mesh (``ARENA_MESH``), each model's waiting line bounded. They load
    in :func:`~inference.catalogue.play_order`: the instruction-tuned models the Arena pairs first, base
    models last, so the Arena opens with a pair worth voting on."""
    return model_pool(settings(), play_order(catalogue(catalogue_path)), memory_budget_mb=memory_budget_mb,
                      data_dir=data_dir, mesh=mesh, visitor_queue=True)


@st.cache_resource(show_spinner=False)
def observability(log_format: str, metrics_host: str, metrics_port: int, url: str, catalogue_path: str,
                  memory_budget_mb: int, data_dir: str, mesh: str) -> bool:
    """Once per process (and per settings that matter): ``ARENA_LOG_FORMAT``'s logging, and with
    ``ARENA_METRICS_PORT`` the metrics server, whose ``/ready`` asks this database and this pool (created
    now, so its models start loading with the first script run)."""
    current = settings()
    configure_logging(current)
    if metrics_port:
        from webapp.metrics import readiness

        models = pool(catalogue_path, memory_budget_mb, data_dir, mesh)
        start_metrics_server(current, functools.partial(readiness, current, engine(url), models))
    return True


def start_observability(s: Settings) -> None:
    """:func:`observability` for these settings (cheap on every run after the first)."""
    observability(s.log_format, s.metrics_host, s.metrics_port, s.resolved_database_url,
                  str(s.catalogue_path), s.memory_budget_mb, str(s.data_dir), s.mesh)


def serving_devices(mesh: str) -> str:
    """Where models are served, in words (start-up screen, About page)."""
    from inference.sharding import ShardingError, describe_mesh, mesh_from_setting

    try:
        return describe_mesh(mesh_from_setting(mesh))
    except ShardingError as exc:
        return f"ARENA_MESH is wrong: {exc}"


@st.cache_data(ttl=60, show_spinner=False)
def battle_counts(url: str, slugs: tuple[str, ...]) -> np.ndarray:
    """Symmetric battles-so-far between ``slugs`` (cached for a minute: the sampler needs no more)."""
    counts = db_boards.pairwise_counts(engine(url), models=list(slugs), modes=None)
    return counts.wins + counts.wins.T + counts.ties + counts.both_bad


@st.cache_data(ttl=60, show_spinner=False)
def pairing_prior(url: str, scenario: str, slugs: tuple[str, ...], weight: float) -> Any:
    """The pair sampler's prior (``webapp.pairing``), cached for a minute like the battle counts."""
    from webapp.pairing import pairing_prior as compute

    return compute(engine(url), scenario=scenario, slugs=slugs, weight=weight)


@st.cache_data(ttl=60, show_spinner=False)
def fix_counts(url: str, scenario: str, closed_before: dt.datetime | None) -> dict[str, tuple[int, int]]:
    """People's (fixed, judged) corrections per model on ``scenario`` in battles closed before
    ``closed_before``: the Fixing board's figures, in one scan of its roll-up (cached for a minute)."""
    totals = db_boards.fixing_totals(engine(url), scenario=scenario, modes=HUMAN_MODES,
                                     closed_before=closed_before)
    fixed, judged = totals.column("person_fixed"), totals.column("person_judged")
    return {model: (f, j) for model, f, j in zip(totals.models, fixed, judged, strict=True)}


SWEEP_INTERVAL_S = 60.0


@st.cache_resource(show_spinner=False)
def stale_sweeper(url: str, stale_minutes: int) -> threading.Thread:
    """A daemon thread that abandons open battles idle for ``stale_minutes``: at once, then every minute.

    One per process and database (started by the first visitor page). Several replicas each sweep; the
    update is idempotent, so that only costs a few cheap queries.
    """

    def sweep_forever() -> None:
        while True:
            older_than = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=stale_minutes)
            try:
                closed = db_actions.abandon_stale_battles(engine(url), older_than=older_than)
                if closed:
                    _LOG.info("expired %d battles idle for %d minutes", closed, stale_minutes)
            except Exception:  # a database hiccup must not end the timer
                _LOG.exception("expiring stale battles failed")
            time.sleep(SWEEP_INTERVAL_S)

    thread = threading.Thread(target=sweep_forever, name="stale-battles", daemon=True)
    thread.start()
    return thread
