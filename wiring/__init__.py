"""The composition root: settings in, the layers' objects out.

The layers (``db``, ``ranking``, ``inference``, ``scenarios``) read no settings; the web app
(``webapp/resources.py``) and the command lines (``commands/``) ask this package for what they need:
a database engine at the schema's head, a model pool, the scenario registry, and the few values built
from settings that go with them (the models folder, the remote engines' keys, the compilation cache).
Imports of the heavy layers happen inside the functions, so ``import wiring`` stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from settings import Settings
from wiring import observability  # small (prometheus_client and the standard library)
from wiring.observability import MetricsServer, Readiness

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from inference.catalogue import CatalogueEntry
    from inference.pool import ModelPool, ModelStatus
    from scenarios import Scenario

__all__ = [
    "MetricsServer",
    "Readiness",
    "ScenarioRegistry",
    "api_keys",
    "configure_logging",
    "database",
    "database_url",
    "enable_compilation_cache",
    "model_pool",
    "models_dir",
    "scenario_registry",
    "start_metrics_server",
]


def database_url(settings: Settings) -> str:
    """The SQLAlchemy URL the settings name (``ARENA_DATABASE_URL``, else the SQLite file under ``./var``)."""
    return settings.resolved_database_url


def database(url: str) -> Engine:
    """An engine on ``url``, its schema upgraded to head first (a fresh database just works)."""
    from db import make_engine, upgrade_to_head

    upgrade_to_head(url)
    return make_engine(url)


def models_dir(settings: Settings, data_dir: str | Path | None = None) -> Path:
    """Where downloaded and converted weights live: ``<data_dir>/models``."""
    return Path(settings.data_dir if data_dir is None else data_dir) / "models"


def api_keys(settings: Settings) -> dict[str, str]:
    """Remote engines' API keys by catalogue slug, in plain text for the clients that send them."""
    return {slug: key.get_secret_value() for slug, key in settings.remote_api_keys.items()}


def enable_compilation_cache(settings: Settings) -> None:
    """JAX's persistent compilation cache under ``<data_dir>/jax-cache``, when the settings ask for it."""
    if settings.compilation_cache:
        from inference.pool import enable_compilation_cache as enable

        enable(Path(settings.data_dir) / "jax-cache")


def model_pool(
    settings: Settings,
    entries: Sequence[CatalogueEntry],
    *,
    memory_budget_mb: int | None = None,
    data_dir: str | Path | None = None,
    mesh: str | None = None,
    visitor_queue: bool = False,
    on_progress: Callable[[ModelStatus], None] | None = None,
) -> ModelPool:
    """The model pool over ``entries``: it starts loading every enabled one in the background at once,
    each sharded on the ``mesh`` setting's device mesh (``ARENA_MESH``).

    ``memory_budget_mb``, ``data_dir`` and ``mesh`` default to the settings' values (the web app passes
    its cache keys). ``visitor_queue``: bound each model's waiting line as the web app does
    (``ARENA_MODEL_QUEUE_LIMIT``, ``ARENA_MODEL_QUEUE_DEADLINE_S``); a command line leaves it unbounded.
    """
    from db.export import error_category
    from inference.pool import ModelPool
    from inference.sharding import mesh_from_setting

    return ModelPool(
        entries,
        memory_budget_mb=settings.memory_budget_mb if memory_budget_mb is None else memory_budget_mb,
        cache_dir=models_dir(settings, data_dir),
        api_keys=api_keys(settings),
        remote_timeouts=(settings.remote_reply_deadline_s, settings.remote_idle_timeout_s),
        mesh=mesh_from_setting(settings.mesh if mesh is None else mesh),
        on_progress=on_progress,
        # the hard bound; pages refuse earlier, in words
        max_outstanding=settings.model_queue_limit if visitor_queue else None,
        queue_deadline_s=settings.model_queue_deadline_s if visitor_queue else None,
        error_kind=error_category,  # the metrics' error kinds: the closed set a visitor and the export see
    )


def configure_logging(settings: Settings) -> None:
    """``ARENA_LOG_FORMAT``: JSON lines with the settings' secrets redacted, or logging left as it is."""
    secrets = [settings.admin_password.get_secret_value(), settings.hash_salt.get_secret_value(),
               *api_keys(settings).values()]
    if settings.serve_token is not None:
        secrets.append(settings.serve_token.get_secret_value())
    observability.configure_logging(log_format=settings.log_format, secrets=secrets)


def start_metrics_server(settings: Settings, ready: Callable[[], Readiness]) -> MetricsServer | None:
    """The process's ``/metrics`` and ``/ready`` on ``ARENA_METRICS_HOST:ARENA_METRICS_PORT`` (None when
    the port is 0, off, or cannot be bound); see :mod:`wiring.observability`."""
    if not settings.metrics_port:
        return None
    return observability.start_metrics_server(host=settings.metrics_host, port=settings.metrics_port,
                                              ready=ready)


@dataclass(frozen=True)
class ScenarioRegistry:
    """The scenarios the arena serves: ``list()`` all of them, ``get(slug)`` one (``ScenarioError`` when
    unknown)."""

    list: Callable[[], list[Scenario]]
    get: Callable[[str], Scenario]


def scenario_registry() -> ScenarioRegistry:
    """The scenario registry, as ``scenarios`` declares it."""
    from scenarios import get_scenario, list_scenarios

    return ScenarioRegistry(list=list_scenarios, get=get_scenario)
