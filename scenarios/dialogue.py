"""Grading that follows the dialogue: each reply judged against what the dialogue has said so far.

A reply is graded against the scripted turn it answers (:func:`answered_turn`), knowing every fact the
dialogue has given (the year, once a user message states one) and the calendar's state (the simulated
calendar of ``scenarios.calendar_state``, fed with every reply so far). Decided here:

* **Which turn a message answers.** A request whose text is a scripted turn's (case, spacing and a final
  full stop ignored; else at least ``FUZZY_MATCH`` of its words) starts that turn. A correction answers
  the turn of the reply it corrects, unless its text is a scripted correction turn (the study's "The
  current year is 2024."), which then starts. Any other request is off-script: its reply is not graded
  and its calls are accepted into both the actual and the expected calendar (nothing to compare with).
* **Assumptions are not mistakes.** While no user message has stated a year, the year of a date is an
  assumption: any year is accepted and ``assumed`` records ``"year"``. Once a year is stated (any
  ``19xx``/``20xx`` in a user message), every scripted target uses that year.
* **A correction replaces what it corrects.** A reply to a correction, or to a scripted correction turn,
  is applied to the calendar as it was *before* the corrected reply (the corrected reply is retracted),
  and so is a retry (a second reply with no user message between).
* **State mistakes.** ``regression``: an entry that was right before the reply, and that the turn does
  not change, is broken or gone after it. ``double_booking``: the reply made two entries overlap.
  Both are typed mistakes added to the reply's grade (so they count for its label).
* **fixed** is set on replies that answer a correction: the reply is ``correct``. **recurrence**: the reply
  repeats a mistake (kind and parameter) that an earlier reply made and a later reply had cleared
  (CodeGemma's "20 24" date, fixed, then back), the study's "(🍄) recurring mistake".

The web app and the automatic arena call :func:`grade_dialogue` (or :class:`DialogueGrader` one message
at a time); :func:`answered_turn` says which turn the next reply answers. They take any
:class:`DialogueTurn` (``role``, ``kind``, ``content``): ``db``'s stored ``MessageView``, a run's
``RunMessage``, or a :class:`DialogueMessage` read from JSON, as they are, with no copy.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast

from scenarios.base import Scenario
from scenarios.calendar_state import EMPTY, Calendar, apply_reply, overlap_count, states_match, without_years
from scenarios.grader import Finding, Grade, Mistake, build_grade, grade_reply

Kind = Literal["request", "correction", "reply"]
KINDS: tuple[Kind, ...] = ("request", "correction", "reply")
ROLES = ("user", "assistant")
FUZZY_MATCH = 0.8  # share of a scripted turn's words (and of the message's) for a near-verbatim match
_YEAR = re.compile(r"(?<!\d)(19\d\d|20\d\d)(?!\d)")
_TARGET_YEAR = re.compile(r"""(["'])\d{4}-""")
_WORD = re.compile(r"[a-z0-9]+")


class DialogueTurn(Protocol):
    """What the grader reads of a message: ``role`` user/assistant (a system message is skipped), ``kind``
    request/correction/reply, ``content``."""

    @property
    def role(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def content(self) -> str: ...


def check_turn(role: object, kind: object, content: object) -> None:
    """ValueError saying what is wrong with a message's ``role``, ``kind`` and ``content``, if anything."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if role not in ROLES:
        raise ValueError(f"role must be user or assistant, got {role!r}")
    if (kind == "reply") != (role == "assistant"):
        raise ValueError(f"a {kind} comes from the {'assistant' if kind == 'reply' else 'user'}")
    if not isinstance(content, str):
        raise ValueError("content must be a string")


@dataclass(frozen=True, slots=True)
class DialogueMessage:
    """One message of a dialogue read from JSON (``python -m scenarios grade --dialogue``, tests)."""

    role: str
    kind: Kind
    content: str

    @classmethod
    def from_mapping(cls, item: Mapping[str, Any]) -> DialogueMessage:
        """Validate one ``{"role", "kind", "content"}`` object; ValueError saying what is wrong."""
        role, kind, content = item.get("role"), item.get("kind"), item.get("content")
        check_turn(role, kind, content)
        return cls(role=str(role), kind=cast(Kind, kind), content=str(content))


@dataclass(frozen=True, slots=True)
class ReplyGrade:
    """The grade of one reply in its dialogue. ``grade`` is None for a reply to an off-script request."""

    index: int  # position of the reply in the messages given
    turn: int | None
    grade: Grade | None
    assumed: tuple[str, ...] = ()
    fixed: bool | None = None  # None: the reply answers no correction
    regression: bool = False
    recurrence: bool = False
    state_matches: bool | None = None  # the whole calendar equals the expected one after this reply

    @property
    def label(self) -> str | None:
        return self.grade.label if self.grade is not None else None

    def as_json(self) -> dict[str, Any]:
        """The CLI's record: ``turn, label, mistakes, assumed, fixed, regression, recurrence``."""
        return {
            "turn": self.turn,
            "label": self.label,
            "mistakes": [m.value for m in self.grade.mistakes] if self.grade is not None else [],
            "assumed": list(self.assumed),
            "fixed": self.fixed,
            "regression": self.regression,
            "recurrence": self.recurrence,
        }


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def match_turn(scenario: Scenario, text: str) -> int | None:
    """The scripted turn whose user text ``text`` is (verbatim up to case/spacing, or nearly), else None."""
    words = _words(text)
    if not words:
        return None
    best, best_score = None, 0.0
    for number, turn in enumerate(scenario.turns, start=1):
        script = _words(turn.user)
        if words == script:
            return number
        common = sum(min(words.count(w), script.count(w)) for w in set(words))
        score = min(common / len(script), common / len(words))
        if score > best_score:
            best, best_score = number, score
    return best if best_score >= FUZZY_MATCH else None


@functools.lru_cache(maxsize=256)
def _with_year(target: str, year: int) -> str:
    return _TARGET_YEAR.sub(lambda m: f"{m.group(1)}{year:04d}-", target)


@dataclass
class DialogueGrader:
    """Feed a dialogue one message at a time; :meth:`add` returns the grade of each reply."""

    scenario: Scenario
    turn: int | None = None
    year: int | None = None
    _answers_correction: bool = False
    _base_actual: Calendar = EMPTY  # the calendar the current turn's reply is applied to
    _base_expected: Calendar = EMPTY
    _actual: Calendar = EMPTY  # after the latest reply
    _expected: Calendar = EMPTY
    _made: set[tuple[Mistake, str | None]] = field(default_factory=set)
    _cleared: set[tuple[Mistake, str | None]] = field(default_factory=set)
    _count: int = 0

    def add(self, message: DialogueTurn) -> ReplyGrade | None:
        """The grade of ``message`` if it is a reply, else None (the dialogue moves on either way); a
        system message is skipped. ValueError for a message that is not a dialogue's (see
        :func:`check_turn`)."""
        if message.role == "system":
            return None
        check_turn(message.role, message.kind, message.content)
        index, self._count = self._count, self._count + 1
        if message.kind == "reply":
            return self._reply(index, message.content)
        self._user(message)
        return None

    def _user(self, message: DialogueTurn) -> None:
        years = _YEAR.findall(message.content)
        if years:
            self.year = int(years[-1])
        scripted = match_turn(self.scenario, message.content) if self.scenario.turns else None
        if scripted is not None and self.scenario.turn(scripted).is_correction and self.turn is not None:
            self.turn, self._answers_correction = scripted, True  # retract: keep the corrected turn's base
            return
        if message.kind == "correction" and scripted is None:
            self._answers_correction = self.turn is not None
            return
        self._base_actual, self._base_expected = self._actual, self._expected
        self.turn, self._answers_correction = scripted, message.kind == "correction"

    def _reply(self, index: int, text: str) -> ReplyGrade:
        before_actual, before_expected = self._base_actual, self._base_expected
        self._actual = apply_reply(before_actual, text)
        if self.turn is None:  # off-script: accept whatever it did, grade nothing
            self._expected = apply_reply(before_expected, text)
            return ReplyGrade(index=index, turn=None, grade=None)
        target = self.scenario.turn(self.turn).expected
        known = self.year is not None
        if known:
            target = _with_year(target, self.year or 0)
        expected = apply_reply(before_expected, target)
        self._expected = expected if known else without_years(expected)
        raw = grade_reply(text, target=target, year_known=known)
        assumed = tuple(dict.fromkeys(
            "year" for f in raw.findings
            if f.kind is Mistake.WRONG_YEAR and f.detail == "year_unknown" and f.got not in (None, "None")
        ))
        findings = tuple(f for f in raw.findings
                         if not (f.kind is Mistake.WRONG_YEAR and f.detail == "year_unknown"))
        if raw.label != "garbage":
            findings += self._state_findings(before_actual, before_expected)
        grade = raw if raw.label == "garbage" else build_grade(findings, call=raw.call)
        recurrence = self._recurrence(grade)
        return ReplyGrade(
            index=index, turn=self.turn, grade=grade, assumed=assumed,
            fixed=grade.is_correct if self._answers_correction else None,
            regression=Mistake.REGRESSION in grade.mistakes, recurrence=recurrence,
            state_matches=states_match(self._actual, self._expected),
        )

    def _state_findings(self, before_actual: Calendar, before_expected: Calendar) -> tuple[Finding, ...]:
        found: list[Finding] = []
        for want in before_expected:
            if want not in self._expected:
                continue  # this turn changes or removes it on purpose
            was_right = any(got.matches(want) for got in before_actual)
            if was_right and not any(got.matches(want) for got in self._actual):
                found.append(Finding(Mistake.REGRESSION, param="entry", expected=want.describe(),
                                     detail=want.title))
        if overlap_count(self._actual) > max(overlap_count(before_actual), overlap_count(self._expected)):
            found.append(Finding(Mistake.DOUBLE_BOOKING, param="entry"))
        return tuple(found)

    def _recurrence(self, grade: Grade) -> bool:
        if grade.label == "garbage":
            return False
        keys = {(f.kind, f.param) for f in grade.findings}
        recurrence = bool(keys & self._cleared)
        self._cleared = (self._cleared | (self._made - keys)) - keys
        self._made |= keys
        return recurrence


def grade_dialogue(scenario: Scenario, messages: Iterable[DialogueTurn]) -> list[ReplyGrade]:
    """One :class:`ReplyGrade` per reply, in order. Retried (superseded) replies should be left out."""
    grader = DialogueGrader(scenario)
    out = []
    for message in messages:
        grade = grader.add(message)
        if grade is not None:
            out.append(grade)
    return out


def answered_turn(scenario: Scenario, messages: Iterable[DialogueTurn]) -> int | None:
    """The scripted turn the next reply answers, after ``messages`` (None: off-script or no script)."""
    grader = DialogueGrader(scenario)
    for message in messages:
        grader.add(message)
    return grader.turn
