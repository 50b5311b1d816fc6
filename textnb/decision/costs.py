"""From log-odds to a decision, with asymmetric costs.

Bayesian decision theory (F. Rossi, "Optimal decision and naive Bayes", lecture
slides, Université Paris 1 Panthéon-Sorbonne; C. M. Bishop, "Pattern Recognition and
Machine Learning", 2006, section 1.5.2) gives the Bayes-optimal rule for a
loss matrix L (L[y, y'] = loss of predicting y when the truth is y'):

    g*(x) = argmin_y Σ_y' L(y, y') P(y'|x).

With two classes, L(spam, ham) = cost of losing a ham (c_fp) and L(ham, spam) =
cost of letting a spam through (c_fn), this is: spam iff
c_fn P(spam|x) > c_fp P(ham|x), i.e. log-odds > ln(c_fp / c_fn) = ln λ.
The rule is optimal only for calibrated log-odds; raw naive Bayes log-odds are
not, which is why a threshold learned from data (``textnb tune``) may replace ln λ.

A third action, 'unsure' (a person looks at the message and files it right), that
costs ``review_cost`` whatever the truth, gives Chow's reject rule (C. K. Chow, "On
optimum recognition error and reject tradeoff", IEEE Transactions on Information
Theory 16(1), 1970): unsure where it is cheaper than both verdicts (``review_region``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def expit(log_odds):
    """P(spam) = 1 / (1 + exp(-log_odds)), elementwise (a float for a scalar).

    SciPy's ``special.expit`` computes exactly this with the C library's ``exp``, which
    ``math.exp`` calls too: the same bits on 3 million values from -800 to 800 and
    the infinities, where NumPy's own ``exp`` differed in the last bit for 1.7% of them.
    Importing ``scipy.special`` would add to every command's start-up
    (textnb.features.csr_arrays; docs/design/startup.md#scipy-kept-off-the-scoring-path).
    """
    if np.ndim(log_odds) == 0:
        return _expit(float(log_odds))
    x = np.asarray(log_odds, dtype=np.float64)
    return np.fromiter(map(_expit, x.ravel().tolist()), dtype=np.float64,
                       count=x.size).reshape(x.shape)


def _expit(x: float) -> float:
    try:
        return 1.0 / (1.0 + math.exp(-x))
    except OverflowError:  # exp(-x) beyond the largest float: x below about -709.78
        return 0.0


@dataclass(frozen=True)
class Decision:
    label: str          # 'spam', 'ham' or 'unsure'
    log_odds: float     # log P(spam|x) - log P(ham|x), as the model computes it
    p_spam: float       # probability of spam (calibrated if the model carries a calibration)
    threshold: float    # log-odds threshold in force

    def as_json(self) -> dict:
        """The verdict's fields as ``classify --json`` writes them. JSON has no infinity, so
        an infinite threshold (a tuned model that flags nothing, or everything, at this
        λ: ``calibration.log_odds_threshold``) is null; the label says which."""
        threshold = self.threshold if math.isfinite(self.threshold) else None
        return {"label": self.label, "log_odds": self.log_odds, "p_spam": self.p_spam,
                "threshold": threshold}


def review_region(cost_ratio: float, review_cost: float) -> tuple[float, float] | None:
    """The P(spam) interval in which a person's look costs less than either verdict.

    Calling a message spam costs λ·P(ham) in expectation, calling it ham P(spam), and
    a look ``review_cost`` (in units of a spam let through) whatever the truth; so the
    look is the least expected cost iff review_cost < min(P(spam), λ·(1 - P(spam))),
    i.e. for review_cost < P(spam) < 1 - review_cost/λ. RETURNS that interval, or None
    when it is empty (review_cost >= λ/(1+λ): a look is never worth its cost) or
    review_cost is 0 (a two-way decision).
    """
    if not review_cost > 0:
        return None
    low, high = review_cost, 1.0 - review_cost / cost_ratio
    return (low, high) if low < high else None


def logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def review_log_odds(cost_ratio: float, review_cost: float, threshold: float | None,
                    log_odds_at=logit) -> tuple[float, float] | None:
    """``review_region`` as the model's log-odds (low, high), for ``CostModel``.

    log_odds_at (callable): the log-odds at which a model's P(spam) reaches a
        probability: its calibration's crossing for a tuned model
        (``calibration.log_odds_threshold(map, p / (1 - p))``), else the logit.
    threshold (float | None): the spam threshold in force (None: ln λ); the bounds are
        widened to hold it, since a threshold learned without a map need not lie
        between the logits.
    """
    region = review_region(cost_ratio, review_cost)
    if region is None:
        return None
    low, high = (log_odds_at(p) for p in region)
    t = math.log(cost_ratio) if threshold is None else threshold
    return min(low, t), max(high, t)


@dataclass(frozen=True)
class CostModel:
    """Two-class costs and the threshold they imply.

    cost_ratio (float): λ = cost of a ham lost / cost of a spam let through.
    threshold (float | None): a learned log-odds threshold; None means ln λ.
    unsure_band (float): log-odds half-width around the threshold labelled 'unsure'
        (0 = two-way decision).
    unsure_between (tuple | None): log-odds (low, high), low <= threshold <= high:
        'unsure' for low < log-odds <= high (``review_region`` mapped to the model's
        log-odds: ``SpamFilter.cost_model``); None = two-way.
    """

    cost_ratio: float = 1.0
    threshold: float | None = None
    unsure_band: float = 0.0
    unsure_between: tuple[float, float] | None = None

    def __post_init__(self):
        if not self.cost_ratio > 0:
            raise ValueError(f"cost_ratio={self.cost_ratio!r} must be > 0 (cost of a ham lost "
                             "divided by the cost of a spam let through)")
        if not self.unsure_band >= 0:
            raise ValueError(f"unsure_band={self.unsure_band!r} must be >= 0")
        if self.unsure_between is not None:
            low, high = self.unsure_between
            if not low <= self.log_threshold <= high:
                raise ValueError(f"unsure_between={self.unsure_between!r} must hold the "
                                 f"threshold {self.log_threshold!r}")

    @property
    def log_threshold(self) -> float:
        return math.log(self.cost_ratio) if self.threshold is None else self.threshold

    def labels(self, log_odds: np.ndarray) -> np.ndarray:
        """'spam'/'ham'/'unsure' for each log-odds value (spam iff log-odds > threshold)."""
        log_odds = np.asarray(log_odds, dtype=np.float64)
        t = self.log_threshold
        out = np.where(log_odds > t, "spam", "ham").astype(object)
        if self.unsure_band > 0:
            out[np.abs(log_odds - t) < self.unsure_band] = "unsure"
        if self.unsure_between is not None:
            low, high = self.unsure_between
            out[(log_odds > low) & (log_odds <= high)] = "unsure"
        return out

    def decide(self, log_odds: float, p_spam: float | None = None) -> Decision:
        label = str(self.labels(np.array([log_odds]))[0])
        p = _expit(float(log_odds)) if p_spam is None else float(p_spam)
        return Decision(label=label, log_odds=float(log_odds), p_spam=p,
                        threshold=self.log_threshold)

    def decide_many(self, log_odds: np.ndarray, p_spam: np.ndarray | None = None
                    ) -> list[Decision]:
        """``decide`` of each value, labelled in one pass: the scoring commands decide a
        batch at a time, where ``decide`` builds an array per value
        (docs/design/counting-and-scoring.md#scoring-a-batch)."""
        log_odds = np.asarray(log_odds, dtype=np.float64).ravel()
        p = expit(log_odds) if p_spam is None else np.asarray(p_spam, dtype=np.float64).ravel()
        if p.shape != log_odds.shape:
            raise ValueError(f"{p.size} probabilities for {log_odds.size} log-odds")
        t = self.log_threshold
        return [Decision(label, x, q, t) for label, x, q in
                zip(self.labels(log_odds).tolist(), log_odds.tolist(), p.tolist())]


def uncalibrated(decision, cost_ratio: float | None = None,
                 threshold: float | None = None) -> CostModel:
    """The decision of a model without a calibration map: spam iff log-odds > ``threshold``
    (None: ln λ), with the ``[decision]`` section's unsure band or review cost.

    decision: a ``textnb.config.DecisionConfig``; cost_ratio: λ (None: the section's).
    """
    ratio = decision.cost_ratio if cost_ratio is None else cost_ratio
    between = (review_log_odds(ratio, decision.review_cost, threshold)
               if decision.review_cost > 0 else None)
    return CostModel(cost_ratio=ratio, threshold=threshold, unsure_band=decision.unsure_band,
                     unsure_between=between)


def bayes_decision(proba: np.ndarray, loss: np.ndarray) -> np.ndarray:
    """The class minimising expected loss for each row of posterior probabilities.

    proba : ndarray of shape (n_docs, n_classes), P(y'|x).
    loss : ndarray of shape (n_classes, n_classes), loss[y, y'] = loss of predicting y
        when the truth is y'; zero diagonal, non-negative.
    Returns the index of argmin_y Σ_y' loss[y, y'] P(y'|x), shape (n_docs,).
    """
    proba = np.atleast_2d(np.asarray(proba, dtype=np.float64))
    loss = np.asarray(loss, dtype=np.float64)
    k = proba.shape[1]
    if loss.shape != (k, k):
        raise ValueError(f"loss matrix has shape {loss.shape}, expected ({k}, {k}) for "
                         f"{k} classes")
    if (loss < 0).any() or np.any(np.diag(loss) != 0):
        raise ValueError("loss matrix must be non-negative with a zero diagonal "
                         "(a correct decision costs nothing)")
    expected = proba @ loss.T  # expected[i, y] = Σ_y' loss[y, y'] P(y'|x_i)
    return np.argmin(expected, axis=1)


def cost_matrix(cost_ratio: float) -> np.ndarray:
    """The two-class loss matrix (rows: predicted ham, spam; columns: true ham, spam)."""
    return np.array([[0.0, 1.0], [float(cost_ratio), 0.0]])
