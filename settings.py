"""Fixit Arena settings: one object, read from ``ARENA_``-prefixed environment variables (and ``.env``).

This is a leaf module: it imports nothing of the project, so every layer (and Alembic) may read it.
Layers take plain values as arguments where they can; the CLI and the web app pass them from here.
"""

from __future__ import annotations

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
_PLACEHOLDERS = frozenset({DEV_ADMIN_PASSWORD, "", "changeme", "secret", "password"})


class Settings(BaseSettings):
    """Everything configurable. Environment variable = ``ARENA_`` + field name, upper case."""

    model_config = SettingsConfigDict(env_prefix="ARENA_", env_file=".env", extra="ignore")

    environment: Literal["development", "production", "test"] = "development"
    data_dir: Path = DEFAULT_DATA_DIR
    database_url: str = ""  # empty: SQLite file ``<data_dir>/arena.db``
    catalogue_path: Path = DEFAULT_CATALOGUE

    admin_password: SecretStr = SecretStr(DEV_ADMIN_PASSWORD)
    hash_salt: SecretStr = SecretStr(DEV_HASH_SALT)

    max_message_chars: int = Field(default=12_000, ge=1)
    max_turns_per_battle: int = Field(default=20, ge=1)
    battles_per_visitor_per_hour: int = Field(default=30, ge=1)
    messages_per_minute: int = Field(default=20, ge=1)
    show_grader_live: bool = False

    memory_budget_mb: int = Field(default=16_000, ge=1)  # the four bundled models on a 24 GB machine
    remote_api_keys: dict[str, SecretStr] = Field(default_factory=dict)  # contestant slug -> key (JSON)
    compilation_cache: bool = True

    @model_validator(mode="after")
    def _refuse_placeholders(self) -> Settings:
        if self.environment == "production":
            for name in ("admin_password", "hash_salt"):
                value: SecretStr = getattr(self, name)
                if value.get_secret_value() in _PLACEHOLDERS:
                    raise ValueError(
                        f"ARENA_{name.upper()} is a placeholder; set a real secret outside development"
                    )
        return self

    @property
    def resolved_database_url(self) -> str:
        """The SQLAlchemy URL: the configured one, or a SQLite file in the data directory."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'arena.db').as_posix()}"


@functools.lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (cached; tests build ``Settings(...)`` directly instead)."""
    return Settings()
