"""Proportions with Wilson score intervals: fix rates (corrections) and first-try accuracy (grader).

Wilson's interval (E. B. Wilson 1927, JASA 22:209) stays inside [0, 1] and behaves at 0 and n successes,
where the Wald interval collapses; with no trials it is the whole [0, 1] (never NaN).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ranking.counts import CountsError


def wilson_interval(successes: Any, trials: Any, z: float = 1.96) -> tuple[Any, Any]:
    """Wilson score interval; scalars in → floats out, arrays in → arrays out."""
    s = np.asarray(successes, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    if np.any(n < 0) or np.any(s < 0) or np.any(s > n):
        raise CountsError("need 0 <= successes <= trials")
    if z <= 0:
        raise CountsError("z must be positive")
    safe_n = np.where(n > 0, n, 1.0)
    p = s / safe_n
    denom = 1.0 + z * z / safe_n
    centre = (p + z * z / (2.0 * safe_n)) / denom
    half = z * np.sqrt(p * (1.0 - p) / safe_n + z * z / (4.0 * safe_n * safe_n)) / denom
    low = np.where(n > 0, np.clip(centre - half, 0.0, 1.0), 0.0)
    high = np.where(n > 0, np.clip(centre + half, 0.0, 1.0), 1.0)
    # Exact ends: 0 successes → lower bound 0, all successes → upper bound 1 (rounding otherwise leaks).
    low = np.where(s == 0, 0.0, low)
    high = np.where((s == n) & (n > 0), 1.0, high)
    if low.ndim == 0:
        return float(low), float(high)
    return low, high


@dataclass(frozen=True)
class RateRow:
    """One model's proportion: ``rate`` = successes / trials (0 when there are no trials)."""

    model: str
    successes: int
    trials: int
    rate: float
    ci_low: float
    ci_high: float


def rate_table(
    models: tuple[str, ...] | list[str], successes: Any, trials: Any, *, z: float = 1.96
) -> tuple[RateRow, ...]:
    """Per-model proportions with Wilson intervals, sorted by rate (best first), then by name."""
    names = tuple(models)
    s = np.asarray(successes, dtype=np.int64)
    n = np.asarray(trials, dtype=np.int64)
    if s.shape != (len(names),) or n.shape != (len(names),):
        raise CountsError("successes and trials must have one entry per model")
    low, high = wilson_interval(s, n, z)
    rows = [
        RateRow(
            model=names[m],
            successes=int(s[m]),
            trials=int(n[m]),
            rate=float(s[m] / n[m]) if n[m] else 0.0,
            ci_low=float(low[m]),
            ci_high=float(high[m]),
        )
        for m in range(len(names))
    ]
    rows.sort(key=lambda r: (-r.rate, -r.trials, r.model))
    return tuple(rows)


def fix_rates(
    models: tuple[str, ...] | list[str], fixed: Any, judged: Any, *, z: float = 1.96
) -> tuple[RateRow, ...]:
    """Fix rate per model: corrections judged ``fixed`` over those judged (``unknown`` excluded)."""
    return rate_table(models, fixed, judged, z=z)


def first_try_accuracy(
    models: tuple[str, ...] | list[str], correct: Any, graded: Any, *, z: float = 1.96
) -> tuple[RateRow, ...]:
    """First-try accuracy per model: first replies graded ``correct`` over first replies graded."""
    return rate_table(models, correct, graded, z=z)
