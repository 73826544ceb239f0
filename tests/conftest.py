"""Shared fixtures. Layer-specific fixtures live in the layer's own conftest or test module."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

# Sharding tests need 8 virtual CPU devices; the flag must be set before jax is first imported.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("ARENA_ENVIRONMENT", "test")

import pytest  # noqa: E402


@pytest.fixture
def postgres_url() -> str:
    """The PostgreSQL test server URL, or a visible skip when none is configured."""
    url = os.environ.get("ARENA_TEST_POSTGRES_URL", "")
    if not url:
        pytest.skip("ARENA_TEST_POSTGRES_URL is not set: no PostgreSQL server configured for tests")
    return url


def postgres_schema_url(base_url: str, schema: str) -> str:
    """``base_url`` with its search_path set to ``schema``."""
    sep = "&" if "?" in base_url else "?"
    return f"{base_url}{sep}options=-csearch_path%3D{schema}"


@pytest.fixture
def pg_schema_url(postgres_url: str) -> Iterator[str]:
    """A URL whose search_path is a brand-new schema (dropped afterwards): isolation from other tests."""
    from db.engine import make_engine

    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = make_engine(postgres_url)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    try:
        yield postgres_schema_url(postgres_url, schema)
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        admin.dispose()
