"""Fixit Arena ranking: pure functions over vote counts (Bradley-Terry, Elo, fix rates, pair sampling).

Everything takes plain arrays and returns arrays or small frozen dataclasses: no I/O, no globals.
The db layer aggregates votes into ``wins``/``ties``/``both_bad`` count matrices and calls
:func:`leaderboard`; the arena page calls :func:`sample_pair` for its next battle.
"""

from ranking.bt import DEFAULT_RIDGE, ELO_BASE, ELO_SCALE, BTFit, fit_bt, mle_exists, to_elo
from ranking.counts import A_WINS, B_WINS, BOTH_BAD, TIE, CountsError, PairData, fold_pairs, tally
from ranking.elo import online_elo
from ranking.fixing import (
    Agreement,
    Estimate,
    FixingCounts,
    FixingRow,
    cohen_kappa,
    fixing_table,
    pass_hat_k,
    proportion,
    turns_to_fix,
)
from ranking.leaderboard import Leaderboard, LeaderboardRow, leaderboard
from ranking.outliers import OutlierResult, anomalous_visitors
from ranking.rates import RateRow, first_try_accuracy, fix_rates, rate_table, wilson_interval
from ranking.sampler import pair_gains, sample_pair
from ranking.style import STYLE_FEATURES, StyleFit, fit_style_bt

__all__ = [
    "A_WINS",
    "Agreement",
    "BOTH_BAD",
    "BTFit",
    "B_WINS",
    "CountsError",
    "DEFAULT_RIDGE",
    "ELO_BASE",
    "ELO_SCALE",
    "Estimate",
    "FixingCounts",
    "FixingRow",
    "Leaderboard",
    "LeaderboardRow",
    "OutlierResult",
    "PairData",
    "RateRow",
    "STYLE_FEATURES",
    "StyleFit",
    "TIE",
    "anomalous_visitors",
    "cohen_kappa",
    "first_try_accuracy",
    "fit_bt",
    "fit_style_bt",
    "fix_rates",
    "fixing_table",
    "fold_pairs",
    "leaderboard",
    "mle_exists",
    "online_elo",
    "pair_gains",
    "pass_hat_k",
    "proportion",
    "rate_table",
    "sample_pair",
    "tally",
    "to_elo",
    "turns_to_fix",
    "wilson_interval",
]
