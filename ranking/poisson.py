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
from scipy.special import gammaln

from ranking.counts import FloatArray, IntArray

GUIDE_FACTOR = 2  # guide entries per table entry: more entries → fewer fix-up steps


@dataclass(frozen=True)
class PoissonTables:
    """Concatenated inversion tables; per cell: offsets into them (or -1 for the NumPy fallback)."""

    means: FloatArray  # per cell
    cdf: FloatArray  # concatenated CDFs
    lo: IntArray  # per cell: smallest tabulated value
    cdf_offset: IntArray  # per cell
    guide: IntArray  # concatenated guide tables, absolute indices into cdf
    guide_offset: IntArray  # per cell
    guide_size: IntArray  # per cell
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
    cdf_parts, guide_parts = [], []
    cdf_off = np.full(values.size, -1, dtype=np.int64)
    guide_off = np.full(values.size, -1, dtype=np.int64)
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
        guide = np.searchsorted(cdf, np.arange(g) / g, side="right") + pos_cdf
        cdf_parts.append(cdf)
        guide_parts.append(guide)
        cdf_off[v], guide_off[v], guide_len[v] = pos_cdf, pos_guide, g
        pos_cdf += cdf.size
        pos_guide += g
    cell_use = use[inverse]
    return PoissonTables(
        means=means,
        cdf=np.concatenate(cdf_parts) if cdf_parts else np.zeros(0),
        lo=lows[inverse],
        cdf_offset=cdf_off[inverse],
        guide=np.concatenate(guide_parts) if guide_parts else np.zeros(0, dtype=np.int64),
        guide_offset=guide_off[inverse],
        guide_size=guide_len[inverse],
        tabled=np.flatnonzero(cell_use),
        fallback=np.flatnonzero(~cell_use),
    )


def draw(tables: PoissonTables, rounds: int, rng: np.random.Generator) -> IntArray:
    """``rounds`` independent Poisson vectors, shape ``(rounds, cells)``."""
    out = np.zeros(
        (rounds, tables.means.size if tables.fallback.size or not tables.tabled.size else 0), dtype=np.int64
    )
    if tables.fallback.size:
        out[:, tables.fallback] = rng.poisson(
            tables.means[tables.fallback], size=(rounds, tables.fallback.size)
        )
    cells = tables.tabled
    if cells.size:
        u = rng.random((rounds, cells.size))
        size = tables.guide_size[cells].astype(np.float64)
        idx = (u * size).astype(np.int64)
        idx += tables.guide_offset[cells]
        pos = tables.guide[idx]
        # Walk up while F(pos) <= u; entries needing a step are few, and shrink every pass.
        todo = np.flatnonzero(tables.cdf[pos].ravel() <= u.ravel())
        flat_pos = pos.ravel()
        flat_u = u.ravel()
        while todo.size:
            flat_pos[todo] += 1
            todo = todo[tables.cdf[flat_pos[todo]] <= flat_u[todo]]
        pos -= tables.cdf_offset[cells]
        pos += tables.lo[cells]
        if tables.fallback.size == 0:
            return pos  # every cell tabled, in order: skip the column scatter
        out[:, cells] = pos
    return out
