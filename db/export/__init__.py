"""The dataset export (``python -m db export``; the web app's Dataset page).

One package, layered one way: ``filters`` (what is selected) and ``schema`` (Arrow schemas) at the
bottom; ``read`` (keyset pages of the dialogues) and ``pairwise`` (the ``battles`` view) read the
database; ``records`` shapes pages; ``writers`` and ``card`` write; ``core`` runs an export to files or
bytes; ``cli`` (command-line glue, the only module that reads ``settings``) and ``bench`` sit on top
and are imported by ``db/__main__`` only, never from here.
"""

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
from db.export.filters import ExportError, ExportFilters, parse_date, visitor_hash

__all__ = [
    "DEFAULT_VIEW",
    "FORMATS",
    "VIEWS",
    "ExportBlob",
    "ExportCounts",
    "ExportError",
    "ExportFilters",
    "ExportResult",
    "export_battles",
    "export_bytes",
    "parse_date",
    "visitor_hash",
]
