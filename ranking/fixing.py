"""Fix metrics per model: pure functions over counts, each estimate with a 95% interval and its n.

What the Fixing board ranks and shows (the counts come from db aggregates, or from stored automatic
runs graded by ``scenarios``):

* **pass@1** — first-try accuracy: first attempts correct over first attempts (Wilson interval).
* **pass^k** — τ-bench's reliability (Yao et al. 2024, arXiv:2406.12045): the chance that *k* fresh
  attempts at the same task all succeed, estimated per task without bias as ``C(c, k) / C(n, k)``
  (``c`` successes in ``n ≥ k`` attempts) and averaged over tasks. Interval: Wilson's on the summed
  per-task estimates over the number of tasks — exact Wilson when every task has exactly *k* attempts
  (each task is then one all-or-nothing trial), a close approximation otherwise.
* **fix rate** — corrections judged fixed over corrections judged (people's and the grader's apart).
* **Cohen's κ** between two judges of the same corrections (person vs grader), with the large-sample
  standard error of Cohen (1960) for a normal 95% interval, clipped to [-1, 1].
* **turns to fix** — for each mistake, how many corrections it took: 1, 2, 3+ or never. Counted where
  the chains of corrections are known (``db.boards.turns_to_fix``, one fold for people, the grader and
  the automatic arena); here it arrives as counts per bucket.
* **regression / recurrence / chatty rates** — flagged replies over graded replies (Wilson).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ranking.counts import CountsError
from ranking.intervals import Z95, interval_ranks
from ranking.rates import wilson_interval

TURN_BUCKETS: tuple[str, ...] = ("1", "2", "3+", "never")


@dataclass(frozen=True)
class Estimate:
    """A rate with its 95% interval and the number of trials behind it (``rate`` NaN when ``n`` is 0)."""

    rate: float
    low: float
    high: float
    n: int

    def text(self) -> str:
        """``"62% (41–79, n=24)"``, or an en dash when there is nothing to estimate."""
        if self.n == 0 or math.isnan(self.rate):
            return "–"
        return f"{100 * self.rate:.0f}% ({100 * self.low:.0f}–{100 * self.high:.0f}, n={self.n})"


def proportion(successes: float, trials: int) -> Estimate:
    """``successes / trials`` with Wilson's 95% interval (the whole [0, 1] and NaN when ``trials`` is 0)."""
    if trials < 0 or successes < 0 or successes > trials:
        raise CountsError("need 0 <= successes <= trials")
    low, high = wilson_interval(successes, trials, Z95)
    rate = successes / trials if trials else math.nan
    return Estimate(rate=float(rate), low=float(low), high=float(high), n=int(trials))


def pass_at_1(correct: int, attempts: int) -> Estimate:
    """First attempts correct over first attempts."""
    return proportion(correct, attempts)


def pass_hat_k(tasks: Sequence[tuple[int, int]], k: int) -> Estimate:
    """τ-bench's pass^k over ``tasks`` given as ``(successes, attempts)``; tasks with fewer than ``k``
    attempts are left out (``n`` counts the tasks used)."""
    if k < 1:
        raise CountsError("k must be >= 1")
    used = [(c, n) for c, n in tasks if n >= k]
    for c, n in used:
        if not 0 <= c <= n:
            raise CountsError("need 0 <= successes <= attempts for every task")
    total = sum(math.comb(c, k) / math.comb(n, k) for c, n in used)
    return proportion(total, len(used))


def fix_rate(fixed: int, judged: int) -> Estimate:
    """Corrections judged fixed over corrections judged fixed or not fixed (unknown excluded)."""
    return proportion(fixed, judged)


@dataclass(frozen=True)
class Agreement:
    """Cohen's κ between two judges over ``n`` items both judged, with a 95% interval."""

    kappa: float
    low: float
    high: float
    n: int
    observed: float  # share of items the judges agree on

    def text(self) -> str:
        if self.n == 0 or math.isnan(self.kappa):
            return "–"
        return f"{self.kappa:.2f} ({self.low:.2f}–{self.high:.2f}, n={self.n})"


def cohen_kappa(first: Sequence[bool], second: Sequence[bool]) -> Agreement:
    """Cohen's κ of two binary judgments of the same items (e.g. person vs grader: fixed or not)."""
    a = np.asarray(first, dtype=bool)
    b = np.asarray(second, dtype=bool)
    if a.shape != b.shape or a.ndim != 1:
        raise CountsError("both judges must judge the same items")
    table = (a & b, a & ~b, ~a & b, ~a & ~b)
    return kappa_from_table(*(int(np.sum(cell)) for cell in table))


def kappa_from_table(both_yes: int, first_only: int, second_only: int, both_no: int) -> Agreement:
    """Cohen's κ from the 2×2 table of two judges (yes/yes, yes/no, no/yes, no/no).

    κ = (p_o − p_e) / (1 − p_e); SE = √(p_o(1 − p_o) / (n (1 − p_e)²)) (Cohen 1960). When both judges
    give one and the same answer to every item (p_e = 1), κ is 1; with no items it is NaN.
    """
    cells = (both_yes, first_only, second_only, both_no)
    if any(c < 0 for c in cells):
        raise CountsError("table cells must be non-negative")
    n = sum(cells)
    if n == 0:
        return Agreement(math.nan, math.nan, math.nan, 0, math.nan)
    p_o = (both_yes + both_no) / n
    first_yes, second_yes = (both_yes + first_only) / n, (both_yes + second_only) / n
    p_e = first_yes * second_yes + (1 - first_yes) * (1 - second_yes)
    if p_e >= 1.0:
        return Agreement(1.0, 1.0, 1.0, n, p_o)
    kappa = (p_o - p_e) / (1.0 - p_e)
    se = math.sqrt(p_o * (1.0 - p_o) / (n * (1.0 - p_e) ** 2))
    return Agreement(kappa, max(-1.0, kappa - Z95 * se), min(1.0, kappa + Z95 * se), n, p_o)


def turns_to_fix(counts: Mapping[str, int]) -> dict[str, int]:
    """The turns-to-fix histogram in ``TURN_BUCKETS`` order (``{"1", "2", "3+", "never"}`` → count), a
    bucket not given being 0; CountsError for an unknown bucket or a negative count."""
    unknown = set(counts) - set(TURN_BUCKETS)
    if unknown:
        raise CountsError(f"unknown turns-to-fix buckets {sorted(unknown)}; expected {TURN_BUCKETS}")
    if any(n < 0 for n in counts.values()):
        raise CountsError("turns-to-fix counts must be non-negative")
    return {bucket: int(counts.get(bucket, 0)) for bucket in TURN_BUCKETS}


def flag_rate(flagged: int, graded: int) -> Estimate:
    """Replies flagged (regression, recurrence, chatty) over graded replies."""
    return proportion(flagged, graded)


@dataclass(frozen=True)
class FixingCounts:
    """Everything one model's Fixing row is computed from (plain counts)."""

    model: str
    fixed: int = 0
    judged: int = 0
    first_correct: int = 0
    first_attempts: int = 0
    tasks: tuple[tuple[int, int], ...] = ()  # (successes, attempts) per group of first-question attempts
    graded: int = 0
    regressions: int = 0
    recurrences: int = 0
    chatty: int = 0
    turns: Mapping[str, int] = dataclasses.field(default_factory=dict)  # TURN_BUCKETS -> chains (db's fold)


@dataclass(frozen=True)
class FixingRow:
    model: str
    rank: int
    fix_rate: Estimate
    pass_at_1: Estimate
    pass_hat_k: Estimate
    regression: Estimate
    recurrence: Estimate
    chatty: Estimate
    turns_to_fix: dict[str, int]


def fixing_table(counts: Sequence[FixingCounts], *, k: int = 5) -> tuple[FixingRow, ...]:
    """Rows ranked by fix rate (best first; models with no judged correction last), with Chatbot Arena's
    rank by interval overlap: 1 + the number of models whose lower bound is above this one's upper."""
    rows = []
    for c in counts:
        rows.append(FixingRow(
            model=c.model, rank=0, fix_rate=fix_rate(c.fixed, c.judged),
            pass_at_1=pass_at_1(c.first_correct, c.first_attempts), pass_hat_k=pass_hat_k(c.tasks, k),
            regression=flag_rate(c.regressions, c.graded), recurrence=flag_rate(c.recurrences, c.graded),
            chatty=flag_rate(c.chatty, c.graded),
            turns_to_fix=turns_to_fix(c.turns),
        ))
    low = np.array([r.fix_rate.low if r.fix_rate.n else 0.0 for r in rows])
    high = np.array([r.fix_rate.high if r.fix_rate.n else 0.0 for r in rows])
    ranks = interval_ranks(low, high) if rows else np.zeros(0, dtype=np.int64)
    ranked = [dataclasses.replace(r, rank=int(rank)) for r, rank in zip(rows, ranks, strict=True)]
    ranked.sort(key=lambda r: (r.fix_rate.n == 0, -(0.0 if r.fix_rate.n == 0 else r.fix_rate.rate),
                               -r.fix_rate.n, r.model))
    return tuple(ranked)
