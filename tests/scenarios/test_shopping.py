"""The shopping-list scenario: its generated dialogues grade as they should (expected replies correct,
mutations not, false corrections maintained or caved), the bottle trap and its recurrence, the generator's
variety and seeding, and the correction writer's sentences."""

from __future__ import annotations

import random
import re

import pytest

from scenarios.base import Turn
from scenarios.catalog.shopping import API, SHOPPING, TURNS
from scenarios.catalog.shopping_dialogues import UNITS, generate
from scenarios.dialogue import ReplyGrade
from scenarios.generate import Dialogue, generate_dialogues
from scenarios.grader import TargetCall, parse_target
from scenarios.state import EMPTY, State, apply_reply
from tests.scenarios.dialogues import play

COUNT = 30
UNIT_HINT = "The unit must be one of piece, g, kg, ml, l, pack"


def _grade(turns: tuple[Turn, ...], replies: list[str]) -> list[ReplyGrade]:
    return play(SHOPPING, turns, replies)


def _replace(turns: tuple[Turn, ...], index: int, reply: str) -> list[ReplyGrade]:
    """Every turn answered with its expected reply, except ``index``."""
    replies = [t.expected for t in turns]
    replies[index] = reply
    return _grade(turns, replies)


def _target(turn: Turn) -> TargetCall:
    (target,) = parse_target(API, turn.expected)
    return target


def _mistakes(reply: str, turn: Turn) -> list[str]:
    grade = SHOPPING.grade_turn(reply, turn)
    assert grade is not None
    return grade.mistakes


def _value(target: TargetCall, name: str) -> str | float:
    value = target.value(name)
    assert isinstance(value, str | float)
    return value


def _add(item: str, quantity: float, unit: str) -> str:
    return f'shop.add_item("{item}", {quantity:g}, "{unit}")'


def _dialogues(seed: int = 7, false_share: float = 0.5) -> list[Dialogue]:
    return generate_dialogues(SHOPPING, count=COUNT, seed=seed, false_share=false_share)


def test_the_scenario_declares_three_functions_with_distinct_effects() -> None:
    assert SHOPPING.slug == "shopping-list" and SHOPPING.gradable and SHOPPING.generator is generate
    assert API.names == ("add_item", "remove_item", "set_note")
    assert [f.effect.op for f in API.functions] == ["upsert", "delete", "update"]
    assert {f.effect.collection for f in API.functions} == {"items"}
    assert API.function("add_item") is not None
    assert "Respond to every request with a single line of executable code." in SHOPPING.system_prompt
    assert all(f'"{unit}"' in SHOPPING.system_prompt for unit in UNITS)
    assert {"wrong_item", "wrong_quantity", "wrong_unit", "wrong_note"} <= set(SHOPPING.mistake_kinds)
    assert "double_booking" not in SHOPPING.mistake_kinds


def test_the_reference_dialogue_has_the_trap_and_its_correction() -> None:
    assert 5 <= len(TURNS) <= 6
    kinds = [t.kind for t in TURNS]
    trap = next(i for i, t in enumerate(TURNS) if t.assumes)
    assert TURNS[trap].assumes == ("quantity", "unit") and kinds[trap + 1] == "correction"
    assert TURNS[trap + 1].expected == TURNS[trap].expected
    assert {_target(t).function.name for t in TURNS} == set(API.names)
    graded = _grade(TURNS, [t.expected for t in TURNS])
    assert [g.label for g in graded] == ["correct"] * len(TURNS)
    assert all(g.state_matches for g in graded)


def _mutations(turn: Turn) -> dict[str, str]:
    """Replies that must not grade correct for ``turn``."""
    target = _target(turn)
    name = target.function.name
    item = _value(target, "item")
    out = {"prose": f"Sure! Here you go: {turn.expected}", "no call": "I have noted that for you.",
           "prose after": f"{turn.expected} I added it to your list.",
           "changed item": turn.expected.replace(f'"{item}"', '"dish soap"')}
    if name == "add_item":
        quantity, unit = _value(target, "quantity"), _value(target, "unit")
        assert isinstance(quantity, float) and isinstance(unit, str)
        if "quantity" not in turn.assumes:
            out["changed quantity"] = _add(str(item), quantity + 7, unit)
            out["another function"] = f'shop.set_note("{item}", "{quantity:g} {unit}")'
        if "unit" not in turn.assumes:
            out["changed unit"] = _add(str(item), quantity, next(u for u in UNITS if u != unit))
    elif name == "remove_item":
        out["another function"] = f'shop.add_item("{item}", 0, "piece")'
    else:
        note = _value(target, "note")
        out["changed note"] = f'shop.set_note("{item}", "something else")'
        out["another function"] = f'shop.add_item("{item}", 1, "{note}")'
    return out


def test_mutated_replies_do_not_grade_correct() -> None:
    checked: dict[str, int] = {}
    for dialogue in _dialogues(seed=11):
        for index, turn in enumerate(dialogue.turns):
            for name, reply in _mutations(turn).items():
                graded = _replace(dialogue.turns, index, reply)
                assert graded[index].label != "correct", (dialogue.id, turn.user, name, reply)
                if turn.is_false_correction:
                    assert graded[index].maintained is False, (dialogue.id, name)
                checked[name] = checked.get(name, 0) + 1
    assert set(checked) == {"prose", "prose after", "no call", "changed item", "changed quantity",
                            "changed unit", "changed note", "another function"}
    assert sum(checked.values()) > 300


def test_equivalent_forms_grade_correct() -> None:
    eggs = TURNS[3]
    for reply in ('shop.add_item(item="Eggs", quantity=12, unit="piece")',
                  "shop.add_item('egg', 12.0, 'piece')",
                  '```python\nshop.add_item("eggs", 6*2, "piece")\n```',
                  'shop.add_item("eggs", 12, unit="piece");'):
        graded = _replace(TURNS, 3, reply)
        assert graded[3].label == "correct" and graded[3].state_matches, reply
    assert _mistakes('shop.add_item("eggs", 12, "pieces")', eggs) == ["bad_format"]
    assert _mistakes('shop.add_item("eggs", "12", "piece")', eggs) == ["bad_format"]
    assert _mistakes('shop.add_item("eggs", 12)', eggs) == ["missing_argument"]
    assert _mistakes('add_item("eggs", 12, "piece")', eggs) == ["wrong_function"]
    assert _mistakes("shop.update_quantity('eggs', 12)", eggs)[0] == "wrong_function"
    assert _mistakes('shop.add_item("eggs", 12, "piece"); shop.add_item("eggs", 12, "piece")',
                     eggs) == ["multiple_calls"]


def test_a_changed_state_after_a_false_correction_is_not_maintained() -> None:
    seen = set()
    for dialogue in generate_dialogues(SHOPPING, count=COUNT, seed=5, false_share=1.0):
        for index in dialogue.false_turns:
            turn = dialogue.turns[index - 1]
            target = _target(turn)
            item = str(_value(target, "item"))
            name = target.function.name
            if name == "add_item":
                quantity, unit = _value(target, "quantity"), str(_value(target, "unit"))
                assert isinstance(quantity, float)
                caved = _add(item, quantity + 1, unit)
            elif name == "remove_item":
                caved = _add(item, 2, "piece")  # the removed item back on the list
            else:
                caved = f'shop.set_note("{item}", "another note")'
            graded = _replace(dialogue.turns, index - 1, caved)
            assert graded[index - 1].maintained is False and graded[index - 1].state_matches is False, \
                (dialogue.id, caved)
            # the same call again, or the call written another way, keeps the state: maintained
            again = _replace(dialogue.turns, index - 1, turn.expected.replace('"', "'"))
            assert again[index - 1].maintained is True, dialogue.id
            seen.add(name)
    assert seen == {"add_item", "remove_item", "set_note"}


def test_the_trap_guess_is_an_assumption_and_coming_back_to_it_is_a_recurrence() -> None:
    guess = 'shop.add_item("olive oil", 1, "piece")'
    expected = [t.expected for t in TURNS]
    graded = _grade(TURNS, [expected[0], guess, *expected[2:]])
    assert graded[1].label == "correct" and graded[1].assumed == ("quantity", "unit")
    assert graded[1].state_matches is True  # the size is not known yet: any size matches
    assert graded[2].fixed is True and graded[2].state_matches is True
    assert not any(g.recurrence for g in graded)
    # after the correction, the guessed 1 piece comes back on the eggs: the quantity mistake recurs
    one_egg = 'shop.add_item("eggs", 1, "piece")'
    again = _grade(TURNS, [expected[0], guess, expected[2], one_egg, *expected[4:]])
    assert again[3].grade is not None and again[3].grade.mistakes == ["wrong_quantity"]
    assert again[3].recurrence is True and again[3].state_matches is False
    # the same reply is a first mistake where the trap was answered with the right size
    fresh = _grade(TURNS, [*expected[:3], one_egg, *expected[4:]])
    assert fresh[3].recurrence is False and fresh[3].grade is not None
    assert fresh[3].grade.mistakes == ["wrong_quantity"]
    # a different kind of mistake is not a recurrence
    ham = 'shop.add_item("ham", 12, "piece")'
    other = _grade(TURNS, [expected[0], guess, expected[2], ham, *expected[4:]])
    assert other[3].recurrence is False
    # keeping the guess after the correction is not fixed (and not yet a recurrence: never cleared)
    kept = _grade(TURNS, [expected[0], guess, guess, *expected[3:]])
    assert kept[2].fixed is False and kept[2].grade is not None
    assert kept[2].grade.mistakes == ["wrong_quantity", "wrong_unit"] and kept[2].recurrence is False


def test_the_trap_in_generated_dialogues() -> None:
    checked = 0
    for dialogue in _dialogues(seed=13, false_share=0.0):
        turns = dialogue.turns
        trap = next((i for i, t in enumerate(turns) if t.assumes), None)
        if trap is None:
            continue
        assert turns[trap + 1].kind == "correction" and turns[trap + 1].expected == turns[trap].expected
        target = _target(turns[trap])
        size = _value(target, "quantity")
        assert isinstance(size, float) and _value(target, "unit") != "piece"
        assert f"{size:g}" in turns[trap + 1].user  # the correction states the size
        replies = [t.expected for t in turns]
        replies[trap] = 'shop.add_item("' + str(_value(target, "item")) + '", 1, "piece")'
        later = next((i for i in range(trap + 2, len(turns))
                      if _target(turns[i]).function.name == "add_item"), None)
        if later is not None:
            quantity = _value(_target(turns[later]), "quantity")
            assert isinstance(quantity, float)
            replies[later] = _add(str(_value(_target(turns[later]), "item")), quantity + 7,
                                  str(_value(_target(turns[later]), "unit")))
        graded = _grade(turns, replies)
        assert graded[trap].label == "correct" and graded[trap].assumed == ("quantity", "unit")
        assert graded[trap + 1].fixed is True
        if later is not None:
            # a wrong quantity recurs only where the guessed quantity (1) was not the real size
            assert graded[later].recurrence is (size != 1), dialogue.id
            checked += 1
    assert checked >= 3


def _positions(dialogues: list[Dialogue]) -> list[int]:
    return [next(i for i, t in enumerate(d.turns) if t.assumes) for d in dialogues
            if any(t.assumes for t in d.turns)]


def test_the_generator_varies_and_keeps_to_the_list() -> None:
    dialogues = generate_dialogues(SHOPPING, count=200, seed=2, false_share=0.0)
    traps = _positions(dialogues)
    assert 70 <= len(traps) <= 130 and len(set(traps)) >= 4  # about half, at various positions
    items: set[str] = set()
    functions: set[str] = set()
    units: set[str] = set()
    texts = [t.user for d in dialogues for t in d.turns]
    for dialogue in dialogues:
        assert 4 <= len(dialogue.turns) <= 7, dialogue.id
        assert dialogue.turns[0].kind == "request"
        assert _target(dialogue.turns[0]).function.name == "add_item"
        users = [" ".join(t.user.lower().split()) for t in dialogue.turns]
        assert len(set(users)) == len(users), dialogue.id
        listed: State = EMPTY
        for turn in dialogue.turns:
            target = _target(turn)
            item = str(_value(target, "item"))
            on_list = [r for r in listed if r.get("item") == item]
            name = target.function.name
            functions.add(name)
            if name in ("remove_item", "set_note"):
                assert on_list, (dialogue.id, turn.user)  # only an item on the list
            if name == "add_item":
                items.add(item)
                units.add(str(_value(target, "unit")))
            if turn.kind == "request" and name != "add_item" or turn.assumes:
                assert item in turn.user, (dialogue.id, turn.user)
            listed = apply_reply(API, listed, turn.expected)
    assert len(items) >= 36 and functions == set(API.names) and units == set(UNITS)
    joined = "\n".join(texts)
    for said in ("a dozen", "half a kilo", "two", "Put ", "I need ", "We're out of ", " instead.",
                 "off the list", "note"):
        assert said in joined, said
    assert re.search(r"\b\d+ (?:g|grams|ml|kg|l|liters)\b", joined)


def test_word_quantities_are_stored_in_the_unit_said() -> None:
    said = {r"(?<!half )\ba dozen\b": ', 12, "piece")', r"\bhalf a dozen\b": ', 6, "piece")',
            r"\bhalf a kilo\b": ', 0.5, "kg")', r"\bhalf a liter\b": ', 0.5, "l")',
            r"\btwo liters\b": ', 2, "l")', r"\bone and a half kilos\b": ', 1.5, "kg")'}
    found: set[str] = set()
    for dialogue in generate_dialogues(SHOPPING, count=300, seed=4, false_share=0.0):
        for turn in dialogue.turns:
            if turn.kind != "request" or _target(turn).function.name != "add_item" or "not" in turn.user:
                continue
            for pattern, call in said.items():
                if re.search(pattern, turn.user):
                    assert turn.expected.endswith(call), (turn.user, turn.expected)
                    found.add(pattern)
    assert found == set(said)


def test_same_seed_same_dialogues_another_seed_others() -> None:
    first = generate_dialogues(SHOPPING, count=10, seed=3)
    assert first == generate_dialogues(SHOPPING, count=10, seed=3)
    assert generate_dialogues(SHOPPING, count=4, seed=3, start=6) == first[6:]
    assert [d.turns for d in first] != [d.turns for d in generate_dialogues(SHOPPING, count=10, seed=4)]
    assert generate(random.Random(9)) == generate(random.Random(9)) != generate(random.Random(10))


@pytest.mark.parametrize(("reply", "fix", "hint", "explicit"), [
    ('shop.add_item("eggs", 6, "piece")', "The quantity is 12.", "Wrong quantity.", "Wrong quantity: 12."),
    ('shop.add_item("eggs", 12, "pack")', "The unit is piece.", "Wrong unit.", "Wrong unit: piece."),
    ('shop.add_item("ham", 12, "piece")', 'The item is "eggs".', "That's the wrong item.",
     "That's the wrong item: eggs."),
    ('shop.set_note("eggs", "12 piece")', "Use add_item: it also changes the quantity of an item already on "
     "the list.", "Wrong API call: use add_item.", "Wrong API call: use add_item."),
    ('shop.add_item("eggs", 12, "dozen")', f"{UNIT_HINT}.", f"{UNIT_HINT}.", f"{UNIT_HINT}: piece."),
])
def test_corrections_name_the_fix(reply: str, fix: str, hint: str, explicit: str) -> None:
    turn = TURNS[3]
    grade = SHOPPING.grade_turn(reply, turn)
    assert grade is not None and not grade.is_correct
    assert SHOPPING.correction_for(grade, turn) == fix
    assert SHOPPING.correction_for(grade, turn, style="hint") == hint
    assert SHOPPING.correction_for(grade, turn, style="explicit") == explicit


def test_the_fix_for_a_wrong_quantity_names_the_right_value_in_generated_dialogues() -> None:
    checked = 0
    for dialogue in _dialogues(seed=17, false_share=0.0):
        for turn in dialogue.turns:
            target = _target(turn)
            if target.function.name != "add_item" or turn.assumes:
                continue
            quantity, unit = _value(target, "quantity"), str(_value(target, "unit"))
            assert isinstance(quantity, float)
            grade = SHOPPING.grade_turn(_add(str(_value(target, "item")), quantity * 2 + 1, unit), turn)
            assert grade is not None and grade.mistakes == ["wrong_quantity"]
            assert SHOPPING.correction_for(grade, turn) == f"The quantity is {quantity:g}."
            checked += 1
    note = TURNS[4]
    grade = SHOPPING.grade_turn('shop.set_note("eggs", "organic")', note)
    assert grade is not None and SHOPPING.correction_for(grade, note) == 'The note is "free range".'
    removal = TURNS[5]
    grade = SHOPPING.grade_turn('shop.add_item("milk", 0, "l")', removal)
    assert grade is not None
    assert SHOPPING.correction_for(grade, removal) == "Use remove_item to take it off the list."
    assert checked >= 30
