"""Fixit Arena persistence: the database's public surface, split by what callers do.

- ``db`` (this module): set-up and the values every caller shares: :func:`make_engine`,
  :func:`upgrade_to_head`, the typed errors, the frozen views results come back as, the filters
  (:class:`VoteFilters`) and a few constants and helpers.
- :mod:`db.actions`: what visitors and admins do (battles, votes, generations, moderation, contestants,
  visitors) and the reads a flow needs before it acts (a battle, the rate limits' counts).
- :mod:`db.boards`: the Leaderboard's and the admin page's figures.
- :mod:`db.export`: the dataset export (``python -m db export``; the Dataset page).
- :mod:`db.seed`: synthetic rows for benchmarks and load tests (bulk inserts that bypass the visitor flows).

Code outside ``db`` imports only these five (``migrations/``, the schema's own history, may read the
models). The other modules (``models``, ``engine``, ``checks``, ``errors``, ``views``, ``vote_filters``,
``migrate``) are ``db``'s own. The names below are loaded on first use (PEP 562), so ``import db`` (and
``from db.export import error_category``, on the web app's reply path) loads neither SQLAlchemy's models
nor Alembic.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from db.checks import storable_text
    from db.engine import Durability, make_engine
    from db.errors import BattleClosed, DBError, InvalidInput, NotFound, VoteRefusal, VoteRefused
    from db.migrate import current_revision, upgrade_to_head
    from db.models import GRADER_LABELS, MODES, utcnow
    from db.views import (
        BattleSummaryView,
        BattleView,
        ContestantView,
        ConversationView,
        CorrectionView,
        HourCount,
        LatencyFigures,
        MessageView,
        ModelCounts,
        ModerationEventView,
        PairCounts,
        VisitorView,
        VoteView,
    )
    from db.vote_filters import DEFAULT_MODES, HUMAN_MODES, BattleFilterArgs, VoteFilterArgs, VoteFilters

_LAZY = {
    "storable_text": "db.checks",
    **dict.fromkeys(("Durability", "make_engine"), "db.engine"),
    **dict.fromkeys(("BattleClosed", "DBError", "InvalidInput", "NotFound", "VoteRefusal", "VoteRefused"),
                    "db.errors"),
    **dict.fromkeys(("current_revision", "upgrade_to_head"), "db.migrate"),
    **dict.fromkeys(("GRADER_LABELS", "MODES", "utcnow"), "db.models"),
    **dict.fromkeys(("BattleSummaryView", "BattleView", "ContestantView", "ConversationView",
                     "CorrectionView", "HourCount", "LatencyFigures", "MessageView", "ModelCounts",
                     "ModerationEventView", "PairCounts", "VisitorView", "VoteView"), "db.views"),
    **dict.fromkeys(("DEFAULT_MODES", "HUMAN_MODES", "BattleFilterArgs", "VoteFilterArgs", "VoteFilters"),
                    "db.vote_filters"),
}

__all__ = [
    "DEFAULT_MODES",
    "GRADER_LABELS",
    "HUMAN_MODES",
    "MODES",
    "BattleClosed",
    "BattleFilterArgs",
    "BattleSummaryView",
    "BattleView",
    "ContestantView",
    "ConversationView",
    "CorrectionView",
    "DBError",
    "Durability",
    "HourCount",
    "InvalidInput",
    "LatencyFigures",
    "MessageView",
    "ModelCounts",
    "ModerationEventView",
    "NotFound",
    "PairCounts",
    "VisitorView",
    "VoteFilterArgs",
    "VoteFilters",
    "VoteRefusal",
    "VoteRefused",
    "VoteView",
    "make_engine",
    "storable_text",
    "current_revision",
    "upgrade_to_head",
    "utcnow",
]


def __getattr__(name: str) -> Any:
    """The public names, imported from their module when first asked for (submodules such as
    ``db.actions`` are not names here: ``from db import actions`` imports the package)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
