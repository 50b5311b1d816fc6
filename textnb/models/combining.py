"""How a message's selected clues become one score: their sum, or chi-square combining.

``model.combine = "sum"`` is naive Bayes as written: the score is the prior log-odds
plus the log-likelihood ratios (LLRs) of the selected clues.

``model.combine = "chi-square"`` (opt-in) is Fisher's method as Gary Robinson proposed it for
spam and SpamBayes and bogofilter use it ("A Statistical Approach to the Spam Problem",
Linux Journal 107, 2003; SpamBayes' ``chi2_spamprob``). Each clue's LLR ``c`` is read
as a probability ``f = 1 / (1 + e^-c)`` that a message holding it is spam; then

    S = Σ -ln(1 - f) = Σ softplus(c)      (how strongly the clues say spam)
    H = Σ -ln f      = Σ softplus(-c)     (how strongly they say ham)

and, under the null hypothesis that the n clues' ``f`` are uniform at random, ``2S``
and ``2H`` are chi-square with ``2n`` degrees of freedom. The score is the log of the
ratio of the two tail probabilities,

    score = prior + ln Q(2H, 2n) - ln Q(2S, 2n),     Q = chi-square survival function,

which, since ``S - H = Σ c`` exactly and ``Q(2m, 2n) = e^-m P_n(m)`` with
``P_n(m) = Σ_{i<n} m^i / i!``, is

    score = prior + Σ c  +  [ln P_n(H) - ln P_n(S)].

So it is the naive Bayes sum plus one correction term, which ``explain`` prints: exact,
not an approximation. What the correction does: a side's total counts by its
*significance*, ``-ln Q(2m, 2n)``, which stays near 0 while ``m`` is below about the
clue count ``n`` and then grows nearly one for one. Weak evidence on a side barely
counts (eight ham clues of -0.5 take 4 off a sum of +48, but 1.3 off the combined
score), and when both totals are well above ``n`` the score is pulled toward 0 by
about ``(n - 1) ln(S / H)``.

Why it is not the default: it was tried for "strong evidence both
ways" (SpamBayes and bogofilter combine this way, and on the chronological validation
splits, with the pair cap lifted, it lowered sm% at hm 0.1% on SpamAssassin from 7.9 to
4.3 and on Enron from 13.8 to 10.8), but over hash cross-validation of all four corpora plus chronological
validation it lost to the plain sum (geometric mean (1-AUC)% 0.078-0.096 against
0.074; SMS 0.65 -> 0.70-1.07): ``configs/default.toml`` has the table. In log-ratio
form it does not saturate as SpamBayes' ``(S - H + 1) / 2`` does; that form, tried
too, ties most spam at 1 and ranks far worse ((1-AUC)% 0.6 on SpamAssassin).

References: R. A. Fisher, *Statistical Methods for Research Workers* (1925), §21.1;
G. Robinson, "A Statistical Approach to the Spam Problem", Linux Journal (2003);
SpamBayes ``classifier.py`` (``chi2_spamprob``, ``chi2Q``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["COMBINE_MODES", "chi_square_correction", "combine"]

COMBINE_MODES = ("sum", "chi-square")


def _log_poisson_cdf_terms(m: np.ndarray, n: np.ndarray) -> np.ndarray:
    """ln P_n(m) = ln Σ_{i<n} m^i / i!, per row (m >= 0, n >= 1 whole numbers).

    A log-sum-exp over the at most ``max(n)`` terms (n is a message's clue count, at
    most ``max_discriminators``), so it neither overflows for large m nor loses the
    small terms; ``0^0 = 1`` gives ln P_n(0) = 0.
    """
    from scipy.special import gammaln  # only chi-square models need it (start-up time)

    width = int(n.max()) if n.size else 1
    i = np.arange(width, dtype=np.float64)
    with np.errstate(divide="ignore"):
        log_m = np.log(m)[:, None]
    terms = np.where(i[None, :] == 0, 0.0, i[None, :] * log_m) - gammaln(i + 1)[None, :]
    terms = np.where(i[None, :] < n[:, None], terms, -np.inf)
    top = terms.max(axis=1)
    return top + np.log(np.exp(terms - top[:, None]).sum(axis=1))


def chi_square_correction(values: np.ndarray, rows: np.ndarray, n_rows: int) -> np.ndarray:
    """Per row, ln P_n(H) - ln P_n(S): what chi-square combining adds to the sum of the
    row's clues (module docstring).

    values (ndarray): the selected clues' LLRs. rows (ndarray): the row of each.
    RETURNS (ndarray of shape (n_rows,)): 0 for a row without clues.
    """
    spam = np.bincount(rows, weights=np.logaddexp(0.0, values), minlength=n_rows)
    ham = np.bincount(rows, weights=np.logaddexp(0.0, -values), minlength=n_rows)
    n = np.bincount(rows, minlength=n_rows)
    out = np.zeros(n_rows)
    has = n > 0
    if has.any():
        out[has] = (_log_poisson_cdf_terms(ham[has], n[has])
                    - _log_poisson_cdf_terms(spam[has], n[has]))
    return out


def combine(values: np.ndarray, rows: np.ndarray, n_rows: int, mode: str = "sum") -> np.ndarray:
    """Per row, the selected clues combined (without the prior/baseline): their sum, plus
    :func:`chi_square_correction` in ``"chi-square"`` mode."""
    total = np.bincount(rows, weights=values, minlength=n_rows)
    if mode == "sum":
        return total
    if mode == "chi-square":
        return total + chi_square_correction(values, rows, n_rows)
    raise ValueError(f"unknown combine mode {mode!r}; use one of {', '.join(COMBINE_MODES)}")
