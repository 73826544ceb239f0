"""Read a battles file (CSV or Parquet: ``model_a, model_b, winner``) for the CLI. Not used by the core.

``winner`` is ``a | b | tie | both_bad`` or Chatbot Arena's ``model_a | model_b | tie | tie (bothbad)``.
Every malformed row is reported by its 1-based data row number (CSV line = row + 1). Other columns are
ignored, except the per-side style features ``<feature>_a, <feature>_b`` when ``style`` names them
(``python -m db export --view battles`` writes them; an empty cell is NaN).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ranking.counts import A_WINS, B_WINS, BOTH_BAD, TIE, FloatArray, IntArray

COLUMNS = ("model_a", "model_b", "winner")
WINNER_CODES = {
    "a": A_WINS,
    "model_a": A_WINS,
    "b": B_WINS,
    "model_b": B_WINS,
    "tie": TIE,
    "both_bad": BOTH_BAD,
    "tie (bothbad)": BOTH_BAD,
}


class BattlesFileError(ValueError):
    """The battles file cannot be used; the message is one line and names the offending row."""


@dataclass(frozen=True)
class Battles:
    """A battle stream with model indices into ``models`` (sorted names) and outcome codes."""

    models: tuple[str, ...]
    model_a: IntArray
    model_b: IntArray
    outcome: IntArray
    features_a: FloatArray | None = None  # (battles x features) when read with ``style``; NaN: missing
    features_b: FloatArray | None = None


def style_columns(features: tuple[str, ...]) -> list[str]:
    """The file's columns for ``features``: ``<feature>_a`` then ``<feature>_b`` for each."""
    return [f"{name}_{side}" for name in features for side in ("a", "b")]


def read_table(path: Path, extra: tuple[str, ...] = ()) -> pa.Table:
    """Load the three columns as strings (and ``extra`` ones as read); Parquet by suffix, CSV otherwise."""
    wanted = [*COLUMNS, *extra]
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            schema_names = pq.read_schema(path).names
            _require_columns(schema_names, wanted)
            table = pq.read_table(path, columns=wanted)
        else:
            from pyarrow import csv

            table = csv.read_csv(
                path,
                convert_options=csv.ConvertOptions(
                    column_types={**{c: pa.string() for c in COLUMNS}, **{c: pa.float64() for c in extra}},
                    strings_can_be_null=True,
                ),
            )
            _require_columns(table.column_names, wanted)
    except (OSError, pa.ArrowException) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BattlesFileError(f"cannot read {path}: {first}") from exc
    return table.select(wanted).combine_chunks()


def _require_columns(names: list[str], wanted: list[str]) -> None:
    missing = [c for c in wanted if c not in names]
    if missing:
        raise BattlesFileError(f"missing column(s): {', '.join(missing)} (need {', '.join(wanted)})")


def parse_battles(table: pa.Table) -> Battles:
    """Validate rows and encode them; raises :class:`BattlesFileError` naming the first bad row."""
    cols = {c: pc.cast(table.column(c), pa.string()).combine_chunks() for c in COLUMNS}
    for c in COLUMNS:
        nulls = pc.is_null(cols[c])
        if pc.any(nulls).as_py():
            row = int(np.flatnonzero(nulls.to_numpy(zero_copy_only=False))[0]) + 1
            raise BattlesFileError(f"row {row}: empty {c}")
    a = pc.utf8_trim_whitespace(cols["model_a"])
    b = pc.utf8_trim_whitespace(cols["model_b"])
    for name, col in (("model_a", a), ("model_b", b)):
        empty = pc.equal(pc.utf8_length(col), 0)
        if pc.any(empty).as_py():
            row = int(np.flatnonzero(empty.to_numpy(zero_copy_only=False))[0]) + 1
            raise BattlesFileError(f"row {row}: empty {name}")
    winner = pc.utf8_lower(pc.utf8_trim_whitespace(cols["winner"]))
    keys = pa.array(list(WINNER_CODES))
    pos = pc.index_in(winner, value_set=keys)
    unknown = pc.is_null(pos)
    if pc.any(unknown).as_py():
        row = int(np.flatnonzero(unknown.to_numpy(zero_copy_only=False))[0])
        raise BattlesFileError(
            f"row {row + 1}: unknown winner {winner[row].as_py()!r} "
            "(expected a, b, tie, both_bad, model_a, model_b, tie (bothbad))"
        )
    same = pc.equal(a, b)
    if pc.any(same).as_py():
        row = int(np.flatnonzero(same.to_numpy(zero_copy_only=False))[0])
        raise BattlesFileError(f"row {row + 1}: model {a[row].as_py()!r} battles itself")
    codes = np.asarray(list(WINNER_CODES.values()), dtype=np.int64)[pos.to_numpy(zero_copy_only=False)]
    encoded = pa.concat_arrays([a, b]).dictionary_encode()
    found = [str(x) for x in encoded.dictionary.to_pylist()]
    order = np.argsort(np.asarray(found, dtype=object))  # sorted names: stable model indices
    rank = np.empty(len(found), dtype=np.int64)
    rank[order] = np.arange(len(found))
    inverse = rank[encoded.indices.to_numpy(zero_copy_only=False)]
    names = [found[k] for k in order]
    n = len(table)
    return Battles(
        models=tuple(str(x) for x in names),
        model_a=inverse[:n].astype(np.int64),
        model_b=inverse[n:].astype(np.int64),
        outcome=codes,
    )


def _features(table: pa.Table, names: list[str]) -> FloatArray:
    columns = [pc.cast(table.column(c), pa.float64()).to_numpy(zero_copy_only=False) for c in names]
    return np.column_stack(columns).astype(np.float64) if columns else np.zeros((len(table), 0))


def read_battles(path: Path, *, style: tuple[str, ...] = ()) -> Battles:
    """Read and validate a battles file; with ``style``, also its per-side style feature columns."""
    if not path.exists():
        raise BattlesFileError(f"cannot read {path}: no such file")
    columns = style_columns(style)
    table = read_table(path, tuple(columns))
    if len(table) == 0:
        raise BattlesFileError(f"{path} has no battles")
    battles = parse_battles(table)
    if not style:
        return battles
    return replace(battles, features_a=_features(table, columns[0::2]),
                   features_b=_features(table, columns[1::2]))


SOURCE_COLUMN = "source"
DEFAULT_SOURCE = "human"


def read_sources(paths: list[Path]) -> tuple[tuple[str, ...], dict[str, Battles]]:
    """Several battles files as one model axis (sorted names) and one battle stream per source: a file's
    ``source`` column names each row's (``python -m db export --view replay_pairs`` writes ``replay``); a
    file without one is all ``human`` (the ``battles`` view's votes)."""
    streams: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]]] = {}
    for path in paths:
        battles = read_battles(path)
        sources = _source_column(path, len(battles.outcome))
        for name in dict.fromkeys(sources.tolist()):
            rows = sources == name
            streams.setdefault(str(name), []).append(
                (battles.model_a[rows], battles.model_b[rows], battles.outcome[rows], battles.models))
    models = tuple(sorted({m for parts in streams.values() for *_, names in parts for m in names}))
    position = {m: i for i, m in enumerate(models)}
    out: dict[str, Battles] = {}
    for name, parts in streams.items():
        a, b, outcome = [], [], []
        for pa_, pb, po, names in parts:
            remap = np.array([position[m] for m in names], dtype=np.int64)
            a.append(remap[pa_])
            b.append(remap[pb])
            outcome.append(po)
        out[name] = Battles(models=models, model_a=np.concatenate(a), model_b=np.concatenate(b),
                            outcome=np.concatenate(outcome))
    return models, out


def _source_column(path: Path, rows: int) -> np.ndarray:
    """Each row's source: the file's ``source`` column, else ``human`` throughout."""
    if path.suffix.lower() in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        if SOURCE_COLUMN not in pq.read_schema(path).names:
            return np.full(rows, DEFAULT_SOURCE, dtype=object)
        column = pq.read_table(path, columns=[SOURCE_COLUMN]).column(SOURCE_COLUMN)
    else:
        from pyarrow import csv

        header = csv.open_csv(path).schema.names
        if SOURCE_COLUMN not in header:
            return np.full(rows, DEFAULT_SOURCE, dtype=object)
        column = csv.read_csv(path, convert_options=csv.ConvertOptions(
            include_columns=[SOURCE_COLUMN], column_types={SOURCE_COLUMN: pa.string()})).column(SOURCE_COLUMN)
    values = np.asarray(pc.fill_null(pc.cast(column, pa.string()), DEFAULT_SOURCE).to_pylist(), dtype=object)
    blank = np.flatnonzero(np.char.strip(values.astype(str)) == "")
    if blank.size:
        raise BattlesFileError(f"row {int(blank[0]) + 1}: empty {SOURCE_COLUMN}")
    return values
