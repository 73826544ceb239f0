"""What a scenario is: data plus a small state model.

A gradable scenario declares, in one module of ``scenarios/catalog/``: its system prompt; its API
(``scenarios.api``: functions, typed parameters with defaults, what each call does to the state); its
mistake kinds (the API's value kinds plus any state check such as the calendar's double booking); the
sentences its correction writer uses (``scenarios.corrections.Phrasebook``); a reference dialogue (the
study's script, for the calendar); and a seeded dialogue generator (``scenarios.generate``). The grader,
the dialogue grader, the web app and the runner read these declarations; adding a scenario edits none
of them. Free chat is a scenario without an API.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from scenarios.api import Api
from scenarios.corrections import Phrasebook, Style, write_correction
from scenarios.grader import Grade, grade_reply, mistake_order
from scenarios.premade import PremadeCase
from scenarios.state import State

TurnKind = Literal["request", "correction", "false_correction"]
TURN_KINDS: tuple[TurnKind, ...] = ("request", "correction", "false_correction")


class ScenarioError(ValueError):
    """Bad input for a scenario: unknown slug, a turn number out of range."""


@dataclass(frozen=True, slots=True)
class Turn:
    """One user turn of a dialogue and the reply it expects (one line of calls in the scenario's API).

    ``kind``: a ``request``; a ``correction`` the dialogue itself makes (the study's "The current year is
    2024.": its expected reply is the fixed one); or a ``false_correction``, a claimed mistake that the
    dialogue or the API contradicts, whose expected reply keeps the state as it was (the previous call,
    repeated or not). ``assumes`` names the values the request leaves unsaid ("year": a date's year;
    a parameter's name): any value is accepted there, and recorded as an assumption.
    """

    user: str
    expected: str
    kind: TurnKind = "request"
    assumes: tuple[str, ...] = ()

    @property
    def year_known(self) -> bool:
        return "year" not in self.assumes

    @property
    def is_correction(self) -> bool:
        return self.kind == "correction"

    @property
    def is_false_correction(self) -> bool:
        return self.kind == "false_correction"


GeneratedTurns = tuple[Turn, ...]
Generator = Callable[[random.Random], GeneratedTurns]
ConflictCount = Callable[[Api, State], int]


@dataclass(frozen=True, slots=True)
class Scenario:
    slug: str
    title: str
    system_prompt: str
    turns: tuple[Turn, ...] = ()  # the reference dialogue (the study's script for the calendar)
    description: str = ""
    api: Api | None = None  # None: free chat, nothing to grade
    phrases: Phrasebook = field(default_factory=Phrasebook)
    year_from_dialogue: bool = False  # a date's year is unknown until a user message states one
    conflicts: ConflictCount | None = None  # the state check behind ``double_booking``
    generator: Generator | None = None
    premade: tuple[PremadeCase, ...] = ()  # the study's third table: faulty replies and their corrections

    @property
    def gradable(self) -> bool:
        return self.api is not None

    @property
    def mistake_kinds(self) -> tuple[str, ...]:
        """Every mistake kind a reply in this scenario can carry, in correction order."""
        if self.api is None:
            return ()
        kinds = mistake_order(self.api)
        return kinds if self.conflicts is not None else tuple(k for k in kinds if k != "double_booking")

    def turn(self, number: int) -> Turn:
        """Turn ``number`` of the reference dialogue (1-based, as in the study's table)."""
        if not self.turns:
            raise ScenarioError(f"scenario {self.slug!r} has no scripted turns")
        if not 1 <= number <= len(self.turns):
            raise ScenarioError(f"turn {number} is out of range 1..{len(self.turns)} for {self.slug!r}")
        return self.turns[number - 1]

    def grade_turn(self, reply: str, turn: Turn) -> Grade | None:
        """Grade a reply against ``turn``'s expected reply, its unsaid values taken as assumptions."""
        if self.api is None:
            return None
        return grade_reply(reply, target=turn.expected, api=self.api, assumes=frozenset(turn.assumes))

    def grade(self, reply: str, *, target_turn: int) -> Grade | None:
        """Grade a reply against reference turn ``target_turn``; None for free chat.

        A reply that follows a correction targets the turn it corrects: the fixed reply.
        """
        if self.api is None:
            return None
        return self.grade_turn(reply, self.turn(target_turn))

    def correction_for(self, grade: Grade, turn: Turn, *, style: Style = "fix") -> str | None:
        """The correction a person would type for ``grade`` of a reply to ``turn``."""
        if self.api is None:
            return None
        return write_correction(grade, api=self.api, phrases=self.phrases, style=style,
                                target=turn.expected, request=turn.user)

    def correction(self, grade: Grade, *, target_turn: int, style: Style = "fix") -> str | None:
        """The correction a person would type for ``grade`` (None when correct or ungradable)."""
        if self.api is None:
            return None
        return self.correction_for(grade, self.turn(target_turn), style=style)
