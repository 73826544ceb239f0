"""The shopping-list scenario: add, remove and annotate the items of a list, by voice.

The trap: an item in a container of unknown size ("Add a bottle of olive oil."); any quantity and unit
are accepted and recorded as assumptions, and the next turn states the size ("It's a 750 ml bottle."):
the fixed reply is the same add call with it. Generated dialogues: ``shopping_dialogues``.
"""

from __future__ import annotations

from scenarios.api import Api, Effect, Function, Param
from scenarios.base import Scenario, Turn
from scenarios.catalog.shopping_dialogues import ADD, NAMESPACE, NOTE, REMOVE, UNITS, generate
from scenarios.corrections import Phrasebook

_UNIT_LIST = ", ".join(f'"{u}"' for u in UNITS)

SYSTEM_PROMPT = (
    "You are a helpful vocal assistant on a mobile device. Your job is to translate user requests about "
    "their shopping list into API calls using this Python API:\n"
    "```\n"
    f"{NAMESPACE}.{ADD}(item, quantity, unit) # adds the item, or gives one on the list a new quantity\n"
    f"{NAMESPACE}.{REMOVE}(item)\n"
    f"{NAMESPACE}.{NOTE}(item, note) # a note on an item of the list\n"
    "```\n"
    f"The unit is one of {_UNIT_LIST} (\"piece\" for things you count). Write the quantity as a number, "
    "in the unit the user says. Respond to every request with a single line of executable code."
)

_ITEMS = "items"
API = Api(
    namespace=NAMESPACE,
    functions=(
        Function(ADD, (Param("item", "text"), Param("quantity", "number"),
                       Param("unit", "choice", choices=UNITS)),
                 Effect("upsert", _ITEMS, ("item",)),
                 doc="adds an item; the same item again gets the new quantity and unit (its note stays)"),
        Function(REMOVE, (Param("item", "text"),), Effect("delete", _ITEMS, ("item",)),
                 doc="takes the item off the list"),
        Function(NOTE, (Param("item", "text"), Param("note", "text")), Effect("update", _ITEMS, ("item",)),
                 doc="sets the note of an item on the list"),
    ),
    aliases={
        "name": "item", "product": "item", "item_name": "item", "amount": "quantity", "qty": "quantity",
        "count": "quantity", "units": "unit", "measure": "unit", "text": "note", "comment": "note",
        "notes": "note",
    },
)

PHRASES = Phrasebook(
    hints={
        "bad_format:quantity": "The quantity must be a number.",
        "bad_format:unit": f"The unit must be one of {', '.join(UNITS)}.",
        "bad_format:item": "The item must be a quoted string.",
        "bad_format:note": "The note must be a quoted string.",
        "missing_argument:unit": f"The unit is required: one of {', '.join(UNITS)}.",
        "wrong_item": "That's the wrong item.",
        "wrong_quantity": "Wrong quantity.",
        "wrong_unit": "Wrong unit.",
        "wrong_note": "Wrong note.",
    },
    fixes={
        "wrong_item": 'The item is "{value}".',
        "wrong_quantity": "The quantity is {value}.",
        "wrong_unit": "The unit is {value}.",
        "wrong_note": 'The note is "{value}".',
        f"wrong_function@{ADD}": f"Use {ADD}: it also changes the quantity of an item already on the list.",
        f"wrong_function@{REMOVE}": f"Use {REMOVE} to take it off the list.",
        f"wrong_function@{NOTE}": f"Use {NOTE} for a note.",
    },
)

TURNS = (
    Turn(user="Put two liters of milk on the list.", expected='shop.add_item("milk", 2, "l")'),
    Turn(user="Add a bottle of olive oil.", expected='shop.add_item("olive oil", 750, "ml")',
         assumes=("quantity", "unit")),
    Turn(user="It's a 750 ml bottle.", expected='shop.add_item("olive oil", 750, "ml")', kind="correction"),
    Turn(user="I need a dozen eggs.", expected='shop.add_item("eggs", 12, "piece")'),
    Turn(user="Add a note to the eggs: free range.", expected='shop.set_note("eggs", "free range")'),
    Turn(user="Take the milk off the list.", expected='shop.remove_item("milk")'),
)

SHOPPING = Scenario(
    slug="shopping-list",
    title="Shopping list API calls",
    system_prompt=SYSTEM_PROMPT,
    turns=TURNS,
    description="Turn spoken requests into shopping-list API calls; one bottle's size is said only later.",
    api=API,
    phrases=PHRASES,
    generator=generate,
)
