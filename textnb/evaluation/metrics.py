"""The spam-filtering field's evaluation metrics, in numpy only.

Conventions shared by every function here:

- ``y`` is a 1-D bool or 0/1 array, 1 = spam; ``scores`` is a same-length
  float array of *spamminess* (higher = more spam): probabilities, log-odds,
  anything monotone in the filter's belief.
- A message is called spam iff ``score > threshold``.
- Rates whose name ends in ``_pct`` are percentages (0-100); the target rates
  passed *into* :func:`sm_at_hm` and :func:`hm_at_sm` are fractions
  (``hm=0.001`` is 0.1%), as in TREC's "sm% at hm = 0.1%".
- ``hm`` (ham misclassification) is the false-positive rate, ``sm`` (spam
  misclassification) the false-negative rate, as in the TREC spam track.

References: Cormack & Lynam, "TREC 2005 Spam Track Overview" (1-ROCA%, lam%,
sm% at hm); Androutsopoulos et al., "An Evaluation of Naive Bayesian Anti-Spam
Filtering", ECML 2000 workshop (TCR, weighted accuracy, lambda = 1, 9, 999).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

__all__ = [
    "confusion",
    "hm_at_sm",
    "hm_pct",
    "lam_pct",
    "one_minus_auc_pct",
    "roc_auc",
    "sm_at_hm",
    "sm_pct",
    "summary",
    "tcr",
    "weighted_accuracy",
]

# TREC 2005-2007 report the spam misclassification rate at hm = 0.1%: one
# false positive in a thousand hams is about what a user tolerates.
TREC_HM = 0.001
# Androutsopoulos et al. (2000) weigh a false positive 1, 9 and 999 times a
# false negative (flag and keep / flag and bounce / delete unseen).
ANDROUTSOPOULOS_LAMBDAS = (1, 9, 999)
# lam% smooths each rate as (errors + 0.5) / (n + 1): half an error added to
# both cells (Haldane-Anscombe), the usual fix for the log diagnostic odds
# ratio that lam% is equivalent to. It keeps the logit finite at 0 *and* at
# 100%. CEAS 2007 (run by the TREC organisers) used (errors + 0.5) / (n + 0.5),
# which differs by less than 0.5/n relative but is undefined when every
# message of a class is misclassified -- spamprobe does exactly that on SMS
# texts, which it reads as empty (bench/peers.py).
_LAM_CORRECTION = 0.5


def _check_y(y) -> np.ndarray:
    if isinstance(y, (str, bytes)):
        raise TypeError("y must be an array of labels, not a single string")
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D, got shape {y.shape}")
    if y.dtype == bool:
        return y
    if y.dtype.kind not in "iuf":
        raise ValueError(
            f"y must be bool or 0/1 (1 = spam), got dtype {y.dtype}; "
            "for string labels pass labels == 'spam'"
        )
    bad = np.setdiff1d(np.unique(y), [0, 1])
    if bad.size:
        raise ValueError(f"y must hold only 0 and 1 (1 = spam), found {bad[:5].tolist()}")
    return y.astype(bool)


def _check(y, scores) -> tuple[np.ndarray, np.ndarray]:
    y = _check_y(y)
    scores = np.asarray(scores, dtype=np.float64)
    if scores.shape != y.shape:
        raise ValueError(f"y has shape {y.shape} and scores has shape {scores.shape}; they must match")
    if np.isnan(scores).any():
        raise ValueError(f"scores contain {int(np.isnan(scores).sum())} NaN values; every message needs a score")
    return y, scores


def _counts(y: np.ndarray) -> tuple[int, int]:
    n_spam = int(y.sum())
    return y.size - n_spam, n_spam


def _require_both_classes(y: np.ndarray, what: str) -> tuple[int, int]:
    n_ham, n_spam = _counts(y)
    if n_ham == 0 or n_spam == 0:
        raise ValueError(f"{what} needs both classes; got n_ham={n_ham}, n_spam={n_spam}")
    return n_ham, n_spam


def _auc_fraction(y: np.ndarray, scores: np.ndarray) -> tuple[int, int]:
    """Twice the Mann-Whitney U of spam over ham, and twice n_spam * n_ham.

    Counting twice keeps the half credit for ties in integers, so the ratio
    (and 1 minus it) is exact until the final division.
    """
    n_ham, n_spam = _require_both_classes(y, "ROC AUC")
    _, level = np.unique(scores, return_inverse=True)
    n_levels = int(level.max()) + 1
    spam_at = np.bincount(level[y], minlength=n_levels).astype(np.int64)
    ham_at = np.bincount(level[~y], minlength=n_levels).astype(np.int64)
    ham_below = np.cumsum(ham_at) - ham_at
    # A spam beats every ham strictly below it (1) and ties the hams at its level (1/2).
    twice_u = int(2 * (spam_at * ham_below).sum() + (spam_at * ham_at).sum())
    return twice_u, 2 * n_spam * n_ham


def roc_auc(y, scores) -> float:
    """Area under the ROC curve: P(a random spam outscores a random ham).

    Ties count one half (the Mann-Whitney U statistic), so this equals
    ``sklearn.metrics.roc_auc_score`` with tied scores included.

    Parameters
    ----------
    y : array-like of shape (n_docs,)
        True labels, bool or 0/1, 1 = spam.
    scores : array-like of shape (n_docs,)
        Spamminess; only the order matters.

    Returns
    -------
    auc : float in [0, 1]
    """
    twice_u, twice_pairs = _auc_fraction(*_check(y, scores))
    return twice_u / twice_pairs


def one_minus_auc_pct(y, scores) -> float:
    """TREC's (1-ROCA)%: ``100 * (1 - AUC)``, computed without cancellation."""
    twice_u, twice_pairs = _auc_fraction(*_check(y, scores))
    return 100.0 * (twice_pairs - twice_u) / twice_pairs


def confusion(y, is_spam_pred) -> dict[str, int]:
    """Confusion counts, spam being the positive class.

    Returns
    -------
    counts : dict with int values ``tp`` (spam caught), ``fp`` (ham flagged),
        ``tn`` (ham passed), ``fn`` (spam missed).
    """
    y = _check_y(y)
    pred = _check_y(is_spam_pred)
    if pred.shape != y.shape:
        raise ValueError(f"y has shape {y.shape} and is_spam_pred has shape {pred.shape}; they must match")
    return {
        "tp": int(np.count_nonzero(y & pred)),
        "fp": int(np.count_nonzero(~y & pred)),
        "tn": int(np.count_nonzero(~y & ~pred)),
        "fn": int(np.count_nonzero(y & ~pred)),
    }


def hm_pct(y, scores, threshold: float) -> float:
    """Ham misclassification %: hams with ``score > threshold``, per 100 hams."""
    y, scores = _check(y, scores)
    n_ham, _ = _counts(y)
    if n_ham == 0:
        raise ValueError("hm% needs at least one ham; y holds only spam")
    return 100.0 * np.count_nonzero(scores[~y] > threshold) / n_ham


def sm_pct(y, scores, threshold: float) -> float:
    """Spam misclassification %: spams with ``score <= threshold``, per 100 spams."""
    y, scores = _check(y, scores)
    _, n_spam = _counts(y)
    if n_spam == 0:
        raise ValueError("sm% needs at least one spam; y holds only ham")
    return 100.0 * np.count_nonzero(scores[y] <= threshold) / n_spam


def _allowed_errors(rate: float, n: int, name: str) -> int:
    """floor(rate * n), with rate read as the decimal it was written as.

    ``0.29 * 100`` is 28.999999999999996 in binary floating point; reading the
    rate through its shortest repr (``Fraction('0.29')``) gives the intended 29.
    """
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"{name}={rate} is a fraction in [0, 1] (0.001 means 0.1%), not a percentage")
    return math.floor(Fraction(repr(float(rate))) * n)


def sm_at_hm(y, scores, hm: float = TREC_HM) -> float:
    """Spam misclassification % at the lowest threshold whose ham misclassification is <= ``hm``.

    With ``k = floor(hm * n_ham)`` hams allowed above the threshold, the
    threshold is the (k+1)-th highest ham score (``-inf`` when ``k >= n_ham``):
    hams scoring *above* it are flagged, so at most ``k`` are. Every spam
    scoring at or below it is missed, including spams *tied* with that ham:
    ties are resolved against the filter, with no interpolation between ROC
    points. The result is therefore exact and reproducible, and can only be
    worse than an interpolated ROC reading.

    Parameters
    ----------
    y : array-like of shape (n_docs,)
        True labels, bool or 0/1, 1 = spam.
    scores : array-like of shape (n_docs,)
        Spamminess.
    hm : float, default 0.001
        Tolerated ham misclassification, a *fraction* (0.001 = 0.1%).

    Returns
    -------
    sm_pct : float, in percent.
    """
    y, scores = _check(y, scores)
    n_ham, n_spam = _require_both_classes(y, "sm at hm")
    k = _allowed_errors(hm, n_ham, "hm")
    if k >= n_ham:
        return 0.0
    threshold = np.sort(scores[~y])[::-1][k]
    return 100.0 * np.count_nonzero(scores[y] <= threshold) / n_spam


def hm_at_sm(y, scores, sm: float = TREC_HM) -> float:
    """Ham misclassification % at the highest threshold whose spam misclassification is <= ``sm``.

    The mirror image of :func:`sm_at_hm`. With ``k = floor(sm * n_spam)``
    spams allowed to be missed, the cut sits just below the (k+1)-th lowest
    spam score ``s`` (``+inf`` when ``k >= n_spam``): spams scoring below ``s``
    are missed (at most ``k``), and every ham scoring ``s`` or more is flagged,
    hams tied with ``s`` included, again resolving ties against the filter.

    Returns
    -------
    hm_pct : float, in percent.
    """
    y, scores = _check(y, scores)
    n_ham, n_spam = _require_both_classes(y, "hm at sm")
    k = _allowed_errors(sm, n_spam, "sm")
    if k >= n_spam:
        return 0.0
    lowest_caught = np.sort(scores[y])[k]
    return 100.0 * np.count_nonzero(scores[~y] >= lowest_caught) / n_ham


def _logit(p: float) -> float:
    return math.log(p) - math.log1p(-p)


def lam_pct(hm: float, sm: float, n_ham: int | None = None, n_spam: int | None = None) -> float:
    """TREC's logistic average misclassification, lam%.

    ``lam = logit^-1((logit(hm) + logit(sm)) / 2)``: the geometric mean of the
    two error *odds*, turned back into a rate. It rewards the same factor of
    improvement in either error equally.

    A rate of 0 or 100% has an infinite logit. With the counts given, both
    rates are smoothed as ``(errors + 0.5) / (n + 1)`` before the logit
    (half an error added to either side, as for a log odds ratio); the TREC
    2005 overview defines lam% but not its value at the extremes, and the
    CEAS 2007 ``(errors + 0.5) / (n + 0.5)`` fails at 100%. Without counts, a
    rate of 0% or 100% raises.

    Parameters
    ----------
    hm, sm : float
        Ham and spam misclassification, in percent (what :func:`hm_pct` and
        :func:`sm_pct` return).
    n_ham, n_spam : int, optional
        Number of hams and spams the rates were measured on; giving them turns
        the correction on (always, not only at 0 and 100%).

    Returns
    -------
    lam_pct : float, in percent.
    """
    for name, rate in (("hm", hm), ("sm", sm)):
        if not 0.0 <= rate <= 100.0:
            raise ValueError(f"{name}={rate} must be a percentage in [0, 100]")
    if (n_ham is None) != (n_spam is None):
        raise ValueError("give both n_ham and n_spam, or neither")
    if n_ham is not None:
        if n_ham <= 0 or n_spam <= 0:
            raise ValueError(f"n_ham={n_ham} and n_spam={n_spam} must both be positive")
        c = _LAM_CORRECTION
        h = (hm / 100.0 * n_ham + c) / (n_ham + 2 * c)
        s = (sm / 100.0 * n_spam + c) / (n_spam + 2 * c)
    else:
        h, s = hm / 100.0, sm / 100.0
        if h in (0.0, 1.0) or s in (0.0, 1.0):
            raise ValueError(
                f"lam% is undefined at hm={hm}%, sm={sm}% (infinite logit); "
                "pass n_ham and n_spam to apply the (errors + 0.5) / (n + 1) correction"
            )
    mean_logit = (_logit(h) + _logit(s)) / 2.0
    return 100.0 / (1.0 + math.exp(-mean_logit))


def tcr(n_spam: int, fp: int, fn: int, lam: float) -> float:
    """Total cost ratio of Androutsopoulos et al.: ``n_spam / (lam * fp + fn)``.

    The cost of using no filter (every spam gets through) over the cost of
    using this one, a false positive counting ``lam`` false negatives. Above 1
    the filter pays off; ``inf`` when it makes no error.
    """
    if lam <= 0:
        raise ValueError(f"lam={lam} must be positive (the cost of a false positive in false negatives)")
    cost = lam * fp + fn
    return math.inf if cost == 0 else n_spam / cost


def weighted_accuracy(tp: int, fp: int, tn: int, fn: int, lam: float) -> float:
    """Weighted accuracy of Androutsopoulos et al., each ham counting ``lam`` times.

    ``(lam * tn + tp) / (lam * (tn + fp) + tp + fn)``
    """
    if lam <= 0:
        raise ValueError(f"lam={lam} must be positive (the weight of a ham)")
    total = lam * (tn + fp) + tp + fn
    if total == 0:
        raise ValueError("weighted accuracy of zero messages is undefined")
    return (lam * tn + tp) / total


def summary(y, scores, threshold: float, lams=ANDROUTSOPOULOS_LAMBDAS) -> dict[str, float]:
    """Every metric of this module for one set of scores and one threshold.

    Parameters
    ----------
    y : array-like of shape (n_docs,)
        True labels, bool or 0/1, 1 = spam.
    scores : array-like of shape (n_docs,)
        Spamminess.
    threshold : float
        Spam iff ``score > threshold``; used by the confusion counts, hm%, sm%,
        lam%, TCR and weighted accuracy. The AUC and the ``*_at_*`` readings
        do not depend on it.
    lams : iterable of float, default (1, 9, 999)
        The false-positive weights for TCR and weighted accuracy.

    Returns
    -------
    summary : dict
        ``n_ham, n_spam, threshold, auc, one_minus_auc_pct, tp, fp, tn, fn,
        hm_pct, sm_pct, lam_pct, sm_pct_at_hm_0.1pct, hm_pct_at_sm_0.1pct``,
        then ``tcr_lam{λ}`` and ``wacc_lam{λ}`` for each λ.
    """
    y, scores = _check(y, scores)
    n_ham, n_spam = _require_both_classes(y, "summary")
    twice_u, twice_pairs = _auc_fraction(y, scores)
    counts = confusion(y, scores > threshold)
    hm = 100.0 * counts["fp"] / n_ham
    sm = 100.0 * counts["fn"] / n_spam
    out: dict[str, float] = {
        "n_ham": n_ham,
        "n_spam": n_spam,
        "threshold": float(threshold),
        "auc": twice_u / twice_pairs,
        "one_minus_auc_pct": 100.0 * (twice_pairs - twice_u) / twice_pairs,
        **counts,
        "hm_pct": hm,
        "sm_pct": sm,
        "lam_pct": lam_pct(hm, sm, n_ham=n_ham, n_spam=n_spam),
        "sm_pct_at_hm_0.1pct": sm_at_hm(y, scores, TREC_HM),
        "hm_pct_at_sm_0.1pct": hm_at_sm(y, scores, TREC_HM),
    }
    for lam in lams:
        out[f"tcr_lam{lam:g}"] = tcr(n_spam, counts["fp"], counts["fn"], lam)
        out[f"wacc_lam{lam:g}"] = weighted_accuracy(lam=lam, **counts)
    return out
