"""From naive Bayes log-odds to a P(spam) that means what it says.

Naive Bayes multiplies evidence it assumes independent; mail's tokens are not,
so its log-odds are far too confident (out of fold on SpamAssassin the highest ham
reaches +24, where expit says P(spam) = 1 - 4e-11; +59 with one ranking of 20 clues). A calibration map is a monotone
function from log-odds to probability, fitted on *out-of-fold* log-odds (each
message scored by a model that never saw it; ``textnb.evaluation.cross_validation``), so that
among messages given p, a fraction p is spam. With it, the Bayes rule of
``textnb.decision.costs`` becomes usable as written: spam iff p_spam > λ / (1 + λ).

Two maps, stored as plain JSON-able dicts inside the model file:

- ``isotonic``: the pool-adjacent-violators (PAV) fit of the labels on the
  log-odds: the non-decreasing step function closest to the 0/1 labels in
  squared error; knots are joined linearly (as scikit-learn's
  ``IsotonicRegression``) and held flat beyond the data. Its blocks are the
  vertices of the ROC convex hull, so on the data it was fitted on, the rule
  p > λ/(1+λ) *is* the threshold of least cost λ·FP + FN, for every λ at
  once (tests/test_calibration.py checks it). One map, every cost ratio.
- ``platt``: Platt's sigmoid p = expit(a·s + b), fitted by maximum likelihood
  with his smoothed targets (n_spam + 1) / (n_spam + 2) and 1 / (n_ham + 2).
  Two parameters, smooth, but it assumes the two classes' log-odds are
  logistic-shaped with one common slope.

Which one. 5-fold cross-validation on the training splits only, default
settings, each fold's scores mapped (and thresholded) by a map fitted on the other
four folds' (``bench/tune_costs.py``, "calibration_cv" in its JSON):

                            Brier    ECE     log loss   held-out cost λ = 1 / 9 / 999
    SpamAssassin  raw       0.00653  0.0067  0.104      33 / 122 / 9,021  (ln λ)
                  isotonic  0.00582  0.0033  0.024      36 / 111 / 1,244
                  Platt     0.00542  0.0030  0.020      33 / 105 /   466
    Enron 1-3     raw       0.00966  0.0091  0.085      145 / 669 / 36,158
                  isotonic  0.00876  0.0020  0.034      150 / 521 / 2,648
                  Platt     0.00879  0.0051  0.035      151 / 537 / 6,267

The evidence is split: Platt wins every column on SpamAssassin, isotonic every
column on Enron (2.75 times the data), by 2.5x in ECE and 2.4x in cost at λ = 999.
``isotonic`` is the default because (1) its rule *is* the least-cost threshold the
tuning is asked for, so one mechanism serves both, and any λ asked later; (2) it
assumes no shape, where Platt's one slope cannot fit both classes' tails when they
differ (Enron's ECE); (3) summed over the two corpora its held-out cost is lower at
λ = 9 and 999. The test splits, scored once after the choice, agree at λ = 9 (cost
20 vs 22, 124 vs 129) and split at 999 (69 vs 103; 2,411 vs 2,309).
(Those figures are of a 15-clue single ranking; today's isotonic and Platt costs
side by side: docs/accuracy.md, "Tuned costs".)

With the each-side default (8 spam + 8 ham clues), same protocol:

                            Brier    ECE     log loss   held-out cost λ = 1 / 9 / 999
    SpamAssassin  raw       0.00576  0.0055  0.039      34 / 120 / 5,041  (ln λ)
                  isotonic  0.00531  0.0030  0.023      32 /  85 / 1,322
                  Platt     0.00537  0.0036  0.022      32 / 103 / 1,408
    Enron 1-3     raw       0.00741  0.0066  0.042      120 / 533 / 18,164
                  isotonic  0.00681  0.0025  0.025      126 / 339 / 2,036
                  Platt     0.00661  0.0027  0.023      117 / 316 / 1,249

Here reason (3) does not hold: summed, Platt's held-out cost is lower at λ = 999
(2,657 against 3,358) and level at 9 (419 against 424); on the test splits isotonic
is lower at 999 (91 vs 98, 1,259 vs 1,297) and level at 9 (26 vs 26, 63 vs 63).
Isotonic stays for (1) and (2); with the each-side scores the choice is open, and it
needs more than two corpora to settle.

Its weakness is the tails: the block above the highest out-of-fold ham would get
p = 1 exactly, "no ham was ever seen this high" read as "none will be". Hence
``END_WEIGHT`` below, and above the highest hams a fitted tail (``HAM_TAIL``): how
fast hams thin out above the top ones, so that at λ = 999 the threshold does not
rest on the one highest ham.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, log_expit

from ..errors import ModelFormatError

__all__ = [
    "METHODS",
    "brier_score",
    "expected_calibration_error",
    "fit",
    "log_odds_threshold",
    "predict_proba",
    "probability_range",
    "reliability",
]

METHODS = ("isotonic", "platt")
FORMAT = 1
# Guo et al. (ICML 2017) report ECE over 15 equal-width bins; 10 is the more common
# choice in the spam literature's reliability plots. Both are shown by bench/tune_costs.py.
N_BINS = 10
# The isotonic map pools in half a ham above the highest score and half a spam below
# the lowest (the Krichevsky-Trofimov half count), so that the top block, where no
# out-of-fold ham scored, reads "S / (S + 1/2)" and not "never a ham here": p = 1 would
# say the data shows a ham rate under 1 in λ for every λ.
END_WEIGHT = 0.5
# Above the highest hams the map would read its ham rate off one or two messages, and at
# λ = 999 the threshold would rest on them. So the top ``HAM_TAIL`` share of the
# out-of-fold ham scores (when that is ``HAM_TAIL_MIN`` hams or more) is replaced by a
# fitted exponential tail, pooled as its posterior predictive (a Lomax tail), which
# counts the uncertainty of the fitted scale. The evidence, and the alternatives
# measured: docs/design/calibration.md.
HAM_TAIL = 0.01
HAM_TAIL_MIN = 10


def fit(log_odds, y, method: str = "isotonic", end_weight: float = END_WEIGHT,
        ham_tail: float = HAM_TAIL) -> dict:
    """A calibration map from log-odds to P(spam), as a JSON-able dict.

    Parameters
    ----------
    log_odds : array-like of shape (n_docs,)
        Out-of-fold spam log-odds (or any score monotone in spamminess).
    y : array-like of shape (n_docs,)
        True labels, bool or 0/1, 1 = spam; both classes needed.
    method : {'isotonic', 'platt'}
    end_weight : float >= 0, default 0.5
        isotonic only: the weight of the imaginary ham above every score and
        spam below every score (see ``END_WEIGHT``); 0 is plain PAV.
    ham_tail : float in [0, 1), default 0.01
        isotonic only: the share of the highest hams replaced by a fitted
        exponential tail (see ``HAM_TAIL``); 0 reads them as seen. Not used when
        the share holds fewer than ``HAM_TAIL_MIN`` hams.

    Returns
    -------
    calibration : dict
        ``method``, ``format``, ``n_ham``, ``n_spam`` and the map's parameters
        (isotonic: knots ``x``, ``p``; platt: ``a``, ``b``).
    """
    s, y = _check(log_odds, y)
    n_spam = int(y.sum())
    n_ham = y.size - n_spam
    if n_ham == 0 or n_spam == 0:
        raise ValueError(f"calibration needs both classes; got n_ham={n_ham}, n_spam={n_spam}")
    base = {"method": method, "format": FORMAT, "n_ham": n_ham, "n_spam": n_spam}
    if method == "isotonic":
        if not end_weight >= 0:
            raise ValueError(f"end_weight={end_weight!r} must be >= 0 (0: plain PAV)")
        if not 0 <= ham_tail < 1:
            raise ValueError(f"ham_tail={ham_tail!r} must be in [0, 1) (0: no fitted tail)")
        x, p = _isotonic_knots(s, y, end_weight, ham_tail)
        return {**base, "end_weight": end_weight, "ham_tail": ham_tail,
                "x": x.tolist(), "p": p.tolist()}
    if method == "platt":
        a, b = _platt(s, y)
        return {**base, "a": a, "b": b}
    raise ValueError(f"unknown calibration method {method!r}; use one of {', '.join(METHODS)}")


def predict_proba(calibration: dict, log_odds) -> np.ndarray:
    """Calibrated P(spam) for each log-odds value, shape (n_docs,)."""
    s = np.asarray(log_odds, dtype=np.float64)
    method = _method(calibration)
    if method == "isotonic":
        return np.interp(s, calibration["x"], calibration["p"])
    return expit(calibration["a"] * s + calibration["b"])


def probability_range(calibration: dict) -> tuple[float, float]:
    """The lowest and highest P(spam) the map gives any log-odds: (0, 1) for Platt's
    sigmoid; an isotonic map's end knots, short of 0 and 1 by its end weights."""
    if _method(calibration) == "platt":
        return 0.0, 1.0
    p = calibration["p"]
    return float(p[0]), float(p[-1])


def log_odds_threshold(calibration: dict, cost_ratio: float) -> float:
    """The log-odds above which the calibrated P(spam) exceeds λ / (1 + λ).

    Spam iff ``log_odds > threshold`` is then the same rule as spam iff
    ``predict_proba(calibration, log_odds) > λ / (1 + λ)``. ``inf`` when no
    log-odds reach that probability (nothing is worth flagging at this λ),
    ``-inf`` when every log-odds exceeds it.
    """
    if not cost_ratio > 0:
        raise ValueError(f"cost_ratio={cost_ratio!r} must be > 0")
    c = cost_ratio / (1.0 + cost_ratio)
    method = _method(calibration)
    if method == "platt":
        a, b = calibration["a"], calibration["b"]
        if a <= 0:
            return math.inf if expit(b) <= c else -math.inf
        return (math.log(c) - math.log1p(-c) - b) / a
    x = np.asarray(calibration["x"], dtype=np.float64)
    p = np.asarray(calibration["p"], dtype=np.float64)
    below = np.flatnonzero(p <= c)
    if below.size == 0:
        return -math.inf
    i = int(below[-1])  # p is non-decreasing: knots 0..i are at or under c
    if i == len(p) - 1:
        return math.inf
    # On the segment from knot i (p <= c) to knot i+1 (p > c) the map is linear.
    return float(x[i] + (x[i + 1] - x[i]) * (c - p[i]) / (p[i + 1] - p[i]))



def review_thresholds(calibration: dict, cost_ratio: float, review_cost: float
                      ) -> tuple[float, float] | None:
    """The log-odds (low, high) between which a tuned model's verdict is 'unsure':
    where its calibrated P(spam) crosses the ends of ``costs.review_region``, widened
    to hold its spam threshold at λ. None when a look is never worth ``review_cost``."""
    from .costs import review_log_odds

    return review_log_odds(cost_ratio, review_cost, log_odds_threshold(calibration, cost_ratio),
                           lambda p: log_odds_threshold(calibration, p / (1.0 - p)))

def brier_score(y, p) -> float:
    """Mean squared difference between P(spam) and the 0/1 label (Brier 1950)."""
    p, y = _check(p, y)
    return float(np.mean((p - y) ** 2))


def reliability(y, p, n_bins: int = N_BINS) -> dict[str, np.ndarray]:
    """Equal-width bins of P(spam) and what fraction of each bin was spam.

    Returns
    -------
    bins : dict of ndarrays of shape (n_bins,)
        ``count`` (messages per bin), ``mean_p`` (their mean P(spam)) and
        ``spam_rate`` (the fraction that was spam); NaN in empty bins. Bin b
        holds b/n <= p < (b+1)/n, the last bin also p = 1.
    """
    p, y = _check(p, y)
    if (p < 0).any() or (p > 1).any():
        raise ValueError("probabilities must lie in [0, 1]")
    which = np.minimum((p * n_bins).astype(np.int64), n_bins - 1)
    count = np.bincount(which, minlength=n_bins).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_p = np.bincount(which, weights=p, minlength=n_bins) / count
        spam_rate = np.bincount(which, weights=y, minlength=n_bins) / count
    return {"count": count, "mean_p": mean_p, "spam_rate": spam_rate}


def expected_calibration_error(y, p, n_bins: int = N_BINS) -> float:
    """ECE: Σ_b (n_b / n) |mean P(spam) in b − spam rate in b|, over equal-width bins.

    Naeini, Cooper & Hauskrecht (AAAI 2015); 0 is perfect calibration.
    """
    bins = reliability(y, p, n_bins)
    full = bins["count"] > 0
    gap = np.abs(bins["mean_p"][full] - bins["spam_rate"][full])
    return float(np.sum(bins["count"][full] * gap) / bins["count"].sum())


# -- fitting --------------------------------------------------------------------
def _isotonic_knots(s: np.ndarray, y: np.ndarray, end_weight: float, ham_tail: float = 0.0
                    ) -> tuple[np.ndarray, np.ndarray]:
    """PAV over the distinct scores; knots at both ends of each constant block.

    Tied scores are one point (weight = their count, value = their spam rate):
    no threshold can separate them, so neither may the map. The imaginary spam
    below and ham above everything are pooled in, then dropped. With a fitted ham
    tail (``ham_tail_counts``) the hams counted from the tail's start up are the
    tail's expected ones, and its mass above the top score is the ham above everything.
    """
    levels, which = np.unique(s, return_inverse=True)
    spams = np.bincount(which, weights=y)
    hams = np.bincount(which).astype(np.float64) - spams
    ham_above_top = end_weight
    tail = ham_tail_counts(s[y == 0], levels, ham_tail) if ham_tail > 0 else None
    if tail is not None:
        start, expected, ham_above_top = tail
        hams[start:] = expected
    weight = spams + hams
    value = spams / weight
    if end_weight > 0 or ham_above_top > 0:
        value = np.concatenate([[1.0], value, [0.0]])
        weight = np.concatenate([[end_weight], weight, [ham_above_top]])
        fitted = _pav(value, weight)[1:-1]
    else:
        fitted = _pav(value, weight)
    # Keep the first and last level of every run of equal fitted values.
    change = np.flatnonzero(np.diff(fitted) != 0)
    keep = np.unique(np.concatenate([[0], change, change + 1, [len(levels) - 1]]))
    return levels[keep], fitted[keep]


def ham_tail_counts(ham_scores, levels: np.ndarray, share: float):
    """Expected ham counts at the score levels from where the fitted ham tail starts.

    The top ``share`` of the ham scores (k hams; with fewer than ``HAM_TAIL_MIN``
    there is no tail: 1,000 hams at the default share) are the tail. It starts at the
    next ham score u; their excesses over u are exponential with an unknown rate, and
    the posterior predictive given their sum S expects k·(1 + (x - u) / S)^-k hams above
    x (see ``HAM_TAIL``).
    A level gets the hams expected between the level below it and itself (the level
    at u: the hams seen there, outside the tail); the mass above the top level is
    returned apart. ``None`` when k is too small or the top hams have no spread.

    Returns (index of the level at u, counts for the levels from it up, count above
    the top level).
    """
    h = np.sort(np.asarray(ham_scores, dtype=np.float64))[::-1]
    k = int(share * h.size)  # the whole hams in the share
    if k < HAM_TAIL_MIN or h.size <= k:  # a tail needs a tail's worth of hams
        return None
    u = h[k]
    excess = float(np.sum(h[:k] - u))
    if not excess > 0:
        return None
    start = int(np.searchsorted(levels, u))  # u is a ham score, so levels[start] == u
    above = k * (1.0 + (levels[start:] - u) / excess) ** -k  # expected hams above each level
    counts = np.empty_like(above)
    counts[0] = float(np.sum(h[k:] == u))
    counts[1:] = above[:-1] - above[1:]
    return start, counts, float(above[-1])


def _pav(value: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Pool adjacent violators: the weighted least-squares non-decreasing fit.

    A block keeps its totals (sum of weight·value, sum of weight) and its mean is
    their quotient, so a pooled block of 7.5 spams in 15 is exactly 0.5, however
    the pooling went (running means drift in the last bit, and at λ = 1 a decision
    turns on p > 1/2).
    """
    totals: list[float] = []
    weights: list[float] = []
    sizes: list[int] = []
    for v, w in zip(value.tolist(), weight.tolist()):
        totals.append(v * w)
        weights.append(w)
        sizes.append(1)
        # Merge backwards while the last block falls below the one before it.
        while len(totals) > 1 and totals[-2] * weights[-1] >= totals[-1] * weights[-2]:
            totals[-2] += totals[-1]
            weights[-2] += weights[-1]
            sizes[-2] += sizes[-1]
            del totals[-1], weights[-1], sizes[-1]
    return np.repeat(np.array(totals) / np.array(weights), sizes)


def _platt(s: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Platt (1999) scaling: maximum likelihood a, b with smoothed targets."""
    n_spam = y.sum()
    n_ham = y.size - n_spam
    # Platt's targets keep the fit finite on separable data (a -> inf otherwise).
    t = np.where(y > 0, (n_spam + 1.0) / (n_spam + 2.0), 1.0 / (n_ham + 2.0))
    scale = float(np.std(s)) or 1.0  # fit on standardised scores: better conditioned

    def loss(theta):
        z = theta[0] * s / scale + theta[1]
        value = -np.sum(t * log_expit(z) + (1 - t) * log_expit(-z))
        r = expit(z) - t
        return value, np.array([np.sum(r * s / scale), np.sum(r)])

    result = minimize(loss, np.array([1.0, 0.0]), jac=True, method="BFGS")
    a, b = result.x
    return float(a / scale), float(b)


def _method(calibration: dict) -> str:
    try:
        method = calibration["method"]
        version = calibration.get("format", FORMAT)
    except (TypeError, KeyError, AttributeError):
        raise ModelFormatError("the model's calibration is not a calibration map; run "
                               "'textnb tune --write' again") from None
    if method not in METHODS or version > FORMAT:
        raise ModelFormatError(f"the model's calibration (method {method!r}, format {version}) "
                               "is from a newer textnb; upgrade textnb (pip install -U textnb)")
    return method


def _check(values, y) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(y, (str, bytes)):
        raise TypeError("y must be an array of labels, not a single string")
    values = np.asarray(values, dtype=np.float64)
    y = np.asarray(y)
    if values.ndim != 1 or values.shape != y.shape:
        raise ValueError(f"scores have shape {values.shape} and y has shape {y.shape}; "
                         "both must be 1-D and the same length")
    if np.isnan(values).any():
        raise ValueError(f"{int(np.isnan(values).sum())} scores are NaN; every message needs one")
    bad = np.setdiff1d(np.unique(y), [0, 1])
    if bad.size:
        raise ValueError(f"y must hold only 0 and 1 (1 = spam), found {bad[:5].tolist()}")
    return values, y.astype(np.float64)
