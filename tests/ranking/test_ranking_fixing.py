"""Fix metrics: known answers (Wilson tables, τ-bench's pass^k, Cohen's worked κ) and edge cases."""

from __future__ import annotations

import math

import pytest

from ranking.counts import CountsError
from ranking.fixing import (
    FixingCounts,
    cohen_kappa,
    fix_rate,
    fixing_table,
    flag_rate,
    pass_at_1,
    pass_hat_k,
    proportion,
    turns_to_fix,
)


def test_wilson_known_values_and_empty() -> None:
    est = fix_rate(8, 10)  # Wilson 95% for 8/10: 0.490–0.943 (Newcombe 1998, table I)
    assert (est.rate, est.n) == (0.8, 10)
    assert est.low == pytest.approx(0.4902, abs=1e-4) and est.high == pytest.approx(0.9433, abs=1e-4)
    empty = pass_at_1(0, 0)
    assert math.isnan(empty.rate) and (empty.low, empty.high, empty.n) == (0.0, 1.0, 0)
    assert empty.text() == "–" and est.text() == "80% (49–94, n=10)"
    assert flag_rate(0, 7).low == 0.0 and flag_rate(7, 7).high == 1.0
    with pytest.raises(CountsError):
        proportion(3, 2)


def test_pass_hat_k_is_taus_unbiased_estimator() -> None:
    # Three groups of five first-question attempts: two all right, one with a miss.
    est = pass_hat_k([(5, 5), (4, 5), (5, 5)], 5)
    assert est.rate == pytest.approx(2 / 3) and est.n == 3
    assert pass_hat_k([(3, 6)], 2).rate == pytest.approx(3 / 15)  # C(3,2) / C(6,2)
    # k = 1 is the plain success rate; groups too small for k are left out.
    assert pass_hat_k([(2, 5), (1, 5)], 1).rate == pytest.approx(0.3)
    assert pass_hat_k([(2, 3)], 5).n == 0
    # One group of five, all right: pass^5 = 1 with Wilson's interval for 1/1.
    single = pass_hat_k([(5, 5)], 5)
    assert (single.rate, single.high) == (1.0, 1.0) and single.low == pytest.approx(0.2065, abs=1e-4)
    with pytest.raises(CountsError):
        pass_hat_k([(1, 5)], 0)
    with pytest.raises(CountsError):
        pass_hat_k([(6, 5)], 5)


def test_cohen_kappa_worked_example() -> None:
    # Wikipedia's example: 50 items, yes/yes 20, yes/no 5, no/yes 10, no/no 15 → p_o 0.7, p_e 0.5, κ 0.4.
    person = [True] * 25 + [False] * 25
    grader = [True] * 20 + [False] * 5 + [True] * 10 + [False] * 15
    agreement = cohen_kappa(person, grader)
    assert agreement.kappa == pytest.approx(0.4) and agreement.n == 50 and agreement.observed == 0.7
    se = math.sqrt(0.7 * 0.3 / (50 * 0.25))
    assert agreement.low == pytest.approx(0.4 - 1.959964 * se, abs=1e-6)
    assert agreement.high == pytest.approx(0.4 + 1.959964 * se, abs=1e-6)
    assert agreement.text() == "0.40 (0.15–0.65, n=50)"


def test_cohen_kappa_edges() -> None:
    assert cohen_kappa([True, False, True], [True, False, True]).kappa == pytest.approx(1.0)
    assert cohen_kappa([True, True], [True, True]).kappa == 1.0  # one answer from both: p_e = 1
    assert cohen_kappa([True, False], [False, True]).kappa == pytest.approx(-1.0)
    assert cohen_kappa([], []).n == 0 and cohen_kappa([], []).text() == "–"
    with pytest.raises(CountsError):
        cohen_kappa([True], [True, False])


def test_turns_to_fix_takes_counts_per_bucket() -> None:
    assert turns_to_fix({"never": 2, "1": 2, "3+": 2, "2": 1}) == {"1": 2, "2": 1, "3+": 2, "never": 2}
    assert list(turns_to_fix({"never": 1})) == ["1", "2", "3+", "never"]
    assert turns_to_fix({}) == {"1": 0, "2": 0, "3+": 0, "never": 0}
    with pytest.raises(CountsError):
        turns_to_fix({"4": 1})
    with pytest.raises(CountsError):
        turns_to_fix({"1": -1})


def test_fixing_table_ranks_by_fix_rate_with_overlap_ranks() -> None:
    rows = fixing_table([
        FixingCounts("weak", fixed=2, judged=40, graded=50, chatty=10),
        FixingCounts("strong", fixed=38, judged=40, first_correct=4, first_attempts=5, tasks=((4, 5),),
                     graded=50, regressions=1, recurrences=2, turns={"1": 2, "2": 1, "never": 1}),
        FixingCounts("close", fixed=36, judged=40),
        FixingCounts("unjudged"),
    ])
    assert [r.model for r in rows] == ["strong", "close", "weak", "unjudged"]
    assert [r.rank for r in rows[:3]] == [1, 1, 3]  # strong and close overlap; weak is below both
    strong = rows[0]
    assert strong.pass_at_1.rate == 0.8 and strong.pass_hat_k.rate == 0.0 and strong.pass_hat_k.n == 1
    assert (strong.regression.rate, strong.recurrence.rate) == (0.02, 0.04)
    assert strong.turns_to_fix == {"1": 2, "2": 1, "3+": 0, "never": 1}
    assert rows[2].chatty.rate == 0.2 and rows[3].fix_rate.n == 0


def test_kappa_from_a_table_equals_kappa_from_labels() -> None:
    from ranking.fixing import kappa_from_table

    assert kappa_from_table(20, 5, 10, 15).kappa == pytest.approx(0.4)
    assert kappa_from_table(0, 0, 0, 0).n == 0
    with pytest.raises(CountsError):
        kappa_from_table(-1, 0, 0, 0)
