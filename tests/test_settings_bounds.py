"""Every setting is bounded, and any settings error is one line naming the variable.

Probes of the old settings: ``ARENA_PUBLIC_EXPORT_DELAY_HOURS=inf`` crashed the Dataset page,
``ARENA_STALE_BATTLE_MINUTES=1e13`` broke the sweeper, ``ARENA_VOTES_PER_VISITOR_PER_DAY=3e9`` made every
vote raise (a 32-bit integer overflow in the database), and a non-JSON ``ARENA_TRUSTED_PROXIES`` got past
the start-up check (pydantic-settings raises ``SettingsError``, not a ``ValidationError``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import annotated_types
import pytest
from pydantic import SecretStr, ValidationError

from settings import Settings, SettingsProblem, get_settings_without_secrets, load_settings
from webapp.admin_gate import startup_problem

INT32 = 2**31
OPERATIONS = (Path(__file__).resolve().parents[1] / "docs" / "OPERATIONS.md").read_text(encoding="utf-8")
PER_VISITOR_LIMITS = (
    "max_turns_per_battle", "battles_per_visitor_per_hour", "generations_per_minute",
    "votes_per_visitor_per_day", "generations_in_flight_per_address",
)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("public_export_delay_hours", math.inf),
        ("public_export_delay_hours", math.nan),
        ("public_export_delay_hours", 24 * 365 + 1),
        ("public_export_delay_hours", -1),
        ("stale_battle_minutes", 10**13),
        ("stale_battle_minutes", 60 * 24 * 30 + 1),
        ("votes_per_visitor_per_day", 3_000_000_000),
        ("votes_per_visitor_per_day", 1_000_001),
        ("model_queue_deadline_s", math.inf),
        ("model_queue_deadline_s", math.nan),
        ("model_queue_deadline_s", 0),
        ("model_queue_deadline_s", 3601),
        ("memory_budget_mb", 10**12),
        ("max_message_chars", 10**9),
        ("max_turns_per_battle", INT32),
        ("battles_per_visitor_per_hour", INT32),
        ("generations_per_minute", INT32),
        ("address_limit_factor", INT32),
        ("model_queue_limit", INT32),
        ("generations_in_flight_per_address", 0),
        ("generations_in_flight_per_address", 1001),
        ("generation_lease_s", math.inf),
        ("generation_lease_s", 0),
        ("remote_reply_deadline_s", math.nan),
        ("remote_reply_deadline_s", 3601),
        ("remote_idle_timeout_s", 1e9),
        ("breaker_failures", -1),
        ("breaker_failures", 1001),
        ("breaker_window_s", 0),
        ("breaker_window_s", math.inf),
        ("breaker_cooldown_s", 86_401),
        ("breaker_cooldown_s", math.nan),
        ("admin_failures_per_hour", 0),
        ("admin_failures_per_hour", 100_001),
        ("trusted_proxies", ["nope"]),
        ("trusted_proxies", ["127.0.0.1", "10.0.0.0/33"]),
        ("trusted_proxies", "127.0.0.1"),
        ("remote_api_keys", ["sk-1"]),
        ("mesh", "x" * 1000),
        ("metrics_port", -1),
        ("metrics_port", 65_536),
        ("metrics_host", "metrics.internal"),
        ("log_format", "xml"),
    ],
)
def test_out_of_bounds_values_are_refused(field: str, value: Any) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(environment="test", **{field: value})
    assert {error["loc"][0] for error in refused.value.errors()} == {field}


def _bounds(field: str) -> tuple[float | None, float | None, Any]:
    """(upper bound, lower bound, allow_inf_nan) of a numeric settings field from its metadata."""
    upper = lower = allow = None
    for item in Settings.model_fields[field].metadata:
        if isinstance(item, annotated_types.Le | annotated_types.Lt):
            upper = float(item.le if isinstance(item, annotated_types.Le) else item.lt)  # type: ignore[arg-type]
        if isinstance(item, annotated_types.Ge | annotated_types.Gt):
            lower = float(item.ge if isinstance(item, annotated_types.Ge) else item.gt)  # type: ignore[arg-type]
        if hasattr(item, "allow_inf_nan"):
            allow = item.allow_inf_nan
    return upper, lower, allow


def test_every_number_has_bounds_and_no_limit_nears_int32() -> None:
    numeric = [name for name, f in Settings.model_fields.items() if f.annotation in (int, float)]
    assert "votes_per_visitor_per_day" in numeric and "public_export_delay_hours" in numeric
    factor = _bounds("address_limit_factor")[0]
    assert factor is not None
    for name in numeric:
        upper, lower, allow = _bounds(name)
        assert upper is not None and lower is not None, f"{name} is unbounded"
        assert upper < INT32 / 2, f"{name} nears 2**31"
        if name in PER_VISITOR_LIMITS:  # an address may use ARENA_ADDRESS_LIMIT_FACTOR times these
            assert upper * factor < INT32 / 2, f"{name} times ARENA_ADDRESS_LIMIT_FACTOR nears 2**31"
        if Settings.model_fields[name].annotation is float:
            assert allow is False, f"{name} accepts inf/nan"


def test_the_new_settings_and_their_defaults() -> None:
    settings = Settings(environment="test")
    assert settings.generations_in_flight_per_address == 8
    assert settings.generation_lease_s == 300.0
    assert settings.remote_reply_deadline_s == 120.0
    assert settings.remote_idle_timeout_s == 30.0
    assert settings.admin_failures_per_hour == 50
    breaker = (settings.breaker_failures, settings.breaker_window_s, settings.breaker_cooldown_s)
    assert breaker == (3, 300.0, 120.0)
    assert (settings.metrics_port, settings.metrics_host, settings.log_format) == (0, "127.0.0.1", "text")
    assert Settings(environment="test", trusted_proxies=[" 10.0.0.0/8", "::1"]).trusted_proxies == [
        "10.0.0.0/8", "::1"
    ]


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("ARENA_PUBLIC_EXPORT_DELAY_HOURS", "inf", "finite"),
        ("ARENA_PUBLIC_EXPORT_DELAY_HOURS", "nan", "finite"),
        ("ARENA_STALE_BATTLE_MINUTES", "10000000000000", "less than or equal to 43200"),
        ("ARENA_STALE_BATTLE_MINUTES", "1e13", "integer"),
        ("ARENA_VOTES_PER_VISITOR_PER_DAY", "3000000000", "less than or equal to 1000000"),
        ("ARENA_MODEL_QUEUE_DEADLINE_S", "1e400", "finite"),
        ("ARENA_TRUSTED_PROXIES", "127.0.0.1", "not valid JSON"),
        ("ARENA_TRUSTED_PROXIES", "[127.0.0.1]", "not valid JSON"),
        ("ARENA_TRUSTED_PROXIES", '["127.0.0.1", "proxy.internal"]', "entry 2 is not an IP address"),
        ("ARENA_TRUSTED_PROXIES", '{"a": 1}', "list"),
        ("ARENA_REMOTE_API_KEYS", "sk-not-json", "not valid JSON"),
        ("ARENA_REMOTE_API_KEYS", '["sk-1"]', "dictionary"),
        ("ARENA_MAX_MESSAGE_CHARS", "lots", "integer"),
        ("ARENA_BREAKER_COOLDOWN_S", "-5", "greater than 0"),
        ("ARENA_ENVIRONMENT", "staging", "development"),
        ("ARENA_METRICS_PORT", "70000", "less than or equal to 65535"),
        ("ARENA_METRICS_HOST", "localhost", "must be an IP address"),
        ("ARENA_LOG_FORMAT", "yaml", "'text' or 'json'"),
    ],
)
def test_the_start_up_check_names_every_bad_variable_in_one_line(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, says: str
) -> None:
    monkeypatch.setenv("ARENA_ENVIRONMENT", "test")
    monkeypatch.setenv("ARENA_ADMIN_PASSWORD", "a-long-admin-password-1")
    monkeypatch.setenv(variable, value)
    problem = startup_problem()
    assert problem is not None and problem.startswith("This arena is not configured:"), problem
    assert variable in problem and says in problem, problem
    assert "\n" not in problem
    assert "a-long-admin-password-1" not in problem, "no secret is shown"
    with pytest.raises(SettingsProblem, match=variable):  # what the command lines read
        get_settings_without_secrets()


def test_a_bad_value_is_not_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARENA_ENVIRONMENT", "test")
    monkeypatch.setenv("ARENA_REMOTE_API_KEYS", '{"m": "sk-live-123"')  # a key, one brace short
    monkeypatch.setenv("ARENA_MAX_MESSAGE_CHARS", "sk-live-456")
    problem = startup_problem() or ""
    assert "ARENA_REMOTE_API_KEYS" in problem and "sk-live" not in problem, problem


def test_several_bad_variables_are_all_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARENA_ENVIRONMENT", "test")
    monkeypatch.setenv("ARENA_STALE_BATTLE_MINUTES", "0")
    monkeypatch.setenv("ARENA_MEMORY_BUDGET_MB", "-5")
    problem = startup_problem() or ""
    assert "ARENA_STALE_BATTLE_MINUTES" in problem and "ARENA_MEMORY_BUDGET_MB" in problem


def test_weak_secrets_in_production_stay_a_one_line_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARENA_ENVIRONMENT", "production")
    monkeypatch.setenv("ARENA_ADMIN_PASSWORD", "short")
    monkeypatch.setenv("ARENA_HASH_SALT", "a-long-hashing-salt-2")
    with pytest.raises(SettingsProblem, match="ARENA_ADMIN_PASSWORD is shorter than 16") as refused:
        load_settings()
    assert isinstance(refused.value, ValueError) and "short" not in str(refused.value).split("is shorter")[0]
    assert load_settings(check_secrets=False).admin_password == SecretStr("short")


def test_every_setting_is_in_the_operations_table() -> None:
    missing = [name for name in Settings.model_fields if f"| `ARENA_{name.upper()}` |" not in OPERATIONS]
    assert not missing, f"docs/OPERATIONS.md's settings table lacks {missing}"
