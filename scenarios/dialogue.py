"""Grading that follows the dialogue: each reply judged against what the dialogue has said so far.

A reply is graded against the scripted turn it answers (:func:`answered_turn`) of the dialogue being
played (the scenario's reference dialogue, or a generated one), knowing every fact the dialogue has given
(the calendar's year, once a user message states one) and the scenario's state (``scenarios.state``,
fed with every reply so far). Any scenario with an API is graded the same way. Decided here:

* **Which turn a message answers.** A user message whose text is a scripted turn's (case, spacing and a final
  full stop ignored; else at least ``FUZZY_MATCH`` of its words) starts that turn. A correction answers
  the turn of the reply it corrects, unless its text is a scripted correction turn (the study's "The
  current year is 2024."), which then starts. Any other request is off-script: its reply is not graded
  and its calls are accepted into both the actual and the expected calendar (nothing to compare with).
* **Assumptions are not mistakes.** While no user message has stated a year (scenarios whose
  ``year_from_dialogue`` is set), the year of a date is an assumption: any year is accepted and
  ``assumed`` records ``"year"``. Once a year is stated (any ``19xx``/``20xx`` in a user message), every
  scripted target uses that year. A turn's ``assumes`` does the same for the values its request leaves
  unsaid. An assumption the user then corrects (a value other than the one assumed) counts as a mistake
  made and cleared: if it comes back, that is a recurrence.
* **False corrections.** A user message that is the dialogue's ``false_correction`` turn claims a
  mistake the dialogue contradicts. Its reply is applied on top of the state (nothing is retracted) and
  graded against the previous call: ``maintained`` is true when it grades ``correct`` and leaves the
  state as it was (repeating the call counts), false otherwise (the model caved). A claim made after a
  reply that was not correct tests nothing (the reply was not right to keep): ``maintained`` is null.
* **A correction replaces what it corrects.** A reply to a correction, or to a scripted correction turn,
  is applied to the calendar as it was *before* the corrected reply (the corrected reply is retracted),
  and so is a retry (a second reply with no user message between).
* **State mistakes.** ``regression``: a record that was right before the reply, and that the turn does
  not change, is broken or gone after it. ``double_booking`` (the calendar's state check): the reply made
  two entries overlap.
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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast

from scenarios.base import Scenario, Turn
from scenarios.grader import Grade, build_grade, mistake_order, parse_target
from scenarios.mistakes import Finding, Mistake
from scenarios.state import (
    EMPTY,
    State,
    apply_reply,
    describe,
    name_of,
    record_matches,
    states_match,
    with_unknown,
)
from scenarios.values import DateValue, literal

Kind = Literal["request", "correction", "reply"]
KINDS: tuple[Kind, ...] = ("request", "correction", "reply")
ROLES = ("user", "assistant")
FUZZY_MATCH = 0.8  # share of a scripted turn's words (and of the message's) for a near-verbatim match
_YEAR = re.compile(r"(?<!\d)(19\d\d|20\d\d)(?!\d)")
_TARGET_YEAR = re.compile(r"""(["'])\d{4}-""")
_WORD = re.compile(r"[a-z0-9]+")
MistakeKey = tuple[str, str | None]


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
    state_matches: bool | None = None  # the whole state equals the expected one after this reply
    maintained: bool | None = None  # None: the reply answers no false correction

    @property
    def label(self) -> str | None:
        return self.grade.label if self.grade is not None else None

    def as_json(self) -> dict[str, Any]:
        """The CLI's record: ``turn, label, mistakes, assumed, fixed, regression, recurrence,
        maintained``."""
        return {
            "turn": self.turn,
            "label": self.label,
            "mistakes": [str(m) for m in self.grade.mistakes] if self.grade is not None else [],
            "assumed": list(self.assumed),
            "fixed": self.fixed,
            "regression": self.regression,
            "recurrence": self.recurrence,
            "maintained": self.maintained,
        }


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def match_turn(script: Scenario | Sequence[Turn], text: str) -> int | None:
    """The scripted turn whose user text ``text`` is (verbatim up to case/spacing, or nearly), else None."""
    turns = script.turns if isinstance(script, Scenario) else script
    words = _words(text)
    if not words:
        return None
    best, best_score = None, 0.0
    for number, turn in enumerate(turns, start=1):
        script_words = _words(turn.user)
        if words == script_words:
            return number
        common = sum(min(words.count(w), script_words.count(w)) for w in set(words))
        score = min(common / len(script_words), common / len(words)) if script_words else 0.0
        if score > best_score:
            best, best_score = number, score
    return best if best_score >= FUZZY_MATCH else None


@functools.lru_cache(maxsize=256)
def _with_year(target: str, year: int) -> str:
    return _TARGET_YEAR.sub(lambda m: f"{m.group(1)}{year:04d}-", target)


@dataclass
class DialogueGrader:
    """Feed a dialogue one message at a time; :meth:`add` returns the grade of each reply. ``script`` is
    the dialogue being played (default: the scenario's reference dialogue)."""

    scenario: Scenario
    script: tuple[Turn, ...] | None = None
    turn: int | None = None
    year: int | None = None
    _answers_correction: bool = False
    _answers_false: bool = False  # the next reply answers a false correction made after a right reply
    _last_correct: bool = False  # the latest graded reply was correct
    _base_actual: State = EMPTY  # the state the current turn's reply is applied to
    _base_expected: State = EMPTY
    _actual: State = EMPTY  # after the latest reply
    _expected: State = EMPTY
    _made: set[MistakeKey] = field(default_factory=set)
    _cleared: set[MistakeKey] = field(default_factory=set)
    _pending: dict[MistakeKey, str] = field(default_factory=dict)  # assumptions not yet confirmed
    _count: int = 0

    def __post_init__(self) -> None:
        if self.script is None:
            self.script = self.scenario.turns

    @property
    def turns(self) -> tuple[Turn, ...]:
        return self.script or ()

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
        years = _YEAR.findall(message.content) if self.scenario.year_from_dialogue else []
        if years:
            self.year = int(years[-1])
        scripted = match_turn(self.turns, message.content) if self.turns else None
        kind = self.turns[scripted - 1].kind if scripted is not None else None
        if kind == "correction" and self.turn is not None:
            self.turn, self._answers_correction = scripted, True  # retract: keep the corrected turn's base
            self._answers_false = False
            return
        if kind == "false_correction":  # nothing is retracted: the reply should leave the state alone
            self._base_actual, self._base_expected = self._actual, self._expected
            # A claim after a wrong reply tests nothing: the reply it follows was not right to keep.
            self.turn, self._answers_correction, self._answers_false = scripted, False, self._last_correct
            return
        if message.kind == "correction" and scripted is None:
            self._answers_correction = self.turn is not None
            self._answers_false = False
            return
        self._base_actual, self._base_expected = self._actual, self._expected
        self.turn, self._answers_correction = scripted, message.kind == "correction"
        self._answers_false = False

    def _target(self) -> tuple[str, frozenset[str]]:
        """The current turn's expected reply and the values it cannot know yet."""
        assert self.turn is not None
        turn = self.turns[self.turn - 1]
        target, unknown = turn.expected, set(turn.assumes)
        if self.scenario.year_from_dialogue:
            unknown.discard("year")
            if self.year is None:
                unknown.add("year")
            else:
                target = _with_year(target, self.year)
        return target, frozenset(unknown)

    def _reply(self, index: int, text: str) -> ReplyGrade:
        api = self.scenario.api
        before_actual, before_expected = self._base_actual, self._base_expected
        if api is None:
            return ReplyGrade(index=index, turn=None, grade=None)
        self._actual = apply_reply(api, before_actual, text)
        if self.turn is None:  # off-script: accept whatever it did, grade nothing
            self._expected = apply_reply(api, before_expected, text)
            self._last_correct = False
            return ReplyGrade(index=index, turn=None, grade=None)
        target, unknown = self._target()
        expected = apply_reply(api, before_expected, target)
        made = tuple(r for r in expected if r not in before_expected)  # what this turn adds or changes
        self._expected = tuple(with_unknown((r,), unknown)[0] if r in made else r for r in expected)
        turn = self.turns[self.turn - 1]
        raw = self.scenario.grade_turn(text, Turn(turn.user, target, turn.kind, tuple(sorted(unknown))))
        assert raw is not None
        findings = raw.findings
        if raw.label != "garbage":
            findings += self._state_findings(before_actual, before_expected)
        order = mistake_order(api)
        grade = raw if raw.label == "garbage" else build_grade(findings, call=raw.call, order=order,
                                                               assumptions=raw.assumptions)
        self._confirm(target, unknown)
        recurrence = self._recurrence(grade)
        matches = states_match(api, self._actual, self._expected)
        held = grade.is_correct and states_match(api, self._actual, before_actual)  # the state as it was
        self._last_correct = grade.is_correct
        return ReplyGrade(
            index=index, turn=self.turn, grade=grade, assumed=grade.assumed,
            fixed=grade.is_correct if self._answers_correction else None,
            regression=Mistake.REGRESSION in grade.mistakes, recurrence=recurrence,
            state_matches=matches,
            maintained=held if self._answers_false else None,
        )

    def _state_findings(self, before_actual: State, before_expected: State) -> tuple[Finding, ...]:
        api = self.scenario.api
        assert api is not None
        found: list[Finding] = []
        for want in before_expected:
            if want not in self._expected:
                continue  # this turn changes or removes it on purpose
            was_right = any(record_matches(api, got, want) for got in before_actual)
            if was_right and not any(record_matches(api, got, want) for got in self._actual):
                found.append(Finding(Mistake.REGRESSION, param="entry", expected=describe(api, want),
                                     detail=name_of(api, want)))
        conflicts = self.scenario.conflicts
        if conflicts is not None and conflicts(api, self._actual) > max(
                conflicts(api, before_actual), conflicts(api, self._expected)):
            found.append(Finding(Mistake.DOUBLE_BOOKING, param="entry"))
        return tuple(found)

    def _confirm(self, target: str, unknown: frozenset[str]) -> None:
        """Assumptions whose value the dialogue has now stated: a different value was a mistake made."""
        api = self.scenario.api
        if not self._pending or api is None:
            return
        stated = _stated_values(api, target)
        for key, got in list(self._pending.items()):
            name = "year" if key[0] == Mistake.WRONG_YEAR else key[1]
            if name in unknown or key not in stated:
                continue
            del self._pending[key]
            if stated[key] != got:
                self._made.add(key)

    def _recurrence(self, grade: Grade) -> bool:
        if grade.label == "garbage":
            return False
        for assumption in grade.assumptions:
            if assumption.got is not None:
                self._pending.setdefault((assumption.kind, assumption.param), assumption.got)
        keys = {(f.kind, f.param) for f in grade.findings}
        recurrence = bool(keys & self._cleared)
        self._cleared = (self._cleared | (self._made - keys)) - keys
        self._made |= keys
        return recurrence


def _stated_values(api: Any, target: str) -> dict[MistakeKey, str]:
    """What a known target says for each assumable value, as an assumption finding's ``got`` reads."""
    out: dict[MistakeKey, str] = {}
    for call in parse_target(api, target):
        for param in call.function.params:
            value = call.value(param.name)
            if isinstance(value, DateValue) and value.year is not None:
                out[(Mistake.WRONG_YEAR, param.name)] = str(value.year)
            elif value is not None:
                out[(param.value_mistake, param.name)] = literal(param, value).strip('"')
    return out


def grade_dialogue(scenario: Scenario, messages: Iterable[DialogueTurn],
                   script: Sequence[Turn] | None = None) -> list[ReplyGrade]:
    """One :class:`ReplyGrade` per reply, in order. Retried (superseded) replies should be left out.
    ``script``: the dialogue played (default: the scenario's reference dialogue)."""
    grader = DialogueGrader(scenario, tuple(script) if script is not None else None)
    out = []
    for message in messages:
        grade = grader.add(message)
        if grade is not None:
            out.append(grade)
    return out


def answered_turn(scenario: Scenario, messages: Iterable[DialogueTurn],
                  script: Sequence[Turn] | None = None) -> int | None:
    """The scripted turn the next reply answers, after ``messages`` (None: off-script or no script)."""
    grader = DialogueGrader(scenario, tuple(script) if script is not None else None)
    for message in messages:
        grader.add(message)
    return grader.turn
