"""Fixit Arena settings: one object, read from ``ARENA_``-prefixed environment variables (and ``.env``).

This is a leaf module: it imports nothing of the project, so every layer (and Alembic) may read it.
Layers take plain values as arguments where they can; the CLI and the web app pass them from here.
"""

from __future__ import annotations

import contextvars
import functools
import ipaddress
import re
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

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

    # Every number is bounded (checked at start, one line naming the variable): floats are finite, and
    # integer limits stay far below 2**31 even multiplied by ARENA_ADDRESS_LIMIT_FACTOR (the database
    # counts and compares them as 32-bit integers).
    max_message_chars: int = Field(default=12_000, ge=1, le=1_000_000)
    max_turns_per_battle: int = Field(default=20, ge=1, le=1_000)
    battles_per_visitor_per_hour: int = Field(default=30, ge=1, le=100_000)
    # Replies per visitor: each side, each retry.
    generations_per_minute: int = Field(default=20, ge=1, le=100_000)
    # One address may do this many visitors' worth.
    address_limit_factor: int = Field(default=4, ge=1, le=1_000)
    # Generation rows in flight at once from one address hash (across processes), and how long a
    # generation that never finished (a crashed process) keeps holding its slot.
    generations_in_flight_per_address: int = Field(default=8, ge=1, le=1_000)
    generation_lease_s: float = Field(default=300.0, gt=0, le=3_600, allow_inf_nan=False)
    # Votes one visitor may cast per UTC day (0: no cap); votes past it are refused before anything is
    # written (docs/DESIGN.md, "Daily vote caps").
    votes_per_visitor_per_day: int = Field(default=0, ge=0, le=1_000_000)
    # Peers whose X-Forwarded-For is believed (the reverse proxy's own addresses or networks); see
    # docs/OPERATIONS.md, "Behind a reverse proxy".
    trusted_proxies: list[str] = Field(default_factory=list, max_length=1_000)
    show_grader_live: bool = False
    # Open battles idle this long are abandoned (at most 30 days).
    stale_battle_minutes: int = Field(default=60, ge=1, le=60 * 24 * 30)
    # Dataset page: battles closed at least this long ago (at most a year).
    public_export_delay_hours: float = Field(default=24.0, ge=0, le=24 * 365, allow_inf_nan=False)
    # The Fixing board's composite rating: an automatic pairwise outcome (replay) weighs this many votes.
    composite_automatic_weight: float = Field(default=0.5, ge=0, le=100, allow_inf_nan=False)
    # Wrong admin passwords in an hour, everyone together, before every attempt waits.
    admin_failures_per_hour: int = Field(default=50, ge=1, le=100_000)

    # Requests in one model's line (generating or waiting); one still waiting after the deadline is
    # answered with an error.
    model_queue_limit: int = Field(default=16, ge=1, le=100_000)
    model_queue_deadline_s: float = Field(default=60.0, gt=0, le=3_600, allow_inf_nan=False)
    # The four bundled models fit 16000 on a 24 GB machine; at most 16 TB.
    memory_budget_mb: int = Field(default=16_000, ge=1, le=16_000_000)
    # Where local models are served: auto (all devices on the model axis when there are several), off,
    # or a shape BxM (inference.sharding.mesh_from_setting).
    mesh: str = Field(default="auto", max_length=64)
    # Contestant slug -> key (a JSON object).
    remote_api_keys: dict[str, SecretStr] = Field(default_factory=dict)
    # `python -m inference serve`: the bearer token its clients must send (none: no token asked).
    serve_token: SecretStr | None = None
    # A remote engine's whole reply, and the longest silence within it (keep-alive comments do not count).
    remote_reply_deadline_s: float = Field(default=120.0, gt=0, le=3_600, allow_inf_nan=False)
    remote_idle_timeout_s: float = Field(default=30.0, gt=0, le=3_600, allow_inf_nan=False)
    # The circuit breaker (db.actions.breakers): this many failed replies in a row, the first within the
    # window of the last, take a model out of the pairing for the cool-down (0 failures: no breaker).
    breaker_failures: int = Field(default=3, ge=0, le=1_000)
    breaker_window_s: float = Field(default=300.0, gt=0, le=86_400, allow_inf_nan=False)
    breaker_cooldown_s: float = Field(default=120.0, gt=0, le=86_400, allow_inf_nan=False)
    compilation_cache: bool = True

    # Prometheus metrics and the readiness answer (``/metrics``, ``/ready``) on a port of their own, one
    # per process (0: off); the address it listens on; the log lines' format.
    metrics_port: int = Field(default=0, ge=0, le=65_535)
    metrics_host: str = Field(default="127.0.0.1", max_length=64)
    log_format: Literal["text", "json"] = "text"

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies_are_addresses(cls, proxies: list[str]) -> list[str]:
        for number, proxy in enumerate(proxies, start=1):
            try:
                ipaddress.ip_network(proxy.strip(), strict=False)
            except ValueError:
                raise ValueError(
                    f"entry {number} is not an IP address or network "
                    '(write e.g. ["127.0.0.1", "10.0.0.0/8"])'
                ) from None
        return [proxy.strip() for proxy in proxies]

    @field_validator("metrics_host")
    @classmethod
    def _host_is_an_address(cls, host: str) -> str:
        try:
            return str(ipaddress.ip_address(host.strip()))
        except ValueError:
            raise ValueError("must be an IP address to listen on, e.g. 127.0.0.1 or 0.0.0.0") from None

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

# What a JSON-valued variable must hold, for the one-line reason when it does not parse.
_JSON_SHAPES = {
    "trusted_proxies": 'a JSON list of addresses or networks, e.g. ["127.0.0.1"]',
    "remote_api_keys": 'a JSON object of contestant slug to key, e.g. {"my-model": "sk-..."}',
}
_FIELD_IN_SETTINGS_ERROR = re.compile(r'field "([a-z0-9_]+)"')


class SettingsProblem(ValueError):
    """Settings that cannot be used. The message is one line that names the variables at fault and
    never their values (it is shown to visitors and printed by the command lines)."""


def variable(field: str) -> str:
    """The environment variable of a settings field (``stale_battle_minutes`` -> ``ARENA_STALE_…``)."""
    return f"ARENA_{field.upper()}"


def settings_error_reason(exc: ValidationError | SettingsError) -> str:
    """One line saying why settings did not load: every variable at fault and what it must be.

    ``ValidationError`` is a value out of bounds or of the wrong type; ``SettingsError`` (not a
    ``ValidationError``) is a JSON-valued variable that is not JSON at all."""
    if isinstance(exc, ValidationError):
        reasons = []
        for error in exc.errors():
            message = str(error["msg"]).removeprefix("Value error, ")
            location = [str(part) for part in error["loc"]]
            if not location:  # a rule over several fields (secrets): its message names them
                reasons.append(message)
            elif len(location) == 1:
                reasons.append(f"{variable(location[0])}: {message}")
            else:
                reasons.append(f"{variable(location[0])} ({'.'.join(location[1:])}): {message}")
        return " ".join("; ".join(reasons).split())
    found = _FIELD_IN_SETTINGS_ERROR.search(str(exc))
    if found is None:
        return " ".join(str(exc).split()) or "the settings could not be read"
    field = found.group(1)
    shape = _JSON_SHAPES.get(field, "valid JSON")
    return f"{variable(field)} is not valid JSON: write {shape}"


def load_settings(*, check_secrets: bool = True) -> Settings:
    """Settings from the environment, or :class:`SettingsProblem` with a one-line reason for ANY error
    in them (bounds, types, JSON, weak secrets outside development when ``check_secrets``)."""
    token = _CHECK_SECRETS.set(check_secrets)
    try:
        return Settings()
    except (ValidationError, SettingsError) as exc:
        raise SettingsProblem(settings_error_reason(exc)) from None
    finally:
        _CHECK_SECRETS.reset(token)


@functools.lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (cached; tests build ``Settings(...)`` directly instead). Refuses
    placeholder secrets outside development: the web app and anything that uses a secret read these.
    Raises :class:`SettingsProblem` (a ``ValueError``) with a one-line reason."""
    return load_settings()


def get_settings_without_secrets() -> Settings:
    """Settings for a command that uses neither the admin password nor the salt (``inference``,
    ``scenarios``, ``ranking``, ``db upgrade``, migrations): secrets are not checked, so an operator's
    tools work before the public app's secrets are set. Whatever serves visitors or exports visitor ids
    uses :func:`get_settings`, which fails closed. Raises :class:`SettingsProblem` like it."""
    return load_settings(check_secrets=False)
