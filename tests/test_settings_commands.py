"""Secrets fail closed for what serves visitors, not for an operator's tools: in production with the
placeholder secrets the settings refuse to load, but the commands that use no secret still run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from settings import Settings, get_settings_without_secrets

ROOT = Path(__file__).resolve().parents[1]


def test_placeholders_are_refused_in_production_except_where_no_secret_is_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ARENA_ENVIRONMENT", "production")
    for name in ("ARENA_ADMIN_PASSWORD", "ARENA_HASH_SALT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="placeholder"):
        Settings()
    relaxed = get_settings_without_secrets()
    assert relaxed.environment == "production"
    with pytest.raises(ValueError, match="placeholder"):  # the relaxation does not leak into later reads
        Settings()


def test_operator_commands_run_before_the_secrets_are_set(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    env.update({"ARENA_ENVIRONMENT": "production", "ARENA_DATA_DIR": str(tmp_path), "KERAS_BACKEND": "jax"})
    listed = subprocess.run([sys.executable, "-m", "inference", "list", "--json"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120, check=False)
    assert listed.returncode == 0, listed.stderr[-500:]
    assert '"slug"' in listed.stdout
    upgraded = subprocess.run([sys.executable, "-m", "db", "upgrade"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120, check=False)
    assert upgraded.returncode == 0, upgraded.stderr[-500:]
    assert (tmp_path / "arena.db").is_file()
