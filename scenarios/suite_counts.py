"""What each suite dialogue counts for each figure: ``(numerator, denominator)`` pairs, one per dialogue.

``ranking.suites`` turns these into rates with intervals over dialogues; this module only reads run
records (live, or re-read from the database by ``scenarios.storage.load_runs``). The figures:

* ``pass_at_1`` — the dialogue's first reply is correct (an unsaid value taken as an assumption counts
  as correct): 1 of 1.
* ``pass_hat_k`` — τ-bench's pass^k over the dialogue's samples of its first turn (the ``suite`` run's
  first reply and the ``first_try`` runs'): ``C(c, k) / C(n, k)`` of 1, with ``c`` of ``n ≥ k`` samples
  correct (a dialogue with fewer samples counts nothing).
* ``fix_within_1`` / ``fix_within_2`` — of the mistakes (a chain of corrections that starts at a wrong
  reply), those fixed by the first correction, or by the first two.
* ``turns_to_fix`` — corrections it took, summed over the mistakes that were fixed, of those mistakes.
* ``regression_rate`` / ``recurrence_rate`` — graded replies with a regression (a recurrence), of graded
  replies.
* ``maintenance_rate`` — replies to a false correction that held (``maintained``), of such replies.

A *suite* is a model's runs at one sampling temperature with one correction style (:class:`SuiteKey`):
a greedy suite and a sampled one of the same model, or two styles, are counted and reported apart, and a
dialogue's first-turn samples count only towards the suite of their temperature. Several invocations at
the same settings (another ``--seed``, more dialogues) are one suite.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ranking.suites import SuiteEstimate, suite_figures
from scenarios.records import RunMessage, RunRecord

MEANS: frozenset[str] = frozenset({"turns_to_fix"})  # a mean per fixed mistake, not a rate in [0, 1]
METRICS: tuple[str, ...] = ("pass_at_1", "pass_hat_k", "fix_within_1", "fix_within_2", "turns_to_fix",
                            "regression_rate", "recurrence_rate", "maintenance_rate")
Units = dict[str, list[tuple[float, float]]]
DEFAULT_STYLE = "fix"  # what a run without a stored style was played with


@dataclass(frozen=True, slots=True, order=True)
class SuiteKey:
    """What makes stored runs one suite: the model, the sampling temperature and the correction style."""

    model: str
    temperature: float
    style: str = DEFAULT_STYLE

    @property
    def sampling(self) -> str:
        """``greedy`` or ``temperature 0.7``, with the style when it is not the default: a table's label."""
        label = "greedy" if self.temperature == 0 else f"temperature {self.temperature:g}"
        return label if self.style == DEFAULT_STYLE else f"{label}, {self.style} corrections"


def suite_key(record: RunRecord) -> SuiteKey:
    """The suite a ``suite`` run belongs to."""
    return SuiteKey(record.model, float(record.params.temperature), record.style or DEFAULT_STYLE)


def _sample_key(record: RunRecord) -> tuple[str, float, str]:
    """Whose first-turn samples a run's are: model, temperature and dialogue (the style does not reach a
    first turn, and a ``first_try`` run stores none)."""
    assert record.dialogue is not None
    return record.model, float(record.params.temperature), record.dialogue.id


def split_suites(records: Sequence[RunRecord]) -> dict[SuiteKey, list[RunRecord]]:
    """Each suite's runs (in the order its first ``suite`` run appears): its ``suite`` runs and the
    ``first_try`` samples of its model at its temperature."""
    samples: dict[tuple[str, float], list[RunRecord]] = {}
    out: dict[SuiteKey, list[RunRecord]] = {}
    for record in records:
        if record.dialogue is None:
            continue
        if record.protocol == "first_try":
            samples.setdefault((record.model, float(record.params.temperature)), []).append(record)
        elif record.protocol == "suite":
            out.setdefault(suite_key(record), []).append(record)
    for key, runs in out.items():
        runs += samples.get((key.model, key.temperature), [])
    return out


Figures = dict[str, SuiteEstimate]


def stored_suite_figures(records: Sequence[RunRecord]) -> dict[SuiteKey, tuple[int, Figures]]:
    """Per stored suite (:func:`split_suites`): its k (:func:`sample_count` of its own runs, at least 1) and
    every figure with its interval over dialogues: what ``scenarios report`` and the Fixing board show."""
    out: dict[SuiteKey, tuple[int, Figures]] = {}
    for key, runs in split_suites(records).items():
        k = sample_count(runs) or 1
        (units,) = suite_units(runs, k=k).values()
        out[key] = (k, suite_figures(units, means=MEANS))
    return out


def suite_units(records: Sequence[RunRecord], *, k: int) -> dict[SuiteKey, Units]:
    """Per suite (in the order suites first appear), per figure, one pair per dialogue played."""
    samples: dict[tuple[str, float, str], list[RunRecord]] = {}
    for record in records:
        if record.protocol == "first_try" and record.dialogue is not None:
            samples.setdefault(_sample_key(record), []).append(record)
    out: dict[SuiteKey, Units] = {}
    played = [r for r in records if r.protocol == "suite" and r.dialogue is not None]
    # Dialogue order, not the order runs finished or were stored: the intervals' resampling sees the same
    # sequence live and re-read.
    for record in sorted(played, key=lambda r: r.dialogue.id if r.dialogue is not None else ""):
        units = out.setdefault(suite_key(record), {name: [] for name in METRICS})
        counts = dialogue_counts(record, samples.get(_sample_key(record), []), k=k)
        for name in METRICS:
            units[name].append(counts[name])
    return out


def dialogue_counts(suite: RunRecord, samples: Sequence[RunRecord], *,
                    k: int) -> dict[str, tuple[float, float]]:
    """The pairs of one dialogue: its ``suite`` run and its ``first_try`` samples (the suite's first
    reply is a sample too)."""
    replies = [m for m in suite.messages if m.kind == "reply" and not m.scripted]
    first = 1.0 if replies and _correct(replies[0]) else 0.0
    tries = [first] * bool(replies) + [
        1.0 if any(_correct(m) for m in s.messages if m.kind == "reply") else 0.0 for s in samples]
    correct, n = int(sum(tries)), len(tries)
    hat_k = (math.comb(correct, k) / math.comb(n, k), 1.0) if n >= k else (0.0, 0.0)
    chains = _chains(suite)
    fixed = [length for length, ok in chains if ok]
    graded = [m.context for m in replies if m.context is not None and m.context.grade is not None]
    held = [c.maintained for c in graded if c.maintained is not None]
    return {
        "pass_at_1": (first, 1.0 if replies else 0.0),
        "pass_hat_k": hat_k,
        "fix_within_1": (sum(1.0 for length in fixed if length == 1), float(len(chains))),
        "fix_within_2": (sum(1.0 for length in fixed if length <= 2), float(len(chains))),
        "turns_to_fix": (float(sum(fixed)), float(len(fixed))),
        "regression_rate": (float(sum(c.regression for c in graded)), float(len(graded))),
        "recurrence_rate": (float(sum(c.recurrence for c in graded)), float(len(graded))),
        "maintenance_rate": (float(sum(held)), float(len(held))),
    }


def _correct(message: RunMessage) -> bool:
    return message.grade is not None and message.grade.is_correct


def _chains(record: RunRecord) -> list[tuple[int, bool]]:
    """Each mistake: how many corrections followed it, and whether the last one fixed it. A chain starts
    at a wrong reply that a correction followed; the next link corrects that correction's reply. A
    correction of a right reply (the script stating a trap's value) starts none, but a wrong reply to it
    does."""
    by_faulty = {c.faulty: c for c in record.corrections}
    linked: set[int] = set()
    chains = []
    for start in sorted(by_faulty):
        if start in linked or _correct(record.messages[start]):
            continue
        length, link = 1, by_faulty[start]
        linked.add(link.followup)
        while link.outcome != "fixed" and link.followup in by_faulty:
            link, length = by_faulty[link.followup], length + 1
            linked.add(link.followup)
        chains.append((length, link.outcome == "fixed"))
    return chains


def sample_count(records: Sequence[RunRecord]) -> int:
    """The k of stored suites: the most samples of a first turn any dialogue of a suite got, its ``suite``
    run's first reply and the ``first_try`` runs at its temperature (0 when no suite is stored)."""
    counts: dict[tuple[str, float, str, str], int] = {}
    for record in records:
        if record.protocol in ("suite", "first_try") and record.dialogue is not None:
            style = (record.style or DEFAULT_STYLE) if record.protocol == "suite" else ""
            key = (*_sample_key(record), style)
            counts[key] = counts.get(key, 0) + 1
    firsts = {k[:3]: n for k, n in counts.items() if k[3] == ""}  # first_try runs of a dialogue
    return max((n + firsts.get(k[:3], 0) for k, n in counts.items() if k[3]), default=0)


def dialogue_fixed(suite: RunRecord) -> bool:
    """Whether the model fixed every mistake it made in the dialogue within two corrections (a dialogue
    without a mistake counts as fixed: there was nothing to fix)."""
    return all(ok and length <= 2 for length, ok in _chains(suite))


def suite_pairs(records: Sequence[RunRecord]) -> list[tuple[str, str, str, str]]:
    """Pairwise outcomes of the suites: for each generated dialogue two models both played at the same
    temperature with the same correction style, one row
    ``(model_a, model_b, winner, dialogue id)`` with ``winner`` ``a`` (a fixed every mistake within two
    corrections and b did not), ``b``, or ``tie`` (both did, or neither); models in sorted order."""
    played: dict[tuple[str, float, str], dict[str, bool]] = {}  # per dialogue, temperature and style
    for record in records:
        if record.protocol == "suite" and record.dialogue is not None:
            key = suite_key(record)
            played.setdefault((record.dialogue.id, key.temperature, key.style), {})[record.model] = \
                dialogue_fixed(record)
    rows = []
    for setting in sorted(played):
        dialogue_id, outcome = setting[0], played[setting]
        models = sorted(outcome)
        for i, a in enumerate(models):
            for b in models[i + 1:]:
                winner = "tie" if outcome[a] == outcome[b] else ("a" if outcome[a] else "b")
                rows.append((a, b, winner, dialogue_id))
    return rows
