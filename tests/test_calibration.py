"""Calibration maps: PAV against scikit-learn, Platt against a known sigmoid, and the
property that makes isotonic the default: its Bayes rule is the least-cost threshold."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit

from textnb.decision import calibration as cal
from textnb.errors import ModelFormatError
from textnb.evaluation.tune import min_cost_threshold

rng = np.random.RandomState(0)
# Scores with ties (integers) and overlapping classes, as out-of-fold log-odds are.
S = rng.randint(-20, 21, size=400).astype(float)
Y = (rng.uniform(size=400) < expit(S / 5)).astype(int)


def cost(y, scores, threshold, lam):
    flagged = np.asarray(scores) > threshold
    y = np.asarray(y).astype(bool)
    return lam * np.sum(flagged & ~y) + np.sum(~flagged & y)


def test_isotonic_equals_sklearn_isotonic_regression():
    from sklearn.isotonic import IsotonicRegression

    m = cal.fit(S, Y, "isotonic", end_weight=0, ham_tail=0)
    ref = IsotonicRegression(out_of_bounds="clip").fit(S, Y)
    grid = np.linspace(-25, 25, 1001)  # between knots, on them, and beyond both ends
    np.testing.assert_allclose(cal.predict_proba(m, grid), ref.predict(grid), atol=1e-12)


def test_isotonic_is_monotone_and_strictly_inside_0_1_with_end_weight():
    m = cal.fit(S, Y)
    p = cal.predict_proba(m, np.linspace(-100, 100, 2001))
    assert np.all(np.diff(p) >= 0)
    assert 0 < p.min() and p.max() < 1
    # Separable data: plain PAV says 0 and 1; the half counts keep p off them.
    s, y = np.arange(10.0), np.array([0] * 5 + [1] * 5)
    assert cal.predict_proba(cal.fit(s, y, end_weight=0, ham_tail=0), [0, 9]).tolist() == [0.0, 1.0]
    np.testing.assert_allclose(cal.predict_proba(cal.fit(s, y), [0, 9]), [0.5 / 5.5, 5 / 5.5])


def test_platt_recovers_a_known_sigmoid():
    r = np.random.RandomState(1)
    s = r.normal(0, 4, size=40_000)
    y = (r.uniform(size=s.size) < expit(0.5 * s - 1.0)).astype(int)
    m = cal.fit(s, y, "platt")
    assert m["a"] == pytest.approx(0.5, abs=0.02) and m["b"] == pytest.approx(-1.0, abs=0.05)


def test_platt_stays_finite_on_separable_data():
    m = cal.fit(np.arange(10.0), np.array([0] * 5 + [1] * 5), "platt")
    assert math.isfinite(m["a"]) and m["a"] > 0


@pytest.mark.parametrize("method", cal.METHODS)
@pytest.mark.parametrize("lam", [0.2, 1, 9, 999])
def test_threshold_is_the_same_rule_as_p_above_lambda_over_one_plus_lambda(method, lam):
    m = cal.fit(S, Y, method)
    t = cal.log_odds_threshold(m, lam)
    s = np.linspace(-30, 30, 6001)
    away = np.abs(s - t) > 1e-9
    by_p = cal.predict_proba(m, s) > lam / (1 + lam)
    np.testing.assert_array_equal((s > t)[away], by_p[away])


def test_threshold_infinite_when_no_score_reaches_the_probability():
    m = cal.fit(np.arange(10.0), np.array([0] * 9 + [1]))
    assert cal.log_odds_threshold(m, 999) == math.inf
    assert cal.log_odds_threshold({"method": "isotonic", "x": [0, 1], "p": [0.6, 0.7]}, 1) == -math.inf


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-6, 6), st.booleans()), min_size=2, max_size=60),
       st.sampled_from([0.25, 1.0, 3.0, 9.0, 999.0]))
def test_plain_pav_bayes_rule_is_the_least_cost_threshold(data, lam):
    # PAV's blocks are the vertices of the ROC convex hull, and the least λ·FP + FN is
    # always reached at one of them: p > λ/(1+λ) flags exactly the blocks worth flagging.
    s = np.array([d[0] for d in data], dtype=float)
    y = np.array([d[1] for d in data], dtype=int)
    if y.min() == y.max():
        return
    m = cal.fit(s, y, end_weight=0, ham_tail=0)
    best = min_cost_threshold(y, s, lam)[1]
    assert cost(y, s, cal.log_odds_threshold(m, lam), lam) == pytest.approx(best)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-6, 6), st.booleans()), min_size=2, max_size=60),
       st.sampled_from([1.0, 9.0, 999.0]))
def test_end_weight_is_half_a_ham_above_and_half_a_spam_below_everything(data, lam):
    # With the half counts the rule minimises the cost on the data plus those two
    # imaginary messages; flagging nothing at all (threshold +inf) is the one choice
    # that does not flag the imaginary ham.
    s = np.array([d[0] for d in data], dtype=float)
    y = np.array([d[1] for d in data], dtype=int)
    if y.min() == y.max():
        return
    w = cal.END_WEIGHT

    def augmented(t):
        return cost(y, s, t, lam) + (lam * w if t < math.inf else 0.0) + w

    candidates = [-math.inf, math.inf] + list(np.unique(s) + 0.5)
    best = min(augmented(t) for t in candidates)
    assert augmented(cal.log_odds_threshold(cal.fit(s, y, ham_tail=0), lam)) == pytest.approx(best)


def test_ham_tail_counts_by_hand():
    # 40 hams 0..39: share 0.25 gives k = HAM_TAIL_MIN = 10 tail hams (30..39) over
    # u = 29, excesses 1..10 summing to 55; the posterior predictive expects
    # 10·(1 + (x - 29) / 55)^-10 hams above x (the plug-in exponential, 10·exp(-(x - 29)
    # / 5.5), expects fewer far out: at x = 40, 1.35 against 1.62 hams).
    hams = np.arange(40.0)
    levels = np.array([28.0, 29.0, 31.0, 40.0])
    start, counts, above_top = cal.ham_tail_counts(hams, levels, 0.25)
    assert start == 1
    above = 10 * (1 + (np.array([29.0, 31.0, 40.0]) - 29) / 55) ** -10
    assert above[2] == pytest.approx(1.615, abs=1e-3)
    # the level at u holds the ham seen there (29); the levels above, the tail's share
    assert counts.tolist() == pytest.approx([1.0, above[0] - above[1], above[1] - above[2]])
    assert above_top == pytest.approx(above[2])
    assert sum(counts[1:]) + above_top == pytest.approx(10.0)  # the tail keeps its k hams
    assert cal.ham_tail_counts(hams, levels, 0.2) is None  # 8 hams are not a tail
    assert cal.ham_tail_counts(np.arange(10.0), levels, 1.0) is None  # nothing below it


def test_ham_tail_lifts_the_extreme_threshold_past_the_highest_ham():
    # A ham-heavy sample with spams scattered above the highest ham: read as seen, the
    # first spam above that ham is already "sure" at λ = 999 (the block above it holds
    # no ham but the imaginary half); the tail expects hams to thin out, not to stop.
    rng = np.random.default_rng(7)
    hams, spams = rng.normal(0, 3, 3000), rng.normal(20, 6, 1000)
    s, y = np.r_[hams, spams], np.r_[np.zeros(3000), np.ones(1000)]
    seen = cal.log_odds_threshold(cal.fit(s, y, ham_tail=0), 999)
    tailed = cal.log_odds_threshold(cal.fit(s, y), 999)
    assert seen <= hams.max() + 1 < tailed
    # Under 1,000 hams the top 1% is not a tail: the map is the one read as seen.
    few = np.r_[hams[:999], spams]
    yf = np.r_[np.zeros(999), np.ones(1000)]
    assert cal.fit(few, yf)["x"] == cal.fit(few, yf, ham_tail=0)["x"]


def test_brier_and_ece_by_hand():
    y = np.array([0, 0, 1, 1])
    p = np.array([0.1, 0.3, 0.6, 0.9])
    assert cal.brier_score(y, p) == pytest.approx((0.01 + 0.09 + 0.16 + 0.01) / 4)
    # Bins (10): 0.1 -> bin 1, 0.3 -> bin 3, 0.6 -> bin 6, 0.9 -> bin 9; each alone.
    assert cal.expected_calibration_error(y, p) == pytest.approx((0.1 + 0.3 + 0.4 + 0.1) / 4)
    bins = cal.reliability(y, np.array([0.0, 0.05, 1.0, 0.95]), n_bins=2)
    assert bins["count"].tolist() == [2, 2]
    np.testing.assert_allclose(bins["mean_p"], [0.025, 0.975])
    np.testing.assert_allclose(bins["spam_rate"], [0.0, 1.0])


@pytest.mark.parametrize("calibration,message", [
    ({"method": "beta"}, "newer textnb"),
    ({"method": "isotonic", "format": 99, "x": [0], "p": [0.5]}, "newer textnb"),
    ([1, 2], "not a calibration map"),
])
def test_a_damaged_or_newer_calibration_is_named(calibration, message):
    with pytest.raises(ModelFormatError, match=message):
        cal.predict_proba(calibration, [0.0])


@pytest.mark.parametrize("args,message", [
    ((S, Y, "beta"), "unknown calibration method 'beta'"),
    ((S, np.zeros_like(Y)), "needs both classes"),
    ((S[:3], Y), "same length"),
    ((S, Y + 1), "only 0 and 1"),
])
def test_bad_fit_input_is_named(args, message):
    with pytest.raises(ValueError, match=message):
        cal.fit(*args)
