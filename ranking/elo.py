"""Online Elo over the ordered vote stream (for comparison with Bradley-Terry only).

Online Elo depends on vote order and K; Bradley-Terry does not, which is why the leaderboard uses BT.
The update is inherently sequential, so it runs as a tight loop over Python floats (about 0.25 µs a
vote), which beats any vectorised formulation for the 100-model case.
"""

from __future__ import annotations

import math

import numpy as np

from ranking.counts import A_WINS, B_WINS, CountsError, FloatArray, IntArray


def online_elo(
    model_a: IntArray,
    model_b: IntArray,
    outcome: IntArray,
    *,
    n_models: int,
    k: float = 4.0,
    base: float = 1000.0,
    scale: float = 400.0,
) -> FloatArray:
    """Ratings after replaying votes in order: ``r_a += K (s − E)``, ``E = 1/(1 + 10^((r_b − r_a)/scale))``.

    ``outcome`` codes: 0 = a won, 1 = b won, 2 = tie, 3 = both bad (scored as a tie, ``s = ½``).
    """
    a = np.asarray(model_a, dtype=np.int64)
    b = np.asarray(model_b, dtype=np.int64)
    o = np.asarray(outcome, dtype=np.int64)
    if not (a.shape == b.shape == o.shape) or a.ndim != 1:
        raise CountsError("model_a, model_b and outcome must be 1-D arrays of the same length")
    if a.size and (a.min() < 0 or b.min() < 0 or max(a.max(), b.max()) >= n_models):
        raise CountsError("model index out of range")
    if np.any(a == b):
        raise CountsError("a vote pits a model against itself")
    if np.any((o < 0) | (o > 3)):
        raise CountsError("outcome codes must be 0..3")
    score = np.where(o == A_WINS, 1.0, np.where(o == B_WINS, 0.0, 0.5))
    # Work in natural-log units x = c·r, so each step needs no multiply inside exp; K scales alike.
    c = math.log(10.0) / scale
    kc = float(k) * c
    x = [float(base) * c] * n_models
    exp = math.exp
    for i, j, ks in zip(a.tolist(), b.tolist(), (score * kc).tolist(), strict=True):
        xi = x[i]
        xj = x[j]
        d = ks - kc / (1.0 + exp(xj - xi))
        x[i] = xi + d
        x[j] = xj - d
    return np.asarray(x, dtype=np.float64) / c
