"""The anomalous-voter test: honest visitors kept, a contrarian flagged, p-values by hand."""

from __future__ import annotations

import numpy as np
import pytest

from ranking.counts import A_WINS, B_WINS, TIE, CountsError
from ranking.outliers import anomalous_visitors, vote_p_values


def test_p_values_by_hand() -> None:
    # Pair (0, 1): others voted "0 won" 7 times, "1 won" once, no tie. Smoothed shares 8/11, 2/11, 1/11.
    a = np.array([0] * 8 + [1])
    b = np.array([1] * 8 + [0])
    out = np.array([A_WINS] * 7 + [B_WINS] + [A_WINS])  # last vote: model 1 (side a) won
    who = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9])
    p = vote_p_values(a, b, out, who)
    # Visitor 9 says 1 beat 0; the others (all 8 votes): 0 won 7, 1 won 1 → shares (8, 2, 1) / 11.
    assert p[-1] == pytest.approx((2 + 1) / 11)  # "1 won" (2/11) and the rarer tie (1/11)
    # Visitor 1 said 0 won; others: 0 won 6, 1 won 2 → (7, 3, 1)/11: the commonest outcome, p = 1.
    assert p[0] == pytest.approx(1.0)
    with pytest.raises(CountsError):
        vote_p_values(a, b[:-1], out, who)


def test_a_contrarian_is_flagged_and_honest_visitors_kept() -> None:
    rng = np.random.default_rng(0)
    strength = np.array([1.5, 0.5, -0.5, -1.5])
    rows = []
    for person in range(40):
        for _ in range(30):
            i, j = rng.choice(4, 2, replace=False)
            p_i = 1 / (1 + np.exp(-(strength[i] - strength[j])))
            # Visitor 0 votes for whichever model is weaker, every time.
            winner_is_a = strength[i] < strength[j] if person == 0 else rng.random() < p_i
            rows.append((i, j, A_WINS if winner_is_a else B_WINS, person))
    rows.append((0, 1, TIE, 99))  # a visitor with one vote is never tested
    a, b, out, who = (np.array(col) for col in zip(*rows, strict=True))
    result = anomalous_visitors(a, b, out, who)
    assert result.flagged == (0,) and result.tested == 40
    assert int(result.dropped.sum()) == 30 and not result.dropped[-1]
    with pytest.raises(CountsError):
        anomalous_visitors(a, b, out, who, alpha=0.0)
