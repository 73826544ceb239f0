"""The Fixing board's fix rates per mistake kind: for the chosen source (people, grader, automatic arena
or replay), one row per model and one column per kind of mistake corrected (year, date, time, duration,
title, wrong function, prose around the call, …), each cell a fix rate with its 95% Wilson interval and
n (``db.boards.fix_counts_by_kind``). A researcher can then say which mistakes a model fixes."""

from __future__ import annotations

from collections import Counter

import pandas as pd
from sqlalchemy import Engine

from db import VoteFilters
from db import actions as db_actions
from db import boards as db_boards
from webapp.leaderboard_replay import rate_text

KIND_WORDS = {
    "garbage": "no recognisable call", "wrong_function": "wrong function",
    "chatty": "prose around the call", "missing_call": "no call",
    "multiple_calls": "extra call", "missing_argument": "missing value", "bad_format": "format",
    "syntax": "syntax", "regression": "regression", "double_booking": "double booking",
}


def kind_label(kind: str) -> str:
    """``wrong_year`` → ``year``; the shared kinds in words (:data:`KIND_WORDS`)."""
    if kind in KIND_WORDS:
        return KIND_WORDS[kind]
    return kind.removeprefix("wrong_").replace("_", " ")


def kinds_table(engine: Engine, filters: VoteFilters, source: str) -> pd.DataFrame:
    """Models × mistake kinds (most corrected kinds first), empty when nothing was judged. ``source``:
    one of ``db.boards.KIND_SOURCES`` (ValueError otherwise)."""
    known = [k for k in db_boards.KIND_SOURCES if k == source]
    if not known:
        raise ValueError(f"unknown source {source!r}")
    counts = db_boards.fix_counts_by_kind(engine, source=known[0], **filters.battle_args())
    if not counts:
        return pd.DataFrame()
    names = {c.slug: c.display_name for c in db_actions.list_contestants(engine)}
    volume: Counter[str] = Counter()
    for count in counts:
        volume[count.kind] += count.judged
    kinds = [kind for kind, _ in volume.most_common()]
    cells: dict[str, dict[str, str]] = {}
    for count in counts:
        cells.setdefault(count.model, {})[count.kind] = rate_text(count.fixed, count.judged)
    rows = [{"Model": names.get(model, model), **{kind_label(k): row.get(k, "–") for k in kinds}}
            for model, row in sorted(cells.items(), key=lambda item: names.get(item[0], item[0]))]
    return pd.DataFrame(rows)
