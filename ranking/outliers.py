"""Anomalous voters: a sequential test of each visitor's votes against everyone else's on the same pairs.

After Chatbot Arena's anomalous-user detection (Chiang et al. 2024, arXiv:2403.04132, §5): each vote
gets a p-value from how the *other* visitors' votes on the same model pair went, and a visitor's
p-values are combined with Fisher's method as their votes arrive, ``M_j = −2 Σ_{i≤j} log p_i`` against
χ² with ``2j`` degrees of freedom, at every ``j`` from ``min_votes`` on, Bonferroni-corrected over those
looks. Decided here:

* a vote's outcome is seen per model (the first model won, the second won, tie/both bad), so side order
  does not matter; the others' outcome shares are Laplace-smoothed (+1 each) so an outcome nobody else
  gave is rare, not impossible;
* the p-value of outcome ``h`` is the others' probability of an outcome at most as likely as ``h``
  (``Σ q_o over q_o ≤ q_h``): a valid discrete p-value, so the test errs on the side of keeping votes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.stats import chi2

from ranking.counts import A_WINS, B_WINS, CountsError

DEFAULT_MIN_VOTES = 5
DEFAULT_ALPHA = 0.01


@dataclass(frozen=True)
class OutlierResult:
    """Visitors flagged and which votes they cast (a boolean mask over the votes given)."""

    flagged: tuple[int, ...]
    dropped: NDArray[np.bool_]
    tested: int  # visitors with at least ``min_votes`` votes


def vote_p_values(model_a: NDArray[np.integer], model_b: NDArray[np.integer],
                  outcome: NDArray[np.integer], visitor: NDArray[np.integer]) -> NDArray[np.float64]:
    """Each vote's p-value under the other visitors' outcome distribution for that pair."""
    a, b = np.asarray(model_a, np.int64), np.asarray(model_b, np.int64)
    out, who = np.asarray(outcome, np.int64), np.asarray(visitor, np.int64)
    if not a.shape == b.shape == out.shape == who.shape:
        raise CountsError("model_a, model_b, outcome and visitor must have one entry per vote")
    low, high = np.minimum(a, b), np.maximum(a, b)
    # Outcome per model of the unordered pair: 0 = the lower index won, 1 = the higher won, 2 = tie.
    lower_won = ((out == A_WINS) & (a == low)) | ((out == B_WINS) & (b == low))
    higher_won = ((out == A_WINS) & (a == high)) | ((out == B_WINS) & (b == high))
    code = np.where(lower_won, 0, np.where(higher_won, 1, 2))
    pair = np.unique(np.stack([low, high], axis=1), axis=0, return_inverse=True)[1].reshape(-1)
    n_pairs = int(pair.max()) + 1 if pair.size else 0
    everyone = np.zeros((n_pairs, 3))
    np.add.at(everyone, (pair, code), 1.0)
    # The visitor's own votes on the pair are taken out: the others' shares.
    key = np.unique(np.stack([who, pair], axis=1), axis=0, return_inverse=True)[1].reshape(-1)
    own = np.zeros((int(key.max()) + 1 if key.size else 0, 3))
    np.add.at(own, (key, code), 1.0)
    others = everyone[pair] - own[key] + 1.0  # Laplace smoothing
    shares = others / others.sum(axis=1, keepdims=True)
    observed = shares[np.arange(code.size), code]
    p: NDArray[np.float64] = np.where(shares <= observed[:, None] + 1e-12, shares, 0.0).sum(axis=1)
    return np.clip(p, 1e-300, 1.0)


def anomalous_visitors(
    model_a: NDArray[np.integer],
    model_b: NDArray[np.integer],
    outcome: NDArray[np.integer],
    visitor: NDArray[np.integer],
    *,
    min_votes: int = DEFAULT_MIN_VOTES,
    alpha: float = DEFAULT_ALPHA,
) -> OutlierResult:
    """Flag visitors whose votes, in the order given (oldest first), fail the sequential Fisher test.

    ``outcome`` uses ``ranking.counts`` codes (A_WINS, B_WINS, TIE, BOTH_BAD); ``visitor`` is any
    integer id (votes of unknown visitors should be left out by the caller).
    """
    if min_votes < 1 or not 0 < alpha < 1:
        raise CountsError("need min_votes >= 1 and 0 < alpha < 1")
    who = np.asarray(visitor, np.int64)
    p = vote_p_values(model_a, model_b, outcome, who)
    flagged: list[int] = []
    tested = 0
    for person in np.unique(who):
        mine = np.flatnonzero(who == person)
        if mine.size < min_votes:
            continue
        tested += 1
        statistic = -2.0 * np.cumsum(np.log(p[mine]))
        looks = np.arange(min_votes, mine.size + 1)
        threshold = chi2.isf(alpha / looks.size, 2 * looks)
        if np.any(statistic[looks - 1] > threshold):
            flagged.append(int(person))
    return OutlierResult(flagged=tuple(flagged), dropped=np.isin(who, flagged), tested=tested)
