"""Success rates with intervals and paired comparisons (lookplangraph.evaluation.paired)."""

from __future__ import annotations

import math

import pytest

from lookplangraph.evaluation.paired import compare, outcomes, sign_test, wilson


def test_the_wilson_interval_matches_the_formula_and_its_edges():
    lo, hi = wilson(27, 47)
    assert (round(lo, 2), round(hi, 2)) == (0.43, 0.70)
    assert wilson(0, 10)[0] == 0.0 and 0.27 < wilson(0, 10)[1] < 0.31  # never a zero-width interval
    assert wilson(10, 10)[1] == 1.0 and wilson(0, 0) == (0.0, 1.0)
    for bad in ((5, 4), (-1, 3), (1, -1)):
        with pytest.raises(ValueError):
            wilson(*bad)


def test_the_sign_test_is_the_exact_binomial_tail_doubled():
    assert sign_test(0, 0) == 1.0 and sign_test(3, 3) == 1.0
    assert math.isclose(sign_test(5, 0), 2 / 32)  # 5 of 5 one way: p = 2 * 0.5**5
    assert math.isclose(sign_test(1, 8), 2 * (1 + 9) / 512)
    assert sign_test(8, 1) == sign_test(1, 8)
    with pytest.raises(ValueError):
        sign_test(-1, 2)


def test_two_runs_are_compared_on_the_tasks_both_finished():
    a = outcomes([{"split": "office", "task_id": f"office-{i:02d}", "success": i in (1, 2, 3)} for i in range(1, 7)])
    b = {"office/office-01": True, "office/office-02": False, "office/office-04": True, "office/office-05": True,
         "office/office-06": False, "office/office-09": True}
    p = compare(a, b)
    assert p.tasks == 5 and p.both == 1 and p.neither == 1
    assert p.gains == ("office/office-04", "office/office-05") and p.losses == ("office/office-02",)
    assert p.only_a == ("office/office-03",) and p.only_b == ("office/office-09",)
    assert math.isclose(p.p_value, 1.0)
    text = p.text("lpg-v5", "new")
    assert "lpg-v5 2 (" in text and "new 3 (" in text and "new gains 2, loses 1" in text
    assert "solved by new only: office/office-04, office/office-05" in text and "1 of lpg-v5, 1 of new" in text
