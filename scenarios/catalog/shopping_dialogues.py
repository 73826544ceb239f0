"""Generated shopping-list dialogues: items, quantities, units and phrasings drawn from a seeded
``random.Random``.

Each dialogue is 4 to 7 turns against the list as it stands (the first one adds an item):

* an item added, its quantity said in digits or words ("6 eggs", "a dozen eggs", "half a kilo of flour",
  "two liters of milk", "a pack of butter"), in several phrasings ("Put ... on the list.", "I need ...",
  "We're out of eggs. Add a dozen."): ``shop.add_item(item, quantity, unit)``, the quantity in the unit
  the user says (no conversions);
* a new quantity for the last item ("Make it 3 instead.") or a named one ("Change the flour to 2 kilos."):
  the same add call with the new quantity (an add on an item already listed replaces it);
* a note on an item of the list ('Add a note to the milk: organic.'): ``shop.set_note(item, note)``;
* a removal ("Take the eggs off the list."): ``shop.remove_item(item)``, of an item on the list.

In about half of the dialogues, at a random position, the trap: an item in a container of unknown size
("Add a bottle of olive oil."; the turn ``assumes`` the quantity and the unit), then the correction that
states the size ("It's a 750 ml bottle."), drawn here so that no model can guess it; its expected reply is
the add call with that size. Item names never share a word within a dialogue ("milk" and "oat milk" are
not both on one list), so each request names one item. An item whose quantity could be read two ways
(the trap's container, an item with a note: an add replaces the note too) gets no new quantity.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace

from scenarios.base import Turn

NAMESPACE = "shop"
ADD = "add_item"
REMOVE = "remove_item"
NOTE = "set_note"
UNITS = ("piece", "g", "kg", "ml", "l", "pack")
TRAP_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class Kind:
    """An item as the list knows it: its name in calls, its singular (counted items) and its units."""

    name: str
    units: tuple[str, ...]
    one: str = ""  # the singular of a counted item ("egg"); its name is the plural


ITEMS: tuple[Kind, ...] = (
    Kind("eggs", ("piece",), "egg"), Kind("apples", ("piece", "kg"), "apple"),
    Kind("bananas", ("piece",), "banana"), Kind("lemons", ("piece",), "lemon"),
    Kind("limes", ("piece",), "lime"), Kind("onions", ("piece", "kg"), "onion"),
    Kind("avocados", ("piece",), "avocado"), Kind("cucumbers", ("piece",), "cucumber"),
    Kind("oranges", ("piece", "kg"), "orange"), Kind("bagels", ("piece",), "bagel"),
    Kind("croissants", ("piece",), "croissant"), Kind("red peppers", ("piece",), "red pepper"),
    Kind("carrots", ("piece", "kg"), "carrot"), Kind("pears", ("piece", "kg"), "pear"),
    Kind("kiwis", ("piece",), "kiwi"),
    Kind("flour", ("kg", "g")), Kind("sugar", ("kg", "g")), Kind("rice", ("kg", "g")),
    Kind("pasta", ("g", "kg", "pack")), Kind("cheese", ("g",)), Kind("ground coffee", ("g", "pack")),
    Kind("minced beef", ("g", "kg")), Kind("chicken breast", ("g", "kg")), Kind("butter", ("pack", "g")),
    Kind("oats", ("g", "kg")), Kind("grapes", ("g", "kg")), Kind("salmon", ("g",)), Kind("ham", ("g",)),
    Kind("milk", ("l", "ml")), Kind("orange juice", ("l", "ml")), Kind("cream", ("ml",)),
    Kind("sparkling water", ("l",)), Kind("coconut milk", ("ml",)), Kind("tea bags", ("pack",)),
    Kind("paper towels", ("pack",)), Kind("napkins", ("pack",)), Kind("crackers", ("pack",)),
    Kind("tortillas", ("pack",)), Kind("cookies", ("pack",)), Kind("toilet paper", ("pack",)),
    Kind("coffee filters", ("pack",)), Kind("spaghetti", ("pack", "g")),
)
# The trap: (item, container, the sizes it may have). The request says only the container.
TRAPS: tuple[tuple[str, str, tuple[tuple[float, str], ...]], ...] = (
    ("olive oil", "bottle", ((500, "ml"), (750, "ml"), (1, "l"))),
    ("red wine", "bottle", ((750, "ml"), (1.5, "l"))),
    ("apple juice", "carton", ((1, "l"), (1.5, "l"), (500, "ml"))),
    ("basmati rice", "bag", ((1, "kg"), (2, "kg"), (500, "g"))),
    ("brown sugar", "bag", ((1, "kg"), (500, "g"))),
    ("honey", "jar", ((250, "g"), (500, "g"))),
    ("yogurt", "tub", ((500, "g"), (1, "kg"), (150, "g"))),
    ("soy sauce", "bottle", ((150, "ml"), (250, "ml"), (500, "ml"))),
    ("cereal", "box", ((375, "g"), (500, "g"), (750, "g"))),
    ("coffee beans", "bag", ((250, "g"), (500, "g"), (1, "kg"))),
    ("mineral water", "bottle", ((500, "ml"), (1.5, "l"))),
    ("peanut butter", "jar", ((340, "g"), (500, "g"))),
)
NOTES = ("the cheapest brand", "only if on sale", "the usual brand", "the big pack", "any brand is fine")
FOOD_NOTES = (*NOTES, "organic", "for the cake", "check the date", "for Sunday lunch", "for grandma",
              "fair trade", "for the picnic")
NOT_FOOD = ("paper towels", "napkins", "toilet paper", "coffee filters")
WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine",
         10: "ten", 11: "eleven", 12: "twelve"}

ADD_PHRASES = ("Put {amount_item} on the list.", "I need {amount_item}.", "Add {amount_item}.",
               "Can you add {amount_item} to the shopping list?", "Please get {amount_item}.",
               "We're out of {name}. Add {amount}.")
TRAP_PHRASES = ("Add a {container} of {name}.", "Put a {container} of {name} on the list.",
                "I need a {container} of {name}.", "We're out of {name}. Add a {container}.")
SIZE_PHRASES = ("It's a {size} {container}.", "The {container} is {size}.", "I mean the {size} {container}.",
                "Sorry, a {size} {container}.")
CHANGE_LAST = ("Make it {amount} instead.", "Actually, make that {amount_item}.", "Change that to {amount}.")
CHANGE_NAMED = ("Change the {name} to {amount}.", "Actually, I need {amount_item}, not {old}.")
NOTE_PHRASES = ("Add a note to the {name}: {note}.", 'For the {name}, note "{note}".',
                "Put a note on the {name}: {note}.", "Note for the {name}: {note}.")
REMOVE_PHRASES = ("Take the {name} off the list.", "Remove the {name}.", "We don't need {name} anymore.",
                  "Scratch the {name} off the list.", "Forget the {name}, we have enough.")


@dataclass(frozen=True, slots=True)
class Amount:
    quantity: float
    unit: str


@dataclass(frozen=True, slots=True)
class Item:
    """An item on the list being written."""

    kind: Kind
    amount: Amount
    note: str = ""
    fixed: bool = False  # no new quantity: the trap's container, whose size was a correction

    @property
    def name(self) -> str:
        return self.kind.name

    def add_call(self) -> str:
        return add_call(self.name, self.amount)


def add_call(name: str, amount: Amount) -> str:
    return f'{NAMESPACE}.{ADD}("{name}", {amount.quantity:g}, "{amount.unit}")'


def remove_call(name: str) -> str:
    return f'{NAMESPACE}.{REMOVE}("{name}")'


def note_call(name: str, note: str) -> str:
    return f'{NAMESPACE}.{NOTE}("{name}", "{note}")'


# Amounts a person says, by unit: (quantity, ways of saying it). "{n}" is the quantity in digits.
_SAID: dict[str, tuple[tuple[float, tuple[str, ...]], ...]] = {
    "g": tuple((float(q), (f"{q} g", f"{q} grams")) for q in (100, 150, 200, 250, 300, 400, 500, 750)),
    "kg": ((0.5, ("half a kilo", "0.5 kg")), (1.0, ("a kilo", "one kilo", "1 kg")),
           (1.5, ("1.5 kg", "one and a half kilos")), (2.0, ("two kilos", "2 kg")),
           (3.0, ("three kilos", "3 kg"))),
    "ml": tuple((float(q), (f"{q} ml", f"{q} milliliters")) for q in (200, 250, 330, 400, 500)),
    "l": ((0.5, ("half a liter", "0.5 l")), (1.0, ("a liter", "one liter", "1 l")),
          (1.5, ("1.5 liters", "one and a half liters")), (2.0, ("two liters", "2 liters")),
          (3.0, ("three liters", "3 l"))),
}


def _said_count(rng: random.Random, kind: Kind, quantity: int) -> tuple[str, str]:
    """(the amount alone, the amount with the item) of a counted item: "a dozen", "a dozen eggs"."""
    if quantity == 12 and rng.random() < 0.5:
        words = "a dozen"
    elif quantity == 6 and rng.random() < 0.4:
        words = "half a dozen"
    elif quantity == 1:
        article = "an" if kind.one[0] in "aeiou" else "a"
        words = rng.choice((article, "one")) if rng.random() < 0.8 else "1"
        return ("one" if words != "1" else "1"), f"{words} {kind.one}"
    else:
        words = WORDS[quantity] if rng.random() < 0.5 else str(quantity)
    return words, f"{words} {kind.name}"


def _said_pack(rng: random.Random, kind: Kind, quantity: int) -> tuple[str, str]:
    if quantity == 1:
        words = rng.choice(("a pack", "one pack"))
    else:
        words = f"{WORDS[quantity] if rng.random() < 0.5 else quantity} packs"
    return words, f"{words} of {kind.name}"


def draw_amount(rng: random.Random, kind: Kind, unit: str, *, other_than: Amount | None = None
                ) -> tuple[Amount, str, str]:
    """An amount of ``kind`` in ``unit`` (not ``other_than``) and how it is said: alone, with the item."""
    if unit == "piece":
        quantities = [q for q in (1, 2, 3, 4, 5, 6, 6, 8, 10, 12, 12) if
                      other_than is None or Amount(float(q), unit) != other_than]
        count = rng.choice(quantities)
        alone, with_item = _said_count(rng, kind, count)
        return Amount(float(count), unit), alone, with_item
    if unit == "pack":
        counts = [q for q in (1, 1, 2, 3, 4) if other_than is None or Amount(float(q), unit) != other_than]
        count = rng.choice(counts)
        alone, with_item = _said_pack(rng, kind, count)
        return Amount(float(count), unit), alone, with_item
    options = [(q, said) for q, said in _SAID[unit] if other_than is None or Amount(q, unit) != other_than]
    quantity, said = rng.choice(options)
    words = rng.choice(said)
    return Amount(quantity, unit), words, f"{words} of {kind.name}"


def _spoken_size(rng: random.Random, amount: Amount) -> str:
    """A container's size as the user states it: "750 ml", "1.5 liter", "500 gram"."""
    number = f"{amount.quantity:g}"
    if amount.unit == "l":
        return f"{number} liter"
    if amount.unit == "g":
        return rng.choice((f"{number} g", f"{number} gram"))
    return f"{number} {amount.unit}"


def _words(name: str) -> list[str]:
    return [w[:-1] if len(w) > 3 and w.endswith("s") else w for w in name.lower().split()]


class _Dialogue:
    """A dialogue being written: the list so far and the turns."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.items: list[Item] = []
        self.turns: list[Turn] = []
        self.kinds = list(ITEMS)
        rng.shuffle(self.kinds)
        self.used_words: list[str] = []
        self.last: Item | None = None  # what "it" refers to: the item just added or changed

    def said(self, text: str) -> bool:
        return any(" ".join(t.user.lower().split()) == " ".join(text.lower().split()) for t in self.turns)

    def _free(self, name: str) -> bool:
        return not any(w in self.used_words for w in _words(name))

    def _take(self, name: str) -> None:
        self.used_words += _words(name)

    def _swap(self, old: Item, new: Item) -> None:
        self.items[self.items.index(old)] = new

    def add(self) -> bool:
        kind = next((k for k in self.kinds if self._free(k.name)), None)
        if kind is None:
            return False
        amount, alone, with_item = draw_amount(self.rng, kind, self.rng.choice(kind.units))
        phrase = self.rng.choice(ADD_PHRASES)
        text = phrase.format(amount_item=with_item, amount=alone, name=kind.name)
        if self.said(text):
            return False
        self.kinds.remove(kind)
        self._take(kind.name)
        item = Item(kind, amount)
        self.items.append(item)
        self.last = item
        self.turns.append(Turn(text, item.add_call()))
        return True

    def trap(self) -> bool:
        choices = [t for t in TRAPS if self._free(t[0])]
        if not choices:
            return False
        name, container, sizes = self.rng.choice(choices)
        quantity, unit = self.rng.choice(sizes)
        amount = Amount(float(quantity), unit)
        text = self.rng.choice(TRAP_PHRASES).format(container=container, name=name)
        size = _spoken_size(self.rng, amount)
        fix = self.rng.choice(SIZE_PHRASES).format(size=size, container=container)
        if self.said(text) or self.said(fix):
            return False
        self._take(name)
        item = Item(Kind(name, (unit,)), amount, fixed=True)
        self.items.append(item)
        self.last = None
        self.turns.append(Turn(text, item.add_call(), assumes=("quantity", "unit")))
        self.turns.append(Turn(fix, item.add_call(), kind="correction"))
        return True

    def change(self) -> bool:
        """A new quantity, for the last item ("it") or a named one; in the same unit family."""
        named = self.last is None or self.last.fixed or bool(self.last.note) or self.rng.random() < 0.4
        options = [i for i in self.items if not i.fixed and not i.note]
        if not options or (not named and self.last not in options):
            return False
        item = self.rng.choice(options) if named else self.last
        assert item is not None
        units = [u for u in item.kind.units if _family(u) == _family(item.amount.unit)]
        amount, alone, with_item = draw_amount(self.rng, item.kind, self.rng.choice(units),
                                               other_than=item.amount)
        if named:
            old = _said_again(item)
            text = self.rng.choice(CHANGE_NAMED).format(name=item.name, amount=alone, amount_item=with_item,
                                                        old=old)
        else:
            text = self.rng.choice(CHANGE_LAST).format(amount=alone, amount_item=with_item)
        if self.said(text):
            return False
        changed = replace(item, amount=amount)
        self._swap(item, changed)
        self.last = changed
        self.turns.append(Turn(text, changed.add_call()))
        return True

    def note(self) -> bool:
        options = [i for i in self.items if not i.note]
        if not options:
            return False
        item = self.rng.choice(options)
        notes = [n for n in (NOTES if item.name in NOT_FOOD else FOOD_NOTES)
                 if all(i.note != n for i in self.items)]
        if not notes:
            return False
        note = self.rng.choice(notes)
        text = self.rng.choice(NOTE_PHRASES).format(name=item.name, note=note)
        if self.said(text):
            return False
        self._swap(item, replace(item, note=note))
        self.last = None  # "make it 3" after a note would be read two ways
        self.turns.append(Turn(text, note_call(item.name, note)))
        return True

    def remove(self) -> bool:
        if len(self.items) < 2:
            return False
        item = self.rng.choice(self.items)
        text = self.rng.choice(REMOVE_PHRASES).format(name=item.name)
        if self.said(text):
            return False
        self.items.remove(item)
        self.last = None
        self.turns.append(Turn(text, remove_call(item.name)))
        return True


def _family(unit: str) -> str:
    return {"g": "weight", "kg": "weight", "ml": "volume", "l": "volume"}.get(unit, unit)


def _said_again(item: Item) -> str:
    """The current amount in digits, as "not ..." says it: "12", "500 g", "2 packs"."""
    number = f"{item.amount.quantity:g}"
    if item.amount.unit == "piece":
        return number
    if item.amount.unit == "pack":
        return f"{number} pack{'s' if item.amount.quantity != 1 else ''}"
    return f"{number} {item.amount.unit}"


def generate(rng: random.Random) -> tuple[Turn, ...]:
    """One shopping-list dialogue of 4 to 7 turns (the trap and its correction count as two)."""
    dialogue = _Dialogue(rng)
    length = rng.randint(4, 7)
    trap_at = rng.randrange(length - 1) if rng.random() < TRAP_SHARE else -1
    steps: tuple[tuple[Callable[[], bool], float], ...] = (
        (dialogue.add, 0.4), (dialogue.change, 0.2), (dialogue.note, 0.2), (dialogue.remove, 0.2))
    tries = 0
    while len(dialogue.turns) < length and tries < 60:
        tries += 1
        if len(dialogue.turns) == trap_at:
            if dialogue.trap():
                continue
            trap_at = -1
        if not dialogue.turns:
            dialogue.add()
            continue
        step = rng.choices([s for s, _ in steps], weights=[w for _, w in steps])[0]
        step()
    return tuple(dialogue.turns)
