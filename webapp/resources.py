"""Process-wide resources, created once per process by ``st.cache_resource`` and shared by all visitors.

Factories are keyed by plain values (database URL, catalogue path), so tests that point the app at a
fresh database or catalogue get fresh resources instead of another test's. The engine factory upgrades
the schema to head and registers the catalogue's contestants, so a fresh ``make run`` just works.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import streamlit as st

from db import repository as db_repo
from db.engine import make_engine
from db.migrate import upgrade_to_head
from db.views import ContestantView
from inference.catalogue import CatalogueEntry, load_catalogue
from inference.protocol import ChatModel
from ranking import sample_pair as ranked_pair
from settings import Settings
from webapp.inflight import InFlight

if TYPE_CHECKING:
    from webapp.gateway import Context

_LOG = logging.getLogger(__name__)


def settings() -> Settings:
    """Fresh settings each run (cheap): the environment is the source of truth."""
    return Settings()


@st.cache_resource(show_spinner="Opening the database…")
def engine(url: str) -> Any:
    upgrade_to_head(url)
    return make_engine(url)


@st.cache_resource(show_spinner=False)
def catalogue(path: str) -> list[CatalogueEntry]:
    return load_catalogue(Path(path))


def sync_contestants(db_engine: Any, entries: list[CatalogueEntry]) -> None:
    """Register catalogue entries as contestants; the admin's enable/disable choices are kept."""
    for entry in entries:
        db_repo.upsert_contestant(
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
def _synced(url: str, path: str) -> bool:
    sync_contestants(engine(url), catalogue(path))
    return True


@st.cache_resource(show_spinner=False)
def pool(catalogue_path: str, memory_budget_mb: int, data_dir: str, mesh: str = "auto") -> Any:
    """The model pool; it starts loading every enabled catalogue model in the background at once, each
    sharded on the ``mesh`` setting's device mesh (``ARENA_MESH``)."""
    from inference.pool import ModelPool
    from inference.sharding import mesh_from_setting

    current = settings()
    return ModelPool(
        catalogue(catalogue_path),
        memory_budget_mb=memory_budget_mb,
        cache_dir=Path(data_dir) / "models",
        api_keys={k: v.get_secret_value() for k, v in current.remote_api_keys.items()},
        max_outstanding=current.model_queue_limit,  # the hard bound; pages refuse earlier, in words
        queue_deadline_s=current.model_queue_deadline_s,
        mesh=mesh_from_setting(mesh),
    )


def serving_devices(mesh: str) -> str:
    """Where models are served, in words (start-up screen, About page)."""
    from inference.sharding import ShardingError, describe_mesh, mesh_from_setting

    try:
        return describe_mesh(mesh_from_setting(mesh))
    except ShardingError as exc:
        return f"ARENA_MESH is wrong: {exc}"


def ensure_contestants(ctx: Context) -> None:
    _synced(ctx.settings.resolved_database_url, str(ctx.settings.catalogue_path))


def ready_contestants(ctx: Context) -> list[ContestantView]:
    """Enabled contestants (admin's choice, in the database) whose model is loaded and compiled."""
    ensure_contestants(ctx)
    ready = set(ctx.pool.ready_slugs())
    return [c for c in db_repo.list_contestants(ctx.engine, enabled_only=True) if c.slug in ready]


def sample_pair(ctx: Context) -> list[str]:
    """Two different ready contestants for an anonymous battle, drawn by ``ranking``'s sampler (it
    favours pairs with few battles so far); the order it returns is the A/B seating."""
    slugs = [c.slug for c in ready_contestants(ctx)]
    if len(slugs) < 2:
        raise NotEnoughModels("fewer than two models are ready")
    battles = _battle_counts(ctx.settings.resolved_database_url, tuple(slugs))
    left, right = ranked_pair(battles, np.ones(len(slugs), dtype=bool), np.random.default_rng())
    return [slugs[left], slugs[right]]


@st.cache_data(ttl=60, show_spinner=False)
def _battle_counts(url: str, slugs: tuple[str, ...]) -> np.ndarray:
    """Symmetric battles-so-far between ``slugs`` (cached for a minute: the sampler needs no more)."""
    counts = db_repo.pairwise_counts(engine(url), models=list(slugs), modes=None)
    return counts.wins + counts.wins.T + counts.ties + counts.both_bad


@st.cache_resource(show_spinner=False)
def in_flight() -> InFlight:
    """Which visitors have a generation running in this process (one at a time each)."""
    return InFlight()


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
                closed = db_repo.abandon_stale_battles(engine(url), older_than=older_than)
                if closed:
                    _LOG.info("expired %d battles idle for %d minutes", closed, stale_minutes)
            except Exception:  # a database hiccup must not end the timer
                _LOG.exception("expiring stale battles failed")
            time.sleep(SWEEP_INTERVAL_S)

    thread = threading.Thread(target=sweep_forever, name="stale-battles", daemon=True)
    thread.start()
    return thread


class NotEnoughModels(RuntimeError):
    """Fewer ready models than the page needs."""


def sampling(ctx: Context, slug: str) -> dict[str, Any]:
    """The catalogue's sampling settings of ``slug``, as stored with the conversation."""
    params = entry_for(ctx, slug).sampling
    return {
        "max_new_tokens": params.max_new_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k,
        "seed": params.seed,
    }


def entry_for(ctx: Context, slug: str) -> CatalogueEntry:
    for entry in catalogue(str(ctx.settings.catalogue_path)):
        if entry.slug == slug:
            return entry
    raise KeyError(f"model {slug!r} is not in the catalogue")


def line_lengths(ctx: Context) -> dict[str, int]:
    """Requests in each model's line now (generating or waiting), by slug."""
    return {slug: s.outstanding for slug, s in ctx.pool.status().items()}


def model(ctx: Context, slug: str) -> ChatModel:
    chat: ChatModel = ctx.pool.get(slug)
    return chat


_SETTLED = frozenset({"ready", "failed", "refused"})


@dataclass(frozen=True)
class PoolSnapshot:
    """One look at the pool for the start-up screen: every figure comes from the same ``status()`` read,
    so a model that finishes loading meanwhile cannot make the counts and the states disagree."""

    rows: tuple[tuple[str, str, str], ...]  # (name, state, message) per model, catalogue order
    usable: tuple[str, ...]  # enabled contestants (admin's choice) whose model is ready

    @property
    def ready(self) -> int:
        return sum(1 for _, state, _ in self.rows if state == "ready")

    @property
    def settled(self) -> bool:
        """Every model has stopped loading (ready, failed or refused): nothing more will become ready."""
        return all(state in _SETTLED for _, state, _ in self.rows)


def pool_snapshot(ctx: Context) -> PoolSnapshot:
    ensure_contestants(ctx)
    status = ctx.pool.status()
    ready = {slug for slug, s in status.items() if s.state == "ready"}
    enabled = db_repo.list_contestants(ctx.engine, enabled_only=True)
    return PoolSnapshot(
        rows=tuple((s.name, s.state, s.message) for s in status.values()),
        usable=tuple(c.slug for c in enabled if c.slug in ready),
    )
