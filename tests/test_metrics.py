"""Tests for textnb.evaluation.metrics: hand-computed
values, brute force, and sklearn as an oracle."""

import math
import subprocess
import sys

import numpy as np
import pytest

from textnb.evaluation.metrics import (
    confusion,
    hm_at_sm,
    hm_pct,
    lam_pct,
    one_minus_auc_pct,
    roc_auc,
    sm_at_hm,
    sm_pct,
    summary,
    tcr,
    weighted_accuracy,
)

# Ten hams and five spams; spam 0.9 ties the second-highest ham.
HAM = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]
SPAM = [0.5, 0.85, 0.9, 0.97, 0.99]
Y = np.array([0] * len(HAM) + [1] * len(SPAM))
S = np.array(HAM + SPAM)


def _brute_auc(y, scores):
    y = np.asarray(y, dtype=bool)
    wins = 0.0
    for s in scores[y]:
        for h in scores[~y]:
            wins += 1.0 if s > h else 0.5 if s == h else 0.0
    return wins / (y.sum() * (~y).sum())


def _brute_sm_at_hm(y, scores, hm):
    y = np.asarray(y, dtype=bool)
    k = math.floor(hm * (~y).sum() + 1e-9)
    candidates = sorted(set(scores.tolist()) | {-math.inf})
    t = min(c for c in candidates if (scores[~y] > c).sum() <= k)
    return 100.0 * (scores[y] <= t).sum() / y.sum()


def _brute_hm_at_sm(y, scores, sm):
    y = np.asarray(y, dtype=bool)
    k = math.floor(sm * y.sum() + 1e-9)
    # Spam iff score >= c; the cut c ranges over the scores and +inf.
    candidates = sorted(set(scores.tolist()) | {math.inf})
    c = max(c for c in candidates if (scores[y] < c).sum() <= k)
    return 100.0 * (scores[~y] >= c).sum() / (~y).sum()


def _random_tied(seed, n=300, levels=7):
    """Labels and integer scores from few levels, so ties across classes abound."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    scores = rng.integers(0, levels, size=n) + 2 * y  # spam a bit higher on average
    return y, scores.astype(float)


# --- ROC AUC -------------------------------------------------------------------


def test_auc_textbook_example():
    # The sklearn docstring example: three of the four spam-ham pairs are ordered.
    assert roc_auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == 0.75


def test_auc_counts_ties_half():
    # Pairs: (0.5 vs 0.5) tie = 1/2, (0.5 vs 0.2) = 1, (0.9 vs both) = 2 -> 3.5 / 4.
    assert roc_auc([0, 1, 0, 1], [0.5, 0.5, 0.2, 0.9]) == 0.875
    assert roc_auc([0, 1], [0.3, 0.3]) == 0.5
    assert one_minus_auc_pct([0, 1, 0, 1], [0.5, 0.5, 0.2, 0.9]) == 12.5


def test_auc_hand_example():
    # 50 pairs: spam 0.5 beats 4 hams and ties 1 (4.5); 0.85 beats 8; 0.9 beats 8 and ties 1 (8.5);
    # 0.97 and 0.99 beat all 10.
    assert roc_auc(Y, S) == pytest.approx((4.5 + 8 + 8.5 + 10 + 10) / 50)


@pytest.mark.parametrize("seed", range(5))
def test_auc_matches_brute_force_and_sklearn(seed):
    skm = pytest.importorskip("sklearn.metrics")
    y, scores = _random_tied(seed)
    auc = roc_auc(y, scores)
    assert auc == pytest.approx(_brute_auc(y, scores), abs=1e-12)
    assert auc == pytest.approx(skm.roc_auc_score(y, scores), abs=1e-12)
    assert one_minus_auc_pct(y, scores) == pytest.approx(100 * (1 - auc), abs=1e-10)


def test_auc_sklearn_continuous_scores():
    skm = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(42)
    y = rng.random(2000) < 0.25
    scores = rng.normal(size=2000) + 1.5 * y
    assert roc_auc(y, scores) == pytest.approx(skm.roc_auc_score(y, scores), abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_auc_invariances(seed):
    y, scores = _random_tied(seed)
    auc = roc_auc(y, scores)
    # Only the order matters: a strictly increasing transform changes nothing.
    assert roc_auc(y, np.exp(scores) * 3 - 7) == auc
    # Reversing the scores, or swapping the labels, mirrors the AUC.
    assert roc_auc(y, -scores) == pytest.approx(1 - auc)
    assert roc_auc(~y, scores) == pytest.approx(1 - auc)
    # Infinite scores (saturated log-odds) are ordinary extremes.
    assert roc_auc(y, np.where(scores == scores.max(), np.inf, scores)) == auc


def test_auc_separable_and_bool_or_int_labels():
    assert roc_auc(np.array([False, True, True]), [-np.inf, 0.0, np.inf]) == 1.0
    assert one_minus_auc_pct([0, 1, 1], [0.0, 0.5, 1.0]) == 0.0
    assert roc_auc([0.0, 1.0], [0.2, 0.1]) == 0.0


# --- confusion, hm%, sm% ----------------------------------------------------------


def test_confusion_hand_counts():
    y = [1, 1, 1, 0, 0, 0, 0]
    pred = [True, True, False, True, False, False, False]
    assert confusion(y, pred) == {"tp": 2, "fp": 1, "tn": 3, "fn": 1}


def test_hm_sm_at_threshold_is_strict():
    # Spam iff score > threshold: the ham at 0.9 is not flagged at threshold 0.9,
    # and the spam at 0.9 is missed.
    assert hm_pct(Y, S, 0.9) == 10.0  # only the ham at 0.95
    assert sm_pct(Y, S, 0.9) == 60.0  # 0.5, 0.85, 0.9
    assert hm_pct(Y, S, 0.49) == 60.0
    assert sm_pct(Y, S, 0.49) == 0.0


# --- sm at hm, hm at sm ----------------------------------------------------------------


def test_sm_at_hm_hand_example():
    # hm = 10% of 10 hams allows k = 1 ham above the threshold; the threshold is
    # the 2nd highest ham, 0.9. Spams at or below it (0.5, 0.85 and the tied 0.9) are missed.
    assert sm_at_hm(Y, S, hm=0.1) == 60.0
    # k = 0: threshold at the top ham, 0.95; only 0.97 and 0.99 are caught.
    assert sm_at_hm(Y, S, hm=0.001) == 60.0
    assert sm_at_hm(Y, S, hm=0.0) == 60.0
    # k = 2: threshold 0.8; 0.85, 0.9, 0.97, 0.99 caught.
    assert sm_at_hm(Y, S, hm=0.2) == 20.0
    # Every ham may be flagged: nothing is missed.
    assert sm_at_hm(Y, S, hm=1.0) == 0.0


def test_sm_at_hm_tied_hams_stay_below_budget():
    # Two hams tie at the top: with k = 1 the threshold is that tied value, so no ham
    # is above it (0 <= 1) and the spam tied with them is missed.
    y = [0, 0, 0, 1, 1]
    s = [0.9, 0.9, 0.1, 0.9, 0.95]
    assert sm_at_hm(y, s, hm=0.5) == 50.0
    assert hm_pct(y, s, 0.9) == 0.0


def test_hm_at_sm_hand_example():
    # k = floor(0.2 * 5) = 1 spam may be missed: the cut sits just below the 2nd lowest
    # spam, 0.85, so hams at 0.9 and 0.95 are flagged.
    assert hm_at_sm(Y, S, sm=0.2) == 20.0
    # k = 0: cut below the lowest spam, 0.5; the ham tied at 0.5 is flagged with the 5 above it.
    assert hm_at_sm(Y, S, sm=0.001) == 60.0
    assert hm_at_sm(Y, S, sm=1.0) == 0.0


def test_allowed_errors_reads_the_decimal():
    # 0.29 * 100 is 28.999999999999996 in binary; 29 hams may be flagged, not 28.
    y = np.array([0] * 100 + [1])
    s = np.concatenate([np.arange(100.0), [70.5]])
    # Hams 71..99 (29 of them) above 70.5 -> with k = 29 the threshold is ham 70, spam caught.
    assert sm_at_hm(y, s, hm=0.29) == 0.0
    assert sm_at_hm(y, s, hm=0.28) == 100.0


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("rate", [0.0, 0.001, 0.01, 0.05, 0.2])
def test_at_readings_match_brute_force(seed, rate):
    y, scores = _random_tied(seed, n=200, levels=5)
    assert sm_at_hm(y, scores, rate) == pytest.approx(_brute_sm_at_hm(y, scores, rate))
    assert hm_at_sm(y, scores, rate) == pytest.approx(_brute_hm_at_sm(y, scores, rate))


@pytest.mark.parametrize("seed", range(3))
def test_sm_at_hm_threshold_respects_budget(seed):
    rng = np.random.default_rng(seed)
    y = rng.random(3000) < 0.3
    scores = np.round(rng.normal(size=3000) + 2 * y, 1)
    k = math.floor(0.01 * (~y).sum())
    ham_desc = np.sort(scores[~y])[::-1]
    t = ham_desc[k]
    assert (scores[~y] > t).sum() <= k
    assert sm_at_hm(y, scores, 0.01) == sm_pct(y, scores, t)


def test_mirror_symmetry():
    # hm at sm on (y, s) is sm at hm on (not y, -s).
    y, scores = _random_tied(7)
    for rate in (0.0, 0.01, 0.1):
        assert hm_at_sm(y, scores, rate) == sm_at_hm(~y, -scores, rate)


# --- lam%, TCR, weighted accuracy ----------------------------------------------------------


def test_lam_is_geometric_mean_of_odds():
    # lam(1%, 4%): odds 1/99 and 4/96, geometric mean sqrt(1/99 * 4/96) = 0.020515...
    odds = math.sqrt((1 / 99) * (4 / 96))
    assert lam_pct(1.0, 4.0) == pytest.approx(100 * odds / (1 + odds))
    assert lam_pct(1.0, 4.0) == pytest.approx(2.010283, abs=1e-6)
    assert lam_pct(3.0, 3.0) == pytest.approx(3.0)
    assert lam_pct(1.0, 4.0) == pytest.approx(lam_pct(4.0, 1.0))


def test_lam_extremes_need_counts_and_are_corrected():
    with pytest.raises(ValueError, match="n_ham and n_spam"):
        lam_pct(0.0, 1.0)
    with pytest.raises(ValueError, match="n_ham and n_spam"):
        lam_pct(1.0, 100.0)
    # 0 of 1000 hams and 10 of 1000 spams: rates 0.5/1001 and 10.5/1001.
    h, s = 0.5 / 1001, 10.5 / 1001
    odds = math.sqrt(h / (1 - h) * s / (1 - s))
    assert lam_pct(0.0, 1.0, n_ham=1000, n_spam=1000) == pytest.approx(100 * odds / (1 + odds))
    assert lam_pct(0.0, 0.0, n_ham=1000, n_spam=1000) == pytest.approx(100 * 0.5 / 1001)
    # Every spam missed, no ham flagged (a filter that passes everything): finite, and
    # the odds cancel to exactly 50%.
    assert lam_pct(0.0, 100.0, n_ham=966, n_spam=966) == pytest.approx(50.0)


def test_tcr_and_weighted_accuracy_hand_values():
    assert tcr(n_spam=100, fp=1, fn=5, lam=9) == pytest.approx(100 / 14)
    assert tcr(n_spam=100, fp=0, fn=0, lam=999) == math.inf
    assert tcr(n_spam=100, fp=0, fn=100, lam=1) == 1.0  # no better than no filter
    # 90 hams (1 flagged), 10 spams (2 missed), lambda 9: (9*89 + 8) / (9*90 + 10).
    assert weighted_accuracy(tp=8, fp=1, tn=89, fn=2, lam=9) == pytest.approx(809 / 820)
    assert weighted_accuracy(tp=8, fp=1, tn=89, fn=2, lam=1) == pytest.approx(0.97)


def test_summary_is_consistent_with_the_parts():
    out = summary(Y, S, threshold=0.9)
    assert out["n_ham"] == 10 and out["n_spam"] == 5
    assert (out["tp"], out["fp"], out["tn"], out["fn"]) == (2, 1, 9, 3)
    assert out["auc"] == roc_auc(Y, S)
    assert out["one_minus_auc_pct"] == pytest.approx(one_minus_auc_pct(Y, S))
    assert out["hm_pct"] == hm_pct(Y, S, 0.9) and out["sm_pct"] == sm_pct(Y, S, 0.9)
    assert out["lam_pct"] == pytest.approx(lam_pct(10.0, 60.0, n_ham=10, n_spam=5))
    assert out["sm_pct_at_hm_0.1pct"] == sm_at_hm(Y, S, 0.001)
    assert out["hm_pct_at_sm_0.1pct"] == hm_at_sm(Y, S, 0.001)
    assert out["tcr_lam9"] == pytest.approx(5 / (9 * 1 + 3))
    assert out["wacc_lam999"] == pytest.approx((999 * 9 + 2) / (999 * 10 + 5))
    assert set(out) >= {"tcr_lam1", "tcr_lam999", "wacc_lam1", "wacc_lam9"}


# --- bad input ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: roc_auc([0, 1, 1], [0.1, 0.2]), "shape"),
        (lambda: roc_auc([1, 1], [0.1, 0.2]), "both classes"),
        (lambda: roc_auc(["ham", "spam"], [0.1, 0.2]), "labels == 'spam'"),
        (lambda: roc_auc([0, 2], [0.1, 0.2]), r"only 0 and 1.*\[2\]"),
        (lambda: roc_auc([0, 1], [0.1, np.nan]), "NaN"),
        (lambda: sm_at_hm(Y, S, hm=0.1 * 100), "fraction"),
        (lambda: lam_pct(120.0, 1.0), "percentage"),
        (lambda: lam_pct(1.0, 1.0, n_ham=10), "both n_ham and n_spam"),
        (lambda: tcr(10, 1, 1, lam=0), "positive"),
        (lambda: hm_pct([1, 1], [0.1, 0.2], 0.5), "at least one ham"),
    ],
)
def test_bad_input_names_the_problem(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_single_string_is_rejected():
    with pytest.raises(TypeError, match="not a single string"):
        confusion("spam", [True])


def test_importing_metrics_does_not_import_sklearn():
    # sklearn is a test-only dependency; the metrics run on numpy alone.
    code = "import sys, textnb.evaluation.metrics; sys.exit('sklearn' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
