"""Shared fixtures. Layer-specific fixtures live in the layer's own conftest or test module."""

from __future__ import annotations

import os

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
