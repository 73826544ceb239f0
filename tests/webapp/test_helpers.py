"""Identity guard and admin gate."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from settings import DEV_ADMIN_PASSWORD, Settings
from webapp.admin_gate import admin_available, check_password
from webapp.identity import identity_terms, reveals_identity


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("As Gemma, I cannot do that.", True),
        ("I am a gemma3 model by Google", True),
        ("action.add_calendar_entry('Meeting', date='2024-11-11')", False),
        ("I'm SmolLM2, a small assistant", True),
        ("Dilemma solved.", False),  # 'gemma' inside another word does not count
    ],
)
def test_identity_guard(text: str, expected: bool) -> None:
    gemma = identity_terms(slug="gemma3-270m", display_name="Gemma 3 270M", family="gemma3")
    smol = identity_terms(slug="smollm2-135m", display_name="SmolLM2 135M Instruct", family="llama")
    assert reveals_identity(text, gemma | smol) is expected


def test_identity_terms_skip_generic_words() -> None:
    terms = identity_terms(slug="tiny-llama-a", display_name="Tiny Llama A", family="llama")
    assert "llama" in terms and "tiny" not in terms


def test_admin_gate() -> None:
    dev = Settings(environment="development")
    assert check_password(dev, DEV_ADMIN_PASSWORD).allowed
    assert not check_password(dev, "wrong").allowed
    prod = Settings(
        environment="production", admin_password=SecretStr("s3cret-xyz"), hash_salt=SecretStr("salt-1")
    )
    assert check_password(prod, "s3cret-xyz").allowed
    assert not check_password(prod, DEV_ADMIN_PASSWORD).allowed
    # Even if a production object carries the default (built around the validator), the page stays shut.
    forced = prod.model_copy(update={"admin_password": SecretStr(DEV_ADMIN_PASSWORD)})
    assert not admin_available(forced).allowed
    assert not check_password(forced, DEV_ADMIN_PASSWORD).allowed
