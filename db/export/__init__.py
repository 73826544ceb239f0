"""The dataset export (``python -m db export``; the web app's Dataset page).

One package, layered one way: ``filters`` (what is selected), ``schema`` (Arrow schemas) and
``categories`` (error texts to a closed set of categories) at the bottom; ``read`` (keyset pages of the
dialogues) and ``pairwise`` (the ``battles`` view) read the database; ``records`` shapes pages
(``replay``: the replay view's); ``writers`` and ``card`` write; ``core`` runs an export to files or
bytes. The command line (``commands/db_export.py``) and the benchmark (``bench/db_export.py``) live
outside ``db``.

What is selected is a :class:`db.VoteFilters`, the one filter value of ``db`` (``EXPORT_DEFAULTS`` when none
is given: every closed battle of every mode, flagged ones kept). The names below are the export's public
surface, loaded on first use (PEP 562): ``from db.export import error_category`` (the web app's reply
path) does not load Arrow, the readers or the writers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from db.export.categories import ERROR_CATEGORIES, error_category

if TYPE_CHECKING:
    from db.export.card import DEFAULT_LICENCE, card_body, render_card
    from db.export.core import (
        DEFAULT_VIEW,
        FORMATS,
        VIEWS,
        ExportBlob,
        ExportCounts,
        ExportResult,
        export_battles,
        export_bytes,
    )
    from db.export.filters import (
        EXPORT_DEFAULTS,
        ExportError,
        check,
        check_modes,
        describe_filters,
        parse_date,
        visitor_hash,
    )
    from db.export.read import (
        DEFAULT_CHUNK_SIZE,
        SELECTION_COUNTS,
        count_battles,
        count_selection,
        snapshot,
    )
    from db.export.replay import REPLAY_VERSION, replay_filters, replay_items

_LAZY = {
    **dict.fromkeys(("DEFAULT_LICENCE", "card_body", "render_card"), "db.export.card"),
    **dict.fromkeys(("DEFAULT_VIEW", "FORMATS", "VIEWS", "ExportBlob", "ExportCounts", "ExportResult",
                     "export_battles", "export_bytes"), "db.export.core"),
    **dict.fromkeys(("EXPORT_DEFAULTS", "ExportError", "check", "check_modes", "describe_filters",
                     "parse_date", "visitor_hash"), "db.export.filters"),
    **dict.fromkeys(("REPLAY_VERSION", "replay_filters", "replay_items"), "db.export.replay"),
    **dict.fromkeys(("DEFAULT_CHUNK_SIZE", "SELECTION_COUNTS", "count_battles", "count_selection",
                     "snapshot"), "db.export.read"),
}

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_LICENCE",
    "DEFAULT_VIEW",
    "ERROR_CATEGORIES",
    "EXPORT_DEFAULTS",
    "FORMATS",
    "REPLAY_VERSION",
    "SELECTION_COUNTS",
    "VIEWS",
    "ExportBlob",
    "ExportCounts",
    "ExportError",
    "ExportResult",
    "card_body",
    "check",
    "check_modes",
    "count_battles",
    "count_selection",
    "describe_filters",
    "error_category",
    "export_battles",
    "export_bytes",
    "parse_date",
    "render_card",
    "replay_filters",
    "replay_items",
    "snapshot",
    "visitor_hash",
]


def __getattr__(name: str) -> Any:
    """The export's public names, imported from their module when first asked for."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
