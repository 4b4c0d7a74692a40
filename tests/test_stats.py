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


def test_paired_by_unit_averages_inside_a_unit_and_tests_across_units():
    scipy_stats = pytest.importorskip("scipy.stats")
    inner = {0: [4.32, 6.82], 1: [2.0, 3.97], 2: [1.0, -3.0, 0.5]}
    got = stats.paired_by_unit(inner)
    unit_means = [sum(v) / len(v) for v in inner.values()]
    ref = scipy_stats.ttest_1samp(unit_means, 0.0)
    assert got["n"] == 3 and got["p"] == pytest.approx(ref.pvalue)
    assert got["mean"] == pytest.approx(sum(unit_means) / 3)
    assert got["by_unit"] == {"0": 5.57, "1": 2.99, "2": -0.5}
    assert got["wins"] == 2 and got["p_flip"] == pytest.approx(stats.sign_flip(unit_means))
    # pooling the seven inner differences as pairs would claim more than the three units give
    assert stats.paired_t([d for v in inner.values() for d in v])["p"] < got["p"]


def test_two_units_of_two_repeats_are_not_four_pairs():
    # the suite's ELECTRA - MLM: four pooled pairs give p 0.023; the two pre-training seeds 0.19
    inner = {0: [4.32, 6.82], 1: [2.0, 3.97]}
    assert stats.paired_t(inner[0] + inner[1])["p"] == pytest.approx(0.0228, abs=5e-4)
    got = stats.paired_by_unit(inner)
    means = [5.57, 2.985]
    t = (sum(means) / 2) / (abs(means[0] - means[1]) / math.sqrt(2) / math.sqrt(2))
    assert got["p"] == pytest.approx(1 - 2 / math.pi * math.atan(t), abs=1e-3)  # df 1: Cauchy
    assert 0.15 < got["p"] < 0.25
    assert stats.noise_phrase(got) == f"within the noise of 2 pre-training seeds (p {got['p']:.2g})"
    assert stats.noise_phrase({"n": 5, "p": 0.01}) == "p 0.01 over 5 pre-training seeds"
    with pytest.raises(ValueError, match="at least one unit"):
        stats.paired_by_unit({0: []})
