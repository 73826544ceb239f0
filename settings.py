"""Fixit Arena settings: one object, read from ``ARENA_``-prefixed environment variables (and ``.env``).

This is a leaf module: it imports nothing of the project, so every layer (and Alembic) may read it.
Layers take plain values as arguments where they can; the CLI and the web app pass them from here.
"""

from __future__ import annotations

import contextvars
import functools
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent
DEFAULT_DATA_DIR = REPO_ROOT / "var"
DEFAULT_CATALOGUE = REPO_ROOT / "inference" / "catalogue.toml"

# Development defaults for secrets. Outside development they are refused (see ``_refuse_placeholders``).
DEV_ADMIN_PASSWORD = "changethis"
DEV_HASH_SALT = "changethis"
_PLACEHOLDERS = frozenset({DEV_ADMIN_PASSWORD, "", "changeme", "secret", "password", "admin", "salt"})
MIN_SECRET_CHARS = 16
# Modes in which weak secrets are tolerated, and then only while nothing but this machine can reach the
# app (the web app checks that it is bound to loopback; see webapp/admin_gate.py).
LOCAL_ENVIRONMENTS = frozenset({"development", "test"})


def _folded(secret: str) -> str:
    """A secret as compared with placeholders: no spaces, lower case ('Change This' is 'changethis')."""
    return "".join(secret.split()).lower()


def secret_problems(admin_password: str, hash_salt: str) -> list[str]:
    """Why these secrets are not fit for a public server (empty list: they are)."""
    problems = []
    for name, value in (("ARENA_ADMIN_PASSWORD", admin_password), ("ARENA_HASH_SALT", hash_salt)):
        if _folded(value) in _PLACEHOLDERS:
            problems.append(f"{name} is a placeholder")
        elif len(value) < MIN_SECRET_CHARS:
            problems.append(f"{name} is shorter than {MIN_SECRET_CHARS} characters")
    if _folded(admin_password) == _folded(hash_salt):
        problems.append("ARENA_ADMIN_PASSWORD equals ARENA_HASH_SALT")
    return problems


class Settings(BaseSettings):
    """Everything configurable. Environment variable = ``ARENA_`` + field name, upper case."""

    model_config = SettingsConfigDict(env_prefix="ARENA_", env_file=".env", extra="ignore")

    # Production unless told otherwise: a deployment that forgets the variable fails closed.
    environment: Literal["development", "production", "test"] = "production"
    data_dir: Path = DEFAULT_DATA_DIR
    database_url: str = ""  # empty: SQLite file ``<data_dir>/arena.db``
    catalogue_path: Path = DEFAULT_CATALOGUE

    admin_password: SecretStr = SecretStr(DEV_ADMIN_PASSWORD)
    hash_salt: SecretStr = SecretStr(DEV_HASH_SALT)

    max_message_chars: int = Field(default=12_000, ge=1)
    max_turns_per_battle: int = Field(default=20, ge=1)
    battles_per_visitor_per_hour: int = Field(default=30, ge=1)
    generations_per_minute: int = Field(default=20, ge=1)  # replies per visitor: each side, each retry
    address_limit_factor: int = Field(default=4, ge=1)  # one address may do this many visitors' worth
    # Votes one visitor may cast per UTC day (0: no cap); votes past it are refused before anything is
    # written (docs/DESIGN.md, "Daily vote caps").
    votes_per_visitor_per_day: int = Field(default=0, ge=0)
    # Peers whose X-Forwarded-For is believed (the reverse proxy's own addresses); see README.
    trusted_proxies: list[str] = Field(default_factory=list)
    show_grader_live: bool = False
    stale_battle_minutes: int = Field(default=60, ge=1)  # open battles idle this long are abandoned
    public_export_delay_hours: float = Field(default=24.0, ge=0)  # Dataset page: battles closed before

    model_queue_limit: int = Field(default=16, ge=1)  # requests in one model's line (generating or waiting)
    model_queue_deadline_s: float = Field(default=60.0, gt=0)  # a request still waiting then is answered
    memory_budget_mb: int = Field(default=16_000, ge=1)  # the four bundled models on a 24 GB machine
    # Where local models are served: auto (all devices on the model axis when there are several), off,
    # or a shape BxM (inference.sharding.mesh_from_setting).
    mesh: str = "auto"
    remote_api_keys: dict[str, SecretStr] = Field(default_factory=dict)  # contestant slug -> key (JSON)
    compilation_cache: bool = True

    @model_validator(mode="after")
    def _refuse_placeholders(self) -> Settings:
        if _CHECK_SECRETS.get() and self.environment not in LOCAL_ENVIRONMENTS:
            problems = self.secret_problems()
            if problems:
                raise ValueError(
                    "; ".join(problems) + " (set real secrets, or ARENA_ENVIRONMENT=development on loopback)"
                )
        return self

    def secret_problems(self) -> list[str]:
        return secret_problems(self.admin_password.get_secret_value(), self.hash_salt.get_secret_value())

    @property
    def resolved_database_url(self) -> str:
        """The SQLAlchemy URL: the configured one, or a SQLite file in the data directory."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'arena.db').as_posix()}"


# False while settings are read for a command that uses no secret (see ``get_settings``).
_CHECK_SECRETS: contextvars.ContextVar[bool] = contextvars.ContextVar("check_secrets", default=True)


@functools.lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (cached; tests build ``Settings(...)`` directly instead). Refuses
    placeholder secrets outside development: the web app and anything that uses a secret read these."""
    return Settings()


def get_settings_without_secrets() -> Settings:
    """Settings for a command that uses neither the admin password nor the salt (``inference``,
    ``scenarios``, ``ranking``, ``db upgrade``, migrations): secrets are not checked, so an operator's
    tools work before the public app's secrets are set. Whatever serves visitors or exports visitor ids
    uses :func:`get_settings`, which fails closed."""
    token = _CHECK_SECRETS.set(False)
    try:
        return Settings()
    finally:
        _CHECK_SECRETS.reset(token)
