"""Admin access: a password from settings, compared in constant time.

In production the development default password never opens the page, even if a deployment forgot to
set one (settings already refuse to load then; this is the second lock).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from settings import DEV_ADMIN_PASSWORD, Settings


@dataclass(frozen=True)
class GateDecision:
    allowed: bool
    reason: str


def admin_available(settings: Settings) -> GateDecision:
    """Whether the admin page may be offered at all with these settings."""
    password = settings.admin_password.get_secret_value()
    if settings.environment == "production" and password == DEV_ADMIN_PASSWORD:
        return GateDecision(False, "The admin page is closed: the development default password is set.")
    if not password:
        return GateDecision(False, "The admin page is closed: no admin password is configured.")
    return GateDecision(True, "")


def check_password(settings: Settings, attempt: str) -> GateDecision:
    available = admin_available(settings)
    if not available.allowed:
        return available
    expected = settings.admin_password.get_secret_value().encode()
    if hmac.compare_digest(expected, attempt.encode()):
        return GateDecision(True, "")
    return GateDecision(False, "Wrong password.")
