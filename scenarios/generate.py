"""Seeded dialogues: many different dialogues of one scenario, each with the reply every turn expects.

A scenario's generator (``Scenario.generator``) writes the requests of one dialogue from a
``random.Random``; this module seeds it, checks what it wrote (every expected reply is a clean line of
API calls, no user text repeats), and adds a false correction to a share of the dialogues. Dialogue
``i`` of seed ``K`` is the same whatever the count asked for: its generator is seeded with
``"<slug>/<K>/<i>"``.

**False corrections** (FB-Bench's response maintenance): after a request whose reply is one call, the
user claims a mistake that the API itself contradicts: "You forgot the duration." when the expected call
gives one; "Dates must be DD/MM/YYYY." when the API says YYYY-MM-DD; "That's the wrong function." when it
is the right one. Such a claim never changes what the user wants: the expected reply keeps the state as
it was (the same call again, or nothing new). In messages it is sent with kind ``correction``, as a
person would mark it; the dialogue says which turns are false (``kind: false_correction``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scenarios.api import Api
from scenarios.base import TURN_KINDS, Scenario, ScenarioError, Turn, TurnKind
from scenarios.grader import parse_target

_WORD = re.compile(r"[a-z0-9]+")  # as the dialogue grader compares a message with a turn
DEFAULT_FALSE_SHARE = 0.2
MAX_DIALOGUES = 100_000


@dataclass(frozen=True, slots=True)
class Dialogue:
    """One dialogue of a scenario: its id, the seed that made it (None: the study's script), and turns."""

    id: str
    scenario: str
    seed: int | None
    system_prompt: str
    turns: tuple[Turn, ...]

    @property
    def false_turns(self) -> tuple[int, ...]:
        """The 1-based numbers of the false-correction turns."""
        return tuple(n for n, t in enumerate(self.turns, start=1) if t.is_false_correction)

    def as_json(self) -> dict[str, Any]:
        """``{"id", "scenario", "seed", "system_prompt", "turns": [{"user", "kind", "expected"}]}``; a turn
        whose request leaves values unsaid also carries ``"assumes"``."""
        turns: list[dict[str, Any]] = []
        for turn in self.turns:
            item: dict[str, Any] = {"user": turn.user, "kind": turn.kind, "expected": turn.expected}
            if turn.assumes:
                item["assumes"] = list(turn.assumes)
            turns.append(item)
        return {"id": self.id, "scenario": self.scenario, "seed": self.seed,
                "system_prompt": self.system_prompt, "turns": turns}

    @classmethod
    def from_json(cls, item: object, scenario: Scenario) -> Dialogue:
        """A dialogue exactly as ``generate`` printed it, checked against ``scenario``; ValueError saying
        what is wrong (another scenario's dialogue, a turn that is not an object, an expected reply that
        is not a line of this scenario's API calls)."""
        if not isinstance(item, Mapping):
            raise ValueError("the dialogue must be a JSON object")
        missing = [k for k in ("id", "scenario", "turns") if k not in item]
        if missing:
            raise ValueError(f"the dialogue lacks {', '.join(missing)}")
        if item["scenario"] != scenario.slug:
            raise ValueError(f"the dialogue is of scenario {item['scenario']!r}, not {scenario.slug!r}")
        seed = item.get("seed")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise ValueError("seed must be an integer or null")
        raw_turns = item["turns"]
        if not isinstance(raw_turns, list) or not raw_turns:
            raise ValueError("turns must be a non-empty list")
        turns = tuple(_turn(number, raw, scenario) for number, raw in enumerate(raw_turns, start=1))
        prompt = item.get("system_prompt", scenario.system_prompt)
        if not isinstance(prompt, str):
            raise ValueError("system_prompt must be a string")
        return cls(id=str(item["id"]), scenario=scenario.slug, seed=seed, system_prompt=prompt, turns=turns)


def _turn(number: int, raw: object, scenario: Scenario) -> Turn:
    if not isinstance(raw, Mapping):
        raise ValueError(f"turn {number} is not an object")
    user, kind, expected = raw.get("user"), raw.get("kind"), raw.get("expected")
    assumes = raw.get("assumes", [])
    if not isinstance(user, str) or not user.strip():
        raise ValueError(f"turn {number}: user must be a non-empty string")
    if kind not in TURN_KINDS:
        raise ValueError(f"turn {number}: kind must be one of {', '.join(TURN_KINDS)}, got {kind!r}")
    if not isinstance(expected, str):
        raise ValueError(f"turn {number}: expected must be a string")
    if not isinstance(assumes, list) or not all(isinstance(a, str) for a in assumes):
        raise ValueError(f"turn {number}: assumes must be a list of names")
    assert scenario.api is not None
    try:
        parse_target(scenario.api, expected)
    except ValueError as exc:
        raise ValueError(f"turn {number}: expected is not a line of {scenario.slug} API calls "
                         f"({exc})") from None
    return Turn(user=user, expected=expected, kind=kind, assumes=tuple(assumes))


def study_dialogue(scenario: Scenario) -> Dialogue:
    """The scenario's reference dialogue (the study's verbatim script for the calendar)."""
    if not scenario.turns:
        raise ScenarioError(f"scenario {scenario.slug!r} has no reference dialogue")
    return Dialogue(id=f"{scenario.slug}-study", scenario=scenario.slug, seed=None,
                    system_prompt=scenario.system_prompt, turns=scenario.turns)


def generate_dialogues(scenario: Scenario, *, count: int, seed: int,
                       false_share: float = DEFAULT_FALSE_SHARE, start: int = 0) -> list[Dialogue]:
    """Dialogues ``start`` .. ``start + count - 1`` of ``seed``; ScenarioError for a scenario without a
    generator or a count out of range, ValueError for a share outside [0, 1]."""
    if scenario.generator is None or scenario.api is None:
        raise ScenarioError(f"scenario {scenario.slug!r} has no dialogue generator")
    if not 1 <= count <= MAX_DIALOGUES:
        raise ScenarioError(f"the number of dialogues must be between 1 and {MAX_DIALOGUES}, got {count}")
    if not 0.0 <= false_share <= 1.0:
        raise ValueError(f"the share of false corrections must be between 0 and 1, got {false_share}")
    return [_one(scenario, seed, index, false_share) for index in range(start, start + count)]


def _one(scenario: Scenario, seed: int, index: int, false_share: float) -> Dialogue:
    assert scenario.generator is not None and scenario.api is not None
    rng = random.Random(f"{scenario.slug}/{seed}/{index}")
    turns = list(scenario.generator(rng))
    if rng.random() < false_share:
        _add_false_correction(scenario.api, turns, rng)
    _check(scenario, turns)
    return Dialogue(id=f"{scenario.slug}-{seed}-{index:05d}", scenario=scenario.slug, seed=seed,
                    system_prompt=scenario.system_prompt, turns=tuple(turns))


def _check(scenario: Scenario, turns: list[Turn]) -> None:
    """A generator bug is loud: every expected reply parses, and no user text repeats (the grader finds
    a turn by its text)."""
    assert scenario.api is not None
    seen: set[tuple[str, ...]] = set()
    for turn in turns:
        parse_target(scenario.api, turn.expected)
        key = tuple(_WORD.findall(turn.user.lower()))
        if key in seen:
            raise AssertionError(f"{scenario.slug}: the generator repeated the turn {turn.user!r}")
        seen.add(key)


def _add_false_correction(api: Api, turns: list[Turn], rng: random.Random) -> None:
    """Insert one false correction after a request whose expected reply is one call (never a trap)."""
    candidates = [i for i, t in enumerate(turns)
                  if t.kind == "request" and not t.assumes and len(parse_target(api, t.expected)) == 1
                  and (i + 1 == len(turns) or turns[i + 1].kind == "request")]
    if not candidates:
        return
    at = rng.choice(candidates)
    claims = false_claims(api, turns[at])
    used = {tuple(_WORD.findall(t.user.lower())) for t in turns}
    claims = [c for c in claims if tuple(_WORD.findall(c.lower())) not in used]
    if claims:
        kind: TurnKind = "false_correction"
        turns.insert(at + 1, Turn(user=rng.choice(claims), expected=turns[at].expected, kind=kind))


_FORMAT_CLAIMS: dict[str, str] = {
    "date": "Dates must be DD/MM/YYYY.",
    "time": "Times must be written like 5:00 PM.",
    "minutes": "The {name} must be given in hours, not minutes.",
    "number": "Write the {name} in words, not as a number.",
    "bool": 'Use "on" and "off", not True and False.',
}


def false_claims(api: Api, turn: Turn) -> list[str]:
    """Claims the API or the expected call contradicts, for the reply ``turn`` expects."""
    (target,) = parse_target(api, turn.expected)
    claims = ["That's the wrong function."]
    for param in target.function.params:
        if param.name not in target.values:
            continue
        claims.append(f"You forgot the {param.name}.")  # the expected call gives it
        claim = _FORMAT_CLAIMS.get(param.type)
        if claim is not None:
            claims.append(claim.format(name=param.name))
    if len(target.function.params) > 1:
        claims.append(f"{target.function.name} takes only one parameter.")
    return claims


# --- a battle's dialogue (the web arena) -----------------------------------------------------------------


def draw_dialogue(scenario: Scenario, *, seed: int) -> Dialogue | None:
    """The dialogue a new battle plays: dialogue 0 of ``seed`` (None for a scenario without a
    generator, which plays its reference dialogue)."""
    if scenario.generator is None or scenario.api is None:
        return None
    return generate_dialogues(scenario, count=1, seed=seed)[0]


def stored_form(dialogue: Dialogue) -> dict[str, Any]:
    """What a battle stores: the dialogue as ``generate`` prints it, without the system prompt (each side's
    conversation holds that)."""
    return {k: v for k, v in dialogue.as_json().items() if k != "system_prompt"}


def battle_script(scenario: Scenario, stored: Mapping[str, Any] | None) -> tuple[Turn, ...]:
    """The turns a battle plays: its stored dialogue's, else the scenario's reference dialogue."""
    if stored is None:
        return scenario.turns
    return Dialogue.from_json({**stored, "system_prompt": scenario.system_prompt}, scenario).turns


def next_turn(script: Sequence[Turn], sent: Sequence[str]) -> tuple[int, Turn] | None:
    """The next scripted turn after the user messages ``sent`` (matched by text, as the grader does), or
    None once every turn has been sent."""
    from scenarios.dialogue import match_turn

    reached = 0
    for text in sent:
        number = match_turn(script, text)
        if number is not None:
            reached = max(reached, number)
    return (reached + 1, script[reached]) if reached < len(script) else None
