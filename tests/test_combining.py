"""Chi-square combining (textnb/models/combining.py): exact against scipy's chi-square tails,
symmetric between the sides, and what it is for (evidence both ways lands mid-way)."""

import numpy as np
import pytest
from scipy.stats import chi2

from textnb.models.combining import chi_square_correction, combine
from textnb.models.evidence import RankedEvidence
import scipy.sparse as sp


def _fisher(clues) -> float:
    """Robinson's score by the textbook route: ln Q(2H, 2n) - ln Q(2S, 2n)."""
    c = np.asarray(clues, dtype=float)
    spam, ham = np.logaddexp(0, c).sum(), np.logaddexp(0, -c).sum()
    return chi2.logsf(2 * ham, 2 * c.size) - chi2.logsf(2 * spam, 2 * c.size)


def test_sum_plus_correction_is_the_ratio_of_the_chi_square_tails():
    rng = np.random.default_rng(0)
    values = rng.normal(0, 5, 200)
    rows = np.sort(rng.integers(0, 30, 200))
    got = combine(values, rows, 31, "chi-square")
    for r in range(31):
        clues = values[rows == r]
        want = _fisher(clues) if clues.size else 0.0
        assert got[r] == pytest.approx(want, abs=1e-9)


def test_the_correction_is_antisymmetric_and_zero_without_clues():
    values = np.array([4.0, -1.5, 2.5, 7.0])
    rows = np.array([0, 0, 0, 2])
    ahead = chi_square_correction(values, rows, 3)
    assert ahead[1] == 0.0
    np.testing.assert_allclose(chi_square_correction(-values, rows, 3), -ahead, atol=1e-12)
    assert combine(values, rows, 3, "sum").tolist() == [5.0, 0.0, 7.0]


def test_a_side_counts_by_its_significance():
    """Each side's total S (or H) counts as -ln Q(2S, 2n): little while S is below about
    the clue count n, then nearly one for one. So weak ham evidence barely offsets strong
    spam evidence, and more evidence on a side always moves the score its way."""
    rows = np.zeros(16, dtype=np.int64)

    def score(spam, ham):
        return combine(np.array([spam] * 8 + [ham] * 8), rows, 1, "chi-square")[0]

    assert score(6.0, -0.5) < score(6.5, -0.5)          # more spam evidence: higher
    assert score(6.0, -4.0) < score(6.0, -0.5)          # more ham evidence: lower
    assert score(6.0, -6.0) == pytest.approx(0.0, abs=1e-9)
    # Summed, eight ham clues of -0.5 take 4 off +48; combined, they take off 1.3.
    assert 0 < score(6.0, -1e-9) - score(6.0, -0.5) < 0.5 * 4


def test_large_evidence_does_not_overflow():
    values = np.array([40.0] * 16 + [-35.0] * 16)
    rows = np.repeat([0, 1], 16)
    got = combine(values, rows, 2, "chi-square")
    assert np.isfinite(got).all() and got[0] > 0 > got[1]


def test_ranked_evidence_combines_the_kept_clues():
    C = sp.csr_matrix(np.array([[5.0, -3.0, 0.4, 2.0, -6.0, 0.0]]))
    ranked = RankedEvidence(C)
    keep = ranked.kept(4, each_side=True, min_strength=0.5)
    assert sorted(ranked.values[keep].tolist()) == [-6.0, -3.0, 2.0, 5.0]
    assert ranked.sums(4, each_side=True, min_strength=0.5, combine="chi-square")[0] == \
        pytest.approx(_fisher([5.0, -3.0, 2.0, -6.0]))


def test_an_unknown_mode_is_refused_by_name():
    with pytest.raises(ValueError, match="'fisher'"):
        combine(np.zeros(1), np.zeros(1, dtype=np.int64), 1, "fisher")
