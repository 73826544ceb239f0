"""Every scenario, one module each: add a module and list it here; nothing else changes."""

from __future__ import annotations

from scenarios.base import Scenario
from scenarios.catalog.calendar import CALENDAR
from scenarios.catalog.free_chat import FREE_CHAT

SCENARIOS: tuple[Scenario, ...] = (CALENDAR, FREE_CHAT)
