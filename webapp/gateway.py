"""Names the Leaderboard and Dataset pages still import from their old place (their owner moves them).

The web layer's doors are ``webapp.context`` (the per-run Context) and one module per action in
``webapp/flows/``; this module defines nothing of its own.
"""

from __future__ import annotations

from webapp.context import Context, reader
from webapp.flows.open_battle import scenario_choices

__all__ = ["Context", "reader", "scenario_choices"]
