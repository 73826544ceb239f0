"""What a scenario is: a system prompt, a scripted dialogue with expected replies, and (optionally) a
grader and a correction writer. Plain data plus two small functions, so the web page can grade every
reply without importing anything heavy."""

from __future__ import annotations

from dataclasses import dataclass

from scenarios.corrections import Style, write_correction
from scenarios.grader import Grade, grade_reply


class ScenarioError(ValueError):
    """Bad input for a scenario: unknown slug, a turn number out of range."""


@dataclass(frozen=True, slots=True)
class Turn:
    """One scripted user turn and the reply the scenario expects to it.

    ``year_known`` is False while the dialogue has not said the year yet (the calendar's turn 1): any
    year in the reply is then one ``wrong_year`` mistake, as in the study. ``is_correction`` marks a
    scripted turn that corrects the previous reply (the calendar's "The current year is 2024."): the
    automatic arena records it as a correction event, and its expected reply is the fixed one.
    """

    user: str
    expected: str
    year_known: bool = True
    is_correction: bool = False


@dataclass(frozen=True, slots=True)
class Scenario:
    slug: str
    title: str
    system_prompt: str
    turns: tuple[Turn, ...] = ()
    description: str = ""

    @property
    def gradable(self) -> bool:
        return bool(self.turns)

    def turn(self, number: int) -> Turn:
        """Turn ``number`` (1-based, as in the study's table)."""
        if not self.turns:
            raise ScenarioError(f"scenario {self.slug!r} has no scripted turns")
        if not 1 <= number <= len(self.turns):
            raise ScenarioError(f"turn {number} is out of range 1..{len(self.turns)} for {self.slug!r}")
        return self.turns[number - 1]

    def grade(self, reply: str, *, target_turn: int) -> Grade | None:
        """Grade a reply against turn ``target_turn``'s expected reply; None for free chat.

        A reply that follows a correction targets the turn it corrects: the fixed reply.
        """
        if not self.turns:
            return None
        turn = self.turn(target_turn)
        return grade_reply(reply, target=turn.expected, year_known=turn.year_known)

    def correction(self, grade: Grade, *, target_turn: int, style: Style = "fix") -> str | None:
        """The correction a person would type for ``grade`` (None when correct or ungradable)."""
        if not self.turns:
            return None
        turn = self.turn(target_turn)
        return write_correction(grade, style=style, target=turn.expected, request=turn.user)
