"""Fixit Arena scenarios: what a battle is about, its grader and correction writer, the automatic arena.

The public face for the web app: ``get_scenario(slug)``, ``list_scenarios()``, ``grade_dialogue`` (every
reply of a dialogue graded in context), ``answered_turn`` (which scripted turn the next reply answers),
``Scenario.grade`` and ``Scenario.correction``. The scenarios themselves live in ``scenarios.catalog``,
one module each. Importing this package imports nothing heavy (no jax, no database).
"""

from __future__ import annotations

from scenarios.base import Scenario, ScenarioError, Turn
from scenarios.catalog import SCENARIOS
from scenarios.dialogue import DialogueMessage, ReplyGrade, answered_turn, grade_dialogue
from scenarios.grader import Grade, Mistake

_SCENARIOS: dict[str, Scenario] = {s.slug: s for s in SCENARIOS}

__all__ = ["DialogueMessage", "Grade", "Mistake", "ReplyGrade", "Scenario", "ScenarioError", "Turn",
           "answered_turn", "get_scenario", "grade_dialogue", "list_scenarios"]


def get_scenario(slug: str) -> Scenario:
    """The scenario named ``slug``; ScenarioError (a ValueError) listing the known slugs otherwise."""
    try:
        return _SCENARIOS[slug]
    except KeyError:
        raise ScenarioError(f"unknown scenario {slug!r}; known: {', '.join(_SCENARIOS)}") from None


def list_scenarios() -> list[Scenario]:
    """Every scenario, the graded calendar first."""
    return list(_SCENARIOS.values())
