"""The paired tests of minielectra.experiments.stats against scipy (where installed) and closed
forms."""

import itertools
import math

import pytest

from minielectra.experiments import stats


@pytest.mark.parametrize("df, t, p", [(1, 12.706, 0.05), (4, 2.776, 0.05), (9, 3.250, 0.01),
                                      (30, 2.042, 0.05), (2, 0.0, 1.0)])
def test_t_two_sided_matches_the_printed_table(df, t, p):
    assert stats.t_two_sided(t, df) == pytest.approx(p, abs=2e-4)


def test_paired_t_against_scipy():
    scipy_stats = pytest.importorskip("scipy.stats")
    for diffs in ([1.0, 2.0, -0.5, 3.0, 0.7], [0.1, -0.2, 0.05, 0.3], [5.0, 4.0, 6.0, 5.5, 4.5, 7.0]):
        ref = scipy_stats.ttest_1samp(diffs, 0.0)
        got = stats.paired_t(diffs)
        assert got["t"] == pytest.approx(ref.statistic) and got["p"] == pytest.approx(ref.pvalue)


def test_sign_flip_against_a_naive_enumeration():
    diffs = [1.5, -0.5, 2.0, 0.25, 1.0]
    count = 0
    for signs in itertools.product([1, -1], repeat=5):
        if abs(sum(s * d for s, d in zip(signs, diffs))) >= abs(sum(diffs)) - 1e-12:
            count += 1
    assert stats.sign_flip(diffs) == count / 32
    assert stats.sign_flip([1.0] * 5) == 2 / 32  # the smallest p-value 5 seeds can give
    assert math.isnan(stats.paired_t([1.0])["p"])
    with pytest.raises(ValueError, match="2\\^n"):
        stats.sign_flip([])
