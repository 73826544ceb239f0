"""Suite figures: rates whose unit of sampling is a dialogue, with intervals over dialogues.

A suite plays many generated dialogues; events inside one dialogue are not independent (a model that
misreads the scenario fails every turn of it). Each dialogue therefore contributes a pair ``(numerator,
denominator)`` per figure (corrections fixed and corrections made; replies with a regression and graded
replies; …), the figure is the ratio of sums, and its 95% interval comes from a cluster bootstrap: the
dialogues are resampled with replacement ``resamples`` times and the 2.5th and 97.5th percentiles of the
ratio are taken. A fixed seed makes the interval the same on every run of the same data. ``n`` counts the
events (the summed denominators); ``dialogues`` the dialogues that had any.
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from ranking.counts import CountsError

DEFAULT_RESAMPLES = 2000


@dataclass(frozen=True)
class SuiteEstimate:
    """A ratio over dialogues with its 95% interval (all NaN when there were no events)."""

    value: float
    low: float
    high: float
    n: float
    dialogues: int

    def as_json(self) -> dict[str, float | int | None]:
        """``{"value", "low", "high", "n"}``, None for a figure with no events."""
        def clean(x: float) -> float | None:
            return None if math.isnan(x) else round(x, 4)

        return {"value": clean(self.value), "low": clean(self.low), "high": clean(self.high),
                "n": int(self.n) if float(self.n).is_integer() else self.n}

    def overlaps(self, other: SuiteEstimate) -> bool:
        """The two intervals share a point (or either is unknown): the difference may be noise."""
        if any(math.isnan(x) for x in (self.low, self.high, other.low, other.high)):
            return True
        return self.low <= other.high and other.low <= self.high


def ratio_over_dialogues(units: Sequence[tuple[float, float]], *, resamples: int = DEFAULT_RESAMPLES,
                         seed: int = 0) -> SuiteEstimate:
    """Σ numerators / Σ denominators over the dialogues that had events (a rate in [0, 1]), with a
    cluster-bootstrap 95% interval. CountsError for a negative count or a numerator above its
    denominator."""
    for num, den in units:
        if den < 0 or num < 0 or num > den:
            raise CountsError("need 0 <= numerator <= denominator for every dialogue")
    return _cluster_bootstrap(units, resamples=resamples, seed=seed)


def mean_over_dialogues(units: Sequence[tuple[float, float]], *, resamples: int = DEFAULT_RESAMPLES,
                        seed: int = 0) -> SuiteEstimate:
    """The mean of per-event values given as ``(sum of values, events)`` per dialogue (corrections per
    fixed mistake: may exceed 1), with the same cluster-bootstrap interval."""
    for total, events in units:
        if events < 0 or total < 0:
            raise CountsError("need non-negative sums and counts")
    return _cluster_bootstrap(units, resamples=resamples, seed=seed)


def _cluster_bootstrap(units: Sequence[tuple[float, float]], *, resamples: int, seed: int) -> SuiteEstimate:
    if resamples < 1:
        raise CountsError("resamples must be >= 1")
    used = [(num, den) for num, den in units if den > 0]
    if not used:
        return SuiteEstimate(math.nan, math.nan, math.nan, 0, 0)
    total = sum(den for _, den in used)
    value = sum(num for num, _ in used) / total
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        sample = [used[rng.randrange(len(used))] for _ in used]
        ratios.append(sum(n for n, _ in sample) / sum(d for _, d in sample))
    ratios.sort()
    low = ratios[int(0.025 * (resamples - 1))]
    high = ratios[int(math.ceil(0.975 * (resamples - 1)))]
    return SuiteEstimate(value, min(low, value), max(high, value), total, len(used))


def suite_figures(units: Mapping[str, Sequence[tuple[float, float]]], *, means: Collection[str] = (),
                  resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> dict[str, SuiteEstimate]:
    """Every figure of one model's suite: a ratio over dialogues, or a mean for the names in ``means``
    (corrections per fixed mistake)."""
    return {name: (mean_over_dialogues if name in means else ratio_over_dialogues)(
        pairs, resamples=resamples, seed=seed) for name, pairs in units.items()}
