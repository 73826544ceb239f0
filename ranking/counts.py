"""Pairwise vote counts: validation and the compact per-pair form every fit works on.

The db layer hands over dense ``n × n`` matrices (``wins[i, j]`` = times ``i`` beat ``j``; ``ties`` and
``both_bad`` symmetric). Fits only need the upper triangle of pairs that actually met, so the matrices are
folded once into :class:`PairData`: parallel arrays over those pairs, plus the three bootstrap *cells*
of each pair (``i`` won, ``j`` won, tie) that an exact resample of battles draws from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

TiePolicy = Literal["half", "exclude"]
BothBadPolicy = Literal["tie", "exclude"]

IntMatrix = NDArray[np.int64]
FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


class CountsError(ValueError):
    """The pairwise counts handed to ranking are malformed (shape, sign, symmetry, diagonal)."""


@dataclass(frozen=True)
class PairData:
    """Counts folded to the pairs ``i < j`` that have at least one battle used by the fit.

    ``w_ij``/``w_ji`` are decisive wins, ``t`` the ties that count as half a win each (zero when ties
    are excluded). ``n_models`` is the size of the original model axis.
    """

    n_models: int
    i: IntArray
    j: IntArray
    w_ij: IntArray
    w_ji: IntArray
    t: IntArray

    @property
    def battles(self) -> IntArray:
        """Battles per pair that enter the likelihood."""
        return self.w_ij + self.w_ji + self.t

    @property
    def effective_wins(self) -> FloatArray:
        """Wins of ``i`` over ``j`` with each tie counted as half a win (the Chatbot Arena convention)."""
        return self.w_ij + 0.5 * self.t

    def per_model_battles(self) -> IntArray:
        """Battles each model played in the fit (zero: the model cannot be rated)."""
        out = np.bincount(self.i, weights=self.battles, minlength=self.n_models)
        out += np.bincount(self.j, weights=self.battles, minlength=self.n_models)
        return out.astype(np.int64)


def as_count_matrix(name: str, value: object, n: int) -> IntMatrix:
    """Validate one ``n × n`` matrix of non-negative integer counts with a zero diagonal."""
    arr = np.asarray(value)
    if arr.shape != (n, n):
        raise CountsError(f"{name} must have shape ({n}, {n}), got {arr.shape}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise CountsError(f"{name} must hold whole numbers of battles")
    elif arr.dtype.kind not in "iub":
        raise CountsError(f"{name} must be numeric, got dtype {arr.dtype}")
    out = arr.astype(np.int64)
    if np.any(out < 0):
        raise CountsError(f"{name} must be non-negative")
    if np.any(np.diagonal(out) != 0):
        raise CountsError(f"{name} has a non-zero diagonal: a model cannot battle itself")
    return out


def validate_counts(
    models: tuple[str, ...] | list[str], wins: object, ties: object, both_bad: object
) -> tuple[tuple[str, ...], IntMatrix, IntMatrix, IntMatrix]:
    """Check names and the three matrices; return them as a tuple of names and int64 matrices."""
    names = tuple(str(m) for m in models)
    if len(set(names)) != len(names):
        raise CountsError("model names must be unique")
    n = len(names)
    w = as_count_matrix("wins", wins, n)
    t = as_count_matrix("ties", ties, n)
    b = as_count_matrix("both_bad", both_bad, n)
    for name, mat in (("ties", t), ("both_bad", b)):
        if not np.array_equal(mat, mat.T):
            raise CountsError(f"{name} must be symmetric")
    return names, w, t, b


def check_policies(ties: str, both_bad: str) -> None:
    """Reject unknown policy strings early, with the allowed values in the message."""
    if ties not in ("half", "exclude"):
        raise CountsError(f"ties must be 'half' or 'exclude', got {ties!r}")
    if both_bad not in ("tie", "exclude"):
        raise CountsError(f"both_bad must be 'tie' or 'exclude', got {both_bad!r}")


def effective_ties(ties: IntMatrix, both_bad: IntMatrix, *, both_bad_policy: str) -> IntMatrix:
    """Ties as the leaderboard reports them: plain ties plus both-bad votes when those count as ties."""
    return ties + both_bad if both_bad_policy == "tie" else ties.copy()


def fold_pairs(wins: IntMatrix, tie_matrix: IntMatrix, *, tie_policy: str) -> PairData:
    """Fold dense matrices to the upper-triangle pairs that have battles used by the likelihood."""
    n = wins.shape[0]
    iu, ju = np.triu_indices(n, k=1)
    w_ij = wins[iu, ju]
    w_ji = wins[ju, iu]
    t = tie_matrix[iu, ju] if tie_policy == "half" else np.zeros_like(w_ij)
    keep = (w_ij + w_ji + t) > 0
    return PairData(
        n_models=n,
        i=iu[keep].astype(np.int64),
        j=ju[keep].astype(np.int64),
        w_ij=w_ij[keep].astype(np.int64),
        w_ji=w_ji[keep].astype(np.int64),
        t=t[keep].astype(np.int64),
    )


def restrict(pairs: PairData, keep_models: IntArray) -> PairData:
    """Re-index pairs onto a subset of models (those with battles); pairs outside it must not exist."""
    new_index = np.full(pairs.n_models, -1, dtype=np.int64)
    new_index[keep_models] = np.arange(keep_models.size)
    i = new_index[pairs.i]
    j = new_index[pairs.j]
    if np.any(i < 0) or np.any(j < 0):
        raise CountsError("a pair refers to a model outside the kept subset")
    return PairData(n_models=int(keep_models.size), i=i, j=j, w_ij=pairs.w_ij, w_ji=pairs.w_ji, t=pairs.t)


# Outcome codes of a battle stream (the CLI's file reader and the synthetic generator use them).
A_WINS, B_WINS, TIE, BOTH_BAD = 0, 1, 2, 3


def tally(
    model_a: IntArray, model_b: IntArray, outcome: IntArray, *, n_models: int
) -> tuple[IntMatrix, IntMatrix, IntMatrix]:
    """Count a battle stream (outcome codes above) into ``wins``, symmetric ``ties`` and ``both_bad``."""
    a = np.asarray(model_a, dtype=np.int64)
    b = np.asarray(model_b, dtype=np.int64)
    o = np.asarray(outcome, dtype=np.int64)
    if np.any(a == b):
        raise CountsError("a battle pits a model against itself")
    size = n_models * n_models
    winner = np.where(o == A_WINS, a, b)
    loser = np.where(o == A_WINS, b, a)
    decisive = (o == A_WINS) | (o == B_WINS)
    wins = np.bincount(winner[decisive] * n_models + loser[decisive], minlength=size).reshape(
        n_models, n_models
    )
    out = []
    for code in (TIE, BOTH_BAD):
        sel = o == code
        m = np.bincount(a[sel] * n_models + b[sel], minlength=size).reshape(n_models, n_models)
        out.append(m + m.T)
    return wins.astype(np.int64), out[0].astype(np.int64), out[1].astype(np.int64)
