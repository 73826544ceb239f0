"""Fast exact Poisson draws for many cells sharing few distinct means (bootstrap resampling).

Bootstrap cells have integer means (their observed counts), and a large leaderboard has thousands of
cells but only a few hundred distinct counts. For each distinct mean we tabulate the CDF once and draw
by inversion, ``X = min{x : F(x) > U}``, starting from a guide table (Chen & Asau 1974) so that a draw
costs a couple of array lookups instead of NumPy's per-draw rejection sampler. Tables span
``mean ± (12√mean + 12)``; the mass left outside is below 1e-25, far under the 2⁻⁵³ resolution of the
uniform draw, so the draws are exact to floating point. Means whose table would be larger than the
number of draws it serves fall back to ``Generator.poisson``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import gammaln

from ranking.counts import FloatArray, IntArray

GUIDE_FACTOR = 8  # guide entries per table entry: 8 leaves ~2% of draws needing a fix-up step


@dataclass(frozen=True)
class PoissonTables:
    """Concatenated inversion tables and, per tabled cell, where its guide table starts."""

    means: FloatArray  # per cell
    cdf: FloatArray  # concatenated CDFs (last entry of each: +inf)
    values: IntArray  # per CDF entry: the Poisson value it stands for
    guide: NDArray[np.int32]  # concatenated guide tables: absolute indices into cdf
    guide_offset: NDArray[np.int32]  # per tabled cell
    guide_size: FloatArray  # per tabled cell
    tabled: IntArray  # cell indices drawn from tables
    fallback: IntArray  # cell indices drawn with Generator.poisson


def build_tables(means: FloatArray, *, draws_per_cell: int) -> PoissonTables:
    """Tabulate one CDF (and guide) per distinct mean, when that pays off for ``draws_per_cell`` draws."""
    means = np.asarray(means, dtype=np.float64)
    values, inverse, multiplicity = np.unique(means, return_inverse=True, return_counts=True)
    half = np.ceil(12.0 * np.sqrt(values) + 12.0)
    lows = np.maximum(0.0, np.floor(values - half)).astype(np.int64)
    highs = np.ceil(values + half).astype(np.int64)
    sizes = highs - lows + 1
    use = sizes * 4 <= multiplicity * max(1, draws_per_cell)
    cdf_parts, value_parts, guide_parts = [], [], []
    guide_off = np.zeros(values.size, dtype=np.int64)
    guide_len = np.zeros(values.size, dtype=np.int64)
    pos_cdf = pos_guide = 0
    for v in np.flatnonzero(use):
        x = np.arange(lows[v], highs[v] + 1, dtype=np.float64)
        lam = values[v]
        logpmf = x * np.log(lam) - lam - gammaln(x + 1.0) if lam > 0 else np.where(x == 0, 0.0, -np.inf)
        cdf = np.cumsum(np.exp(logpmf))
        cdf /= cdf[-1]
        cdf[-1] = np.inf  # every uniform in [0, 1) stops by the last entry
        g = GUIDE_FACTOR * cdf.size
        guide_parts.append(np.searchsorted(cdf, np.arange(g) / g, side="right") + pos_cdf)
        cdf_parts.append(cdf)
        value_parts.append(x.astype(np.int64))
        guide_off[v], guide_len[v] = pos_guide, g
        pos_cdf += cdf.size
        pos_guide += g
    if pos_guide >= 2**31:
        raise ValueError("Poisson tables too large")  # unreachable: tables stay below draws / 4
    tabled = np.flatnonzero(use[inverse])
    return PoissonTables(
        means=means,
        cdf=np.concatenate(cdf_parts) if cdf_parts else np.zeros(0),
        values=np.concatenate(value_parts) if value_parts else np.zeros(0, dtype=np.int64),
        guide=(np.concatenate(guide_parts) if guide_parts else np.zeros(0)).astype(np.int32),
        guide_offset=guide_off[inverse][tabled].astype(np.int32),
        guide_size=guide_len[inverse][tabled].astype(np.float64),
        tabled=tabled,
        fallback=np.flatnonzero(~use[inverse]),
    )


def draw(tables: PoissonTables, rounds: int, rng: np.random.Generator) -> IntArray:
    """``rounds`` independent Poisson vectors, shape ``(rounds, cells)``."""
    cells = tables.tabled
    pos = np.empty((rounds, cells.size), dtype=np.int32)
    if cells.size:
        u = rng.random((rounds, cells.size))
        slot = np.empty((rounds, cells.size), dtype=np.int32)
        np.multiply(u, tables.guide_size, out=slot, casting="unsafe")  # floor (u ≥ 0): guide slot
        slot += tables.guide_offset
        pos = tables.guide[slot]
        # Walk up while F(pos) <= u; entries needing a step are few, and shrink every pass.
        flat_pos = pos.reshape(-1)
        flat_u = u.reshape(-1)
        todo = np.flatnonzero(tables.cdf[flat_pos] <= flat_u)
        while todo.size:
            flat_pos[todo] += 1
            todo = todo[tables.cdf[flat_pos[todo]] <= flat_u[todo]]
    values = tables.values[pos]
    if tables.fallback.size == 0:
        return values  # every cell tabled, in order
    out = np.zeros((rounds, tables.means.size), dtype=np.int64)
    out[:, cells] = values
    out[:, tables.fallback] = rng.poisson(tables.means[tables.fallback], size=(rounds, tables.fallback.size))
    return out
