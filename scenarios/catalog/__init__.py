"""Every scenario, one module each: add a module and list it here; nothing else changes."""

from __future__ import annotations

from scenarios.base import Scenario
from scenarios.catalog.calendar import CALENDAR
from scenarios.catalog.free_chat import FREE_CHAT
from scenarios.catalog.shopping import SHOPPING
from scenarios.catalog.smart_home import SMART_HOME

SCENARIOS: tuple[Scenario, ...] = (CALENDAR, SHOPPING, SMART_HOME, FREE_CHAT)
