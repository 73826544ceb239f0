"""The web layer's per-run context, its one door to the process-wide resources.

A page builds one ``Context`` per script run (``context()`` for a visitor's page, ``reader()`` for pages
that only read): the settings, the shared engine, this visitor and, on demand, the model pool. The flow
modules (``webapp/flows/``) take it as their first argument; the helpers below answer what a flow needs
of the pool and the catalogue (ready contestants, the next pair, sampling, lines). ``resources`` only
holds the process-wide factories keyed by plain values and never sees a ``Context``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import streamlit as st

from db import ContestantView
from db import actions as db_actions
from inference.catalogue import CatalogueEntry
from inference.pool import ModelStatus
from inference.protocol import ChatModel, GenerationParams
from ranking.sampler import draw_prior_pair
from settings import Settings
from webapp import breaker, resources
from webapp.visitor import current_address_key, current_visitor_id


@dataclass(frozen=True)
class Context:
    """Everything one script run needs: settings, the shared engine, this visitor, the pool on demand."""

    settings: Settings
    engine: Any
    visitor_id: int = 0
    anon_id: str = ""
    address_hash: str | None = None  # salted hash of the visitor's address (None when unknown)

    @property
    def pool(self) -> Any:
        """The shared model pool (created, and loading started, on first use in the process)."""
        s = self.settings
        return resources.pool(str(s.catalogue_path), s.memory_budget_mb, str(s.data_dir), s.mesh)


def reader() -> Context:
    """A context for pages that only read (leaderboard, dataset, admin): no visitor row is written."""
    settings = resources.settings()
    return Context(settings=settings, engine=resources.engine(settings.resolved_database_url))


def context() -> Context:
    """The context of a visitor's page: the visitor's row is created on their first action page view."""
    settings = resources.settings()
    engine = resources.engine(settings.resolved_database_url)
    anon = current_visitor_id(salt=settings.hash_salt.get_secret_value())
    digest = address_digest(settings)
    visitor = _visitor(engine, anon, digest)
    resources.stale_sweeper(settings.resolved_database_url, settings.stale_battle_minutes)
    return Context(settings=settings, engine=engine, visitor_id=visitor, anon_id=anon, address_hash=digest)


def address_digest(settings: Settings) -> str:
    """The salted hash of this request's address key (an IPv6 address's /64; where the address is not
    known, e.g. AppTest or a proxy missing from ``ARENA_TRUSTED_PROXIES``, the one key all such visitors
    share, so the per-address limits fail closed). Never None."""
    key = current_address_key(trusted_proxies=settings.trusted_proxies)
    return db_actions.hash_address(key, salt=settings.hash_salt.get_secret_value())


def _visitor(engine: Any, anon: str, digest: str | None) -> int:
    """The visitor's row id, written once per session (not on every rerun)."""
    cached = st.session_state.get("visitor_row")
    if cached and cached[0] == anon:
        return int(cached[1])
    view = db_actions.get_or_create_visitor(engine, anon_id=anon, address_hash=digest)
    st.session_state["visitor_row"] = (anon, view.id)
    return view.id


# --- pool and catalogue ---------------------------------------------------------------------------


def ensure_contestants(ctx: Context) -> None:
    resources.synced(ctx.settings.resolved_database_url, str(ctx.settings.catalogue_path))


def ready_contestants(ctx: Context) -> list[ContestantView]:
    """Enabled contestants (admin's choice, in the database) whose model is loaded and compiled and is
    not resting (its circuit breaker is open: ``webapp.breaker``)."""
    ensure_contestants(ctx)
    ready = set(ctx.pool.ready_slugs()) - breaker.resting(ctx.settings, ctx.engine)
    return [c for c in db_actions.list_contestants(ctx.engine, enabled_only=True) if c.slug in ready]


def anonymous_slugs(ctx: Context) -> frozenset[str]:
    """The catalogue entries the Arena may draw for anonymous battles (``anonymous``: base models are
    left out unless the catalogue says otherwise)."""
    return frozenset(e.slug for e in resources.catalogue(str(ctx.settings.catalogue_path)) if e.anonymous)


def sample_pair(ctx: Context, scenario: str) -> list[str]:
    """Two different ready contestants for an anonymous battle in ``scenario``, drawn by ``ranking``'s
    prior sampler (``webapp.pairing``): it favours pairs whose outcome is uncertain and that at least one
    side can play, and keeps every model in at least ``ranking.sampler.DEFAULT_MIN_SHARE`` of the battles.
    The order it returns is the A/B seating. Only entries whose ``anonymous`` flag is set take part;
    named modes offer the others."""
    eligible = anonymous_slugs(ctx)
    slugs = tuple(c.slug for c in ready_contestants(ctx) if c.slug in eligible)
    if len(slugs) < 2:
        raise NotEnoughModels("fewer than two models that take part in anonymous battles are ready")
    url = ctx.settings.resolved_database_url
    battles = resources.battle_counts(url, slugs)
    prior = resources.pairing_prior(url, scenario, slugs, ctx.settings.composite_automatic_weight)
    left, right = draw_prior_pair(battles, np.ones(len(slugs), dtype=bool), np.random.default_rng(),
                                  ratings=prior.ratings, sd=prior.sd, playable=prior.playable)
    return [slugs[left], slugs[right]]


class NotEnoughModels(RuntimeError):
    """Fewer ready models than the page needs."""


BASE_LABEL = "base (not instruction-tuned)"


@dataclass(frozen=True)
class ModelChoice:
    """One model a visitor can pick in Chat and Side by side."""

    slug: str
    name: str  # the contestant's display name (column titles, the reveal)
    base: bool  # a base model (not instruction-tuned)

    @property
    def label(self) -> str:
        """The picker's text: the name, and for a base model "base (not instruction-tuned)" (a name that
        already ends in "(base)" does not say it twice)."""
        if not self.base:
            return self.name
        return f"{self.name.removesuffix(' (base)')} · {BASE_LABEL}"


def model_choices(ctx: Context, scenario: str) -> list[ModelChoice]:
    """The ready contestants, best first for ``scenario``; the pickers preselect the first (two).

    Instruction-tuned models come before base models; within each, the Fixing board's order on this
    scenario (people's fix rate over published battles, best first; models with no judged correction
    after those with some), then the catalogue's order.
    """
    catalogue = resources.catalogue(str(ctx.settings.catalogue_path))
    position = {e.slug: i for i, e in enumerate(catalogue)}
    base = {e.slug for e in catalogue if e.base}
    fixes = fix_counts(ctx, scenario)

    def rank(slug: str) -> tuple[bool, bool, float, int, int]:
        fixed, judged = fixes.get(slug, (0, 0))
        rate = fixed / judged if judged else 0.0
        return slug in base, judged == 0, -rate, -judged, position.get(slug, len(position))

    ready = sorted(ready_contestants(ctx), key=lambda c: rank(c.slug))
    return [ModelChoice(slug=c.slug, name=c.display_name, base=c.slug in base) for c in ready]


def fix_counts(ctx: Context, scenario: str) -> dict[str, tuple[int, int]]:
    """People's (fixed, judged) corrections per model on ``scenario``, as the Fixing board counts them
    (every human mode, battles past the publication delay)."""
    from webapp.leaderboard_data import publication_cutoff

    cutoff = publication_cutoff(ctx.settings.public_export_delay_hours)
    return resources.fix_counts(ctx.settings.resolved_database_url, scenario, cutoff)


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


def params_for(ctx: Context, slug: str) -> GenerationParams:
    return entry_for(ctx, slug).sampling


def entry_for(ctx: Context, slug: str) -> CatalogueEntry:
    for entry in resources.catalogue(str(ctx.settings.catalogue_path)):
        if entry.slug == slug:
            return entry
    raise KeyError(f"model {slug!r} is not in the catalogue")


def line_lengths(ctx: Context) -> dict[str, int]:
    """Requests in each model's line now (generating or waiting), by slug."""
    return {slug: s.outstanding for slug, s in ctx.pool.status().items()}


def model_for(ctx: Context, slug: str) -> ChatModel:
    chat: ChatModel = ctx.pool.get(slug)
    return chat


_SETTLED = frozenset({"ready", "failed", "refused"})


@dataclass(frozen=True)
class ModelRow:
    """One model on the start-up screen: its state, the loading stage or the reason (``message``), and
    the seconds its load has taken so far, or took (``seconds``; None before it starts)."""

    name: str
    state: str
    message: str = ""
    seconds: float | None = None

    @property
    def converting(self) -> bool:
        """Its weights are being converted or assembled: a first start on this machine."""
        return self.state == "loading" and self.message.startswith(("convert", "assemble"))


def model_row(status: ModelStatus, now: float) -> ModelRow:
    seconds = status.load_seconds
    if seconds is None and status.loading_since is not None and status.state in ("loading", "compiling"):
        seconds = max(0.0, now - status.loading_since)
    return ModelRow(status.name, status.state, status.message, seconds)


@dataclass(frozen=True)
class PoolSnapshot:
    """One look at the pool for the start-up screen: every figure comes from the same ``status()`` read,
    so a model that finishes loading meanwhile cannot make the counts and the states disagree."""

    rows: tuple[ModelRow, ...]  # per model, in loading order
    usable: tuple[str, ...]  # enabled contestants (admin's choice) whose model is ready
    pairable: tuple[str, ...] = ()  # those of ``usable`` the Arena may draw (catalogue's ``anonymous``)

    @property
    def ready(self) -> int:
        return sum(1 for row in self.rows if row.state == "ready")

    @property
    def settled(self) -> bool:
        """Every model has stopped loading (ready, failed or refused): nothing more will become ready."""
        return all(row.state in _SETTLED for row in self.rows)


def pool_snapshot(ctx: Context) -> PoolSnapshot:
    ensure_contestants(ctx)
    status = ctx.pool.status()
    ready = {slug for slug, s in status.items() if s.state == "ready"}
    enabled = db_actions.list_contestants(ctx.engine, enabled_only=True)
    usable = tuple(c.slug for c in enabled if c.slug in ready)
    eligible = anonymous_slugs(ctx)
    return PoolSnapshot(
        rows=tuple(model_row(s, time.time()) for s in status.values()),
        usable=usable,
        pairable=tuple(slug for slug in usable if slug in eligible),
    )


def serving_devices() -> str:
    """Where the models are served (``ARENA_MESH``), in words."""
    return resources.serving_devices(resources.settings().mesh)
