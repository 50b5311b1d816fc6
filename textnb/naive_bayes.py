"""Multinomial and Bernoulli naive Bayes over sparse document-term matrices.

Both models share one skeleton (``_BaseNB``): ``partial_fit`` adds to the
counts, which are the sufficient statistics (``class_count_``,
``feature_count_``); ``_update_feature_log_prob`` is the only place that
smooths and takes logs. Because the counts are all the state there is, a model
can be updated, merged with another and unlearned exactly, and training on A
then B equals training on A and B at once (up to float addition order, which
is exact while counts stay below 2**53).

The formulas are the encyclopedia seed's (``../shared/seeds/003_…``):

multinomial:  log P(x|c) = Σ_j x_j log θ_cj,
              θ_cj = (N_cj + α) / (N_c + α n)           (Lidstone; α = 1 is Laplace)
Bernoulli:    log P(x|c) = Σ_j [b_j log p_cj + (1 - b_j) log(1 - p_cj)],
              p_cj = (D_cj + α) / (D_c + 2α)

with N_cj the occurrences of term j in class c, N_c their sum over the n kept
terms, D_cj the documents of class c holding term j, D_c the documents of class c.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp

from .errors import EmptyTrainingSetError, NotFittedError

__all__ = ["MultinomialNB", "BernoulliNB", "make_model"]


class _BaseNB:
    """Shared skeleton: counting, priors, prediction in log space.

    Parameters
    ----------
    alpha : float > 0, Lidstone pseudo-count added to every (class, feature) count.
    fit_prior : bool, learn class priors from the class counts (else uniform).
    class_prior : sequence of n_classes floats or None, fixed priors (overrides fit_prior).
    n_classes : int, number of classes; labels are 0 .. n_classes-1 (textnb: 0 ham, 1 spam).

    Attributes
    ----------
    class_count_ : ndarray of shape (n_classes,), documents (weights) per class.
    feature_count_ : ndarray of shape (n_classes, n_features), the per-class counts.
    feature_mask_ : ndarray of bool, shape (n_features,), columns kept by pruning.
    feature_log_prob_ : ndarray of shape (n_classes, n_features), smoothed log-probabilities
        (0 in pruned columns, so they contribute nothing).
    class_log_prior_ : ndarray of shape (n_classes,).
    """

    def __init__(self, *, alpha: float = 1.0, fit_prior: bool = True, class_prior=None,
                 n_classes: int = 2):
        self.alpha = alpha
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.n_classes = n_classes

    # -- counting ------------------------------------------------------------
    def fit(self, X, y, sample_weight=None):
        """Forget everything, then learn X, y."""
        self._reset(X.shape[1])
        return self.partial_fit(X, y, sample_weight)

    def partial_fit(self, X, y, sample_weight=None):
        """Add the counts of X, y to the model (incremental training)."""
        X, Y = self._check_X_y(X, y, sample_weight)
        if not hasattr(self, "class_count_"):
            self._reset(X.shape[1])
        self._grow(X.shape[1])
        self._count(X, Y)
        self._check_counts()
        self._update()
        return self

    def unlearn(self, X, y, sample_weight=None):
        """Remove the counts of X, y that an earlier ``partial_fit`` added."""
        self._check_fitted()
        w = np.ones(X.shape[0]) if sample_weight is None else np.asarray(sample_weight, float)
        return self.partial_fit(X, y, -w)

    def merge(self, other: "_BaseNB"):
        """Add another model's counts to this one (same vocabulary order, same class)."""
        if type(other) is not type(self):
            raise TypeError(f"cannot merge a {type(other).__name__} into a {type(self).__name__}")
        other._check_fitted()
        return self.add_counts(other.class_count_, other.feature_count_)

    def add_counts(self, class_count, feature_count):
        """Add counts made elsewhere (another model, another process) to this model's.

        class_count : array of shape (n_classes,); feature_count : array of shape
        (n_classes, n), columns in this model's order (it widens to n if needed).
        Negative counts remove what was learned; the sums must stay >= 0.
        """
        class_count = np.asarray(class_count, dtype=np.float64)
        feature_count = np.asarray(feature_count, dtype=np.float64)
        if class_count.shape != (self.n_classes,) or feature_count.shape[:1] != (self.n_classes,):
            raise ValueError(f"counts of shape {class_count.shape} and {feature_count.shape} do "
                             f"not fit a model of {self.n_classes} classes")
        n = feature_count.shape[1]
        if not hasattr(self, "class_count_"):
            self._reset(n)
        self._grow(n)
        self.class_count_ += class_count
        self.feature_count_[:, :n] += feature_count
        self._check_counts()
        self._update()
        return self

    def _reset(self, n_features: int) -> None:
        self.class_count_ = np.zeros(self.n_classes)
        self.feature_count_ = np.zeros((self.n_classes, n_features))
        self.feature_mask_ = np.ones(n_features, dtype=bool)

    def _grow(self, n_features: int) -> None:
        """Widen the counts to n_features columns (the vocabulary only grows)."""
        extra = n_features - self.feature_count_.shape[1]
        if extra > 0:
            self.feature_count_ = np.hstack([self.feature_count_,
                                             np.zeros((self.n_classes, extra))])
            self.feature_mask_ = np.concatenate([self.feature_mask_, np.ones(extra, bool)])

    def _check_X_y(self, X, y, sample_weight):
        X = sp.csr_matrix(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.int64)
        if X.shape[0] != y.shape[0]:
            raise ValueError(f"X.shape[0]={X.shape[0]} and y.shape[0]={y.shape[0]} "
                             "are incompatible")
        if y.size and (y.min() < 0 or y.max() >= self.n_classes):
            raise ValueError(f"labels must be 0..{self.n_classes - 1}, got {sorted(set(y))}")
        if X.nnz and X.data.min() < 0:
            raise ValueError("X holds negative counts; term counts must be >= 0")
        Y = np.zeros((y.shape[0], self.n_classes))
        Y[np.arange(y.shape[0]), y] = 1.0
        if sample_weight is not None:
            Y *= np.asarray(sample_weight, dtype=np.float64).reshape(-1, 1)
        return X, Y

    def _check_counts(self) -> None:
        # Unlearning more than was learned would make counts negative: refuse loudly.
        if self.class_count_.min() < -1e-9 or self.feature_count_.min() < -1e-9:
            raise ValueError("counts went negative: a message was forgotten that was never "
                             "learned (or twice)")

    def _count(self, X, Y) -> None:
        """Add class counts and per-class feature counts (no smoothing here)."""
        self.class_count_ += Y.sum(axis=0)
        self.feature_count_ += np.asarray((sp.csr_matrix(Y.T) @ X).todense())

    # -- smoothing and priors (the one place) --------------------------------
    def set_feature_mask(self, mask: np.ndarray) -> None:
        """Keep only the columns where mask is True (pruning); counts are untouched."""
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != self.feature_mask_.shape:
            raise ValueError(f"mask has {mask.shape[0]} entries, model has "
                             f"{self.feature_mask_.shape[0]} features")
        self.feature_mask_ = mask
        self._update()

    def _update(self) -> None:
        self._update_feature_log_prob(self.alpha)
        self._update_class_log_prior()

    def _update_class_log_prior(self) -> None:
        if self.class_prior is not None:
            prior = np.asarray(self.class_prior, dtype=np.float64)
            if prior.shape != (self.n_classes,):
                raise ValueError(f"class_prior needs {self.n_classes} values, got {prior.size}")
            self.class_log_prior_ = np.log(prior)
        elif self.fit_prior:
            with np.errstate(divide="ignore"):
                self.class_log_prior_ = (np.log(self.class_count_)
                                         - np.log(self.class_count_.sum()))
        else:
            self.class_log_prior_ = np.full(self.n_classes, -np.log(self.n_classes))

    # -- prediction ----------------------------------------------------------
    def joint_log_likelihood(self, X) -> np.ndarray:
        """log P(c) + log P(x|c), an ndarray of shape (n_docs, n_classes)."""
        self._check_fitted()
        return self._joint_log_likelihood(self._check_X(X))

    def predict_log_proba(self, X) -> np.ndarray:
        jll = self.joint_log_likelihood(X)
        return jll - logsumexp(jll, axis=1, keepdims=True)

    def predict_proba(self, X) -> np.ndarray:
        return np.exp(self.predict_log_proba(X))

    def predict(self, X) -> np.ndarray:
        return np.argmax(self.joint_log_likelihood(X), axis=1)

    def log_odds(self, X) -> np.ndarray:
        """log P(class 1|x) - log P(class 0|x) for each row: the spam score."""
        jll = self.joint_log_likelihood(X)
        return jll[:, 1] - jll[:, 0]

    def log_odds_contributions(self, X) -> tuple[sp.csr_matrix, float]:
        """Split the log-odds into per-token parts: ``log_odds = baseline + C.sum(axis=1)``.

        Returns C, a CSR matrix of shape (n_docs, n_features) with C[i, j] the log-odds
        that token j adds to document i, and the baseline every document starts from
        (the prior log-odds; for Bernoulli also the log-odds of every kept token being absent).
        """
        self._check_fitted()
        X = self._check_X(X)
        weights, baseline = self._token_weights()
        C = sp.csr_matrix(self._presence(X).multiply(weights.reshape(1, -1)))
        C.sort_indices()
        return C, float(self.class_log_prior_[1] - self.class_log_prior_[0] + baseline)

    def selected_log_odds(self, X, max_discriminators: int) -> np.ndarray:
        """Log-odds from only the ``max_discriminators`` strongest tokens of each document.

        Graham's "plan for spam", SpamBayes' max_discriminators and bogofilter's min_dev
        all score a message by its most telling tokens: in a long message the many weak,
        correlated tokens otherwise outvote the few strong ones (the naive independence
        assumption fails most there). 0 means all tokens (the plain naive Bayes log-odds).
        """
        if not max_discriminators:
            return self.log_odds(X)
        C, baseline = self.log_odds_contributions(X)
        C.sort_indices()
        rows = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
        # Rank each row's entries by |contribution|, strongest first, in one sort.
        order = np.lexsort((-np.abs(C.data), rows))
        rank = np.arange(order.size) - C.indptr[rows[order]]
        keep = order[rank < max_discriminators]
        return baseline + np.bincount(rows[keep], weights=C.data[keep], minlength=C.shape[0])

    def _presence(self, X):
        return X

    def _check_X(self, X) -> sp.csr_matrix:
        X = sp.csr_matrix(X, dtype=np.float64)
        n_model = self.feature_count_.shape[1]
        if X.shape[1] > n_model:
            raise ValueError(f"X has {X.shape[1]} features, the model was fit with {n_model}")
        if X.shape[1] < n_model:  # columns added to the vocabulary after X was built
            X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], n_model))
        return X

    def _check_fitted(self) -> None:
        if not hasattr(self, "class_count_"):
            raise NotFittedError(f"this {type(self).__name__} is not trained yet; train it first")
        present = self.class_count_ > 0
        if not present.all():
            missing = ", ".join(str(c) for c in np.flatnonzero(~present))
            raise EmptyTrainingSetError(
                f"no training documents for class {missing}; train on both spam and ham")


class MultinomialNB(_BaseNB):
    """Multinomial event model: term counts (or 0/1, the "Boolean multinomial")."""

    event_model = "multinomial"

    def _update_feature_log_prob(self, alpha: float) -> None:
        mask = self.feature_mask_
        smoothed_fc = self.feature_count_[:, mask] + alpha
        smoothed_cc = smoothed_fc.sum(axis=1, keepdims=True)
        flp = np.zeros_like(self.feature_count_)
        flp[:, mask] = np.log(smoothed_fc) - np.log(smoothed_cc)
        self.feature_log_prob_ = flp

    def _joint_log_likelihood(self, X) -> np.ndarray:
        return np.asarray(X @ self.feature_log_prob_.T) + self.class_log_prior_

    def _token_weights(self) -> tuple[np.ndarray, float]:
        # Each occurrence of token j adds log θ_spam,j - log θ_ham,j.
        return self.feature_log_prob_[1] - self.feature_log_prob_[0], 0.0


class BernoulliNB(_BaseNB):
    """Multivariate Bernoulli event model: presence and absence of each term.

    X is binarised (any count > 0 is 1) when counting and when scoring.
    Absence is modelled without densifying 1 - X:
    Σ_j (1 - b_j) log(1 - p_cj) = Σ_j log(1 - p_cj) - b · log(1 - p_c).
    """

    event_model = "bernoulli"

    def _count(self, X, Y) -> None:
        super()._count(self._presence(X), Y)

    def _update_feature_log_prob(self, alpha: float) -> None:
        mask = self.feature_mask_
        fc = self.feature_count_[:, mask]
        denominator = np.log(self.class_count_ + 2.0 * alpha).reshape(-1, 1)
        flp = np.zeros_like(self.feature_count_)
        neg = np.zeros_like(self.feature_count_)
        flp[:, mask] = np.log(fc + alpha) - denominator
        # log(1 - p) computed from counts, not as log1p(-exp(flp)): exact, no cancellation.
        neg[:, mask] = np.log(self.class_count_.reshape(-1, 1) - fc + alpha) - denominator
        self.feature_log_prob_ = flp
        self.neg_log_prob_ = neg

    def _joint_log_likelihood(self, X) -> np.ndarray:
        jll = np.asarray(self._presence(X) @ (self.feature_log_prob_ - self.neg_log_prob_).T)
        return jll + self.neg_log_prob_.sum(axis=1) + self.class_log_prior_

    def _presence(self, X):
        X = X.copy()
        X.data = (X.data > 0).astype(np.float64)
        return X

    def _token_weights(self) -> tuple[np.ndarray, float]:
        # A present token swaps its absence term for its presence term.
        flp, neg = self.feature_log_prob_, self.neg_log_prob_
        return (flp[1] - neg[1]) - (flp[0] - neg[0]), float(neg[1].sum() - neg[0].sum())


def make_model(event_model: str, **params) -> _BaseNB:
    """The model class for a config's ``event_model`` name."""
    classes = {"multinomial": MultinomialNB, "bernoulli": BernoulliNB}
    try:
        return classes[event_model](**params)
    except KeyError:
        raise ValueError(f"unknown event model {event_model!r}; use 'multinomial' or "
                         "'bernoulli'") from None
