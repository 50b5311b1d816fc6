"""Multinomial and Bernoulli naive Bayes over sparse document-term matrices.

Both models share one skeleton (``_BaseNB``): ``partial_fit`` adds to the
counts, which are the sufficient statistics (``class_count_``,
``feature_count_``); ``_column_log_probs`` is the only place that smooths and
takes logs. Because the counts are all the state there is, a model
can be updated, merged with another and unlearned exactly, and training on A
then B equals training on A and B at once (up to float addition order, which
is exact while counts stay below 2**53).

Learning one message costs time in proportion to its tokens, not to the
vocabulary: the log-probabilities are not stored but computed, for the
columns a document holds, when it is scored (``_column_log_probs``). Only the
multinomial's per-class normaliser N_c + α n depends on every column, and it is
kept as running sums (the kept columns' counts, their number, and how many of them are
the route's, for ``route_alpha``). With
whole-number counts those sums are exact, so the on-demand values are bit for
bit those of a full refresh (a sum of Σ (N_cj + α) over the columns would round: 3e-6
off on SpamAssassin, 4e-12 in its log). ``feature_log_prob_``
is still there, computed in full on first use after a change (PMML export and
tests read it). The Bernoulli model's absence term sums over every kept column
and is recomputed once per change, on the next score (``BernoulliNB``).

The formulas are those of Wikipedia's "Naive Bayes classifier"
(https://en.wikipedia.org/wiki/Naive_Bayes_classifier, sections "Multinomial naive
Bayes" and "Bernoulli naive Bayes"):

multinomial:  log P(x|c) = Σ_j x_j log θ_cj,
              θ_cj = (N_cj + α) / (N_c + α n)           (Lidstone; α = 1 is Laplace)
Bernoulli:    log P(x|c) = Σ_j [b_j log p_cj + (1 - b_j) log(1 - p_cj)],
              p_cj = (D_cj + α) / (D_c + 2α)

with N_cj the occurrences of term j in class c, N_c their sum over the n kept
terms, D_cj the documents of class c holding term j, D_c the documents of class c.

With ``route_alpha`` the pseudo-count is a column's own, α_j: ``route_alpha`` for the
route's columns (tokens of header fields other than Subject, which the filter marks with
``set_route_columns``), α for the others. The prior is then a Dirichlet with those
parameters, the same formulas with α_j in place of α, and the normaliser sums them:
θ_cj = (N_cj + α_j) / (N_c + Σ_{kept j} α_j), p_cj = (D_cj + α_j) / (D_c + 2α_j)
(scikit-learn's ``alpha`` of shape (n_features,)). The route's pseudo-counts are
smaller: one route token seen in one class is a stronger clue than one word
(docs/conflicting-evidence.md, "Smoothing").
"""

from __future__ import annotations

import numpy as np

from ..errors import EmptyTrainingSetError, NotFittedError
from ..features.buffers import with_room
from ..features.csr_arrays import Rows
from ..features.lazy_scipy import lazy_module
from . import combining
from .evidence import strongest

__all__ = ["EVENT_MODELS", "MultinomialNB", "BernoulliNB", "event_model_names", "make_model"]

# Imported when first used (scoring, a matrix fit): counting alone never needs them.
sp = lazy_module("scipy.sparse")
special = lazy_module("scipy.special")


class _BaseNB:
    """Shared skeleton: counting, priors, prediction in log space.

    Parameters
    ----------
    alpha : float > 0, Lidstone pseudo-count added to every (class, feature) count.
    route_alpha : float > 0 or None, the pseudo-count of the route's columns instead
        (``set_route_columns`` says which they are); None: alpha for every column.
    fit_prior : bool, learn class priors from the class counts (else uniform).
    class_prior : sequence of n_classes floats or None, fixed priors (overrides fit_prior).
    n_classes : int, number of classes; labels are 0 .. n_classes-1 (textnb: 0 ham, 1 spam).

    Attributes
    ----------
    class_count_ : ndarray of shape (n_classes,), documents (weights) per class.
    feature_count_ : ndarray of shape (n_classes, n_features), the per-class counts.
    feature_mask_ : ndarray of bool, shape (n_features,), columns kept by pruning.
    route_columns_ : ndarray of bool, shape (n_features,), the route's columns (read only
        with ``route_alpha`` set and not alpha: ``per_column_alpha``).
    feature_log_prob_ : ndarray of shape (n_classes, n_features), smoothed log-probabilities
        (0 in pruned columns, so they contribute nothing); computed on first use after
        the counts change (scoring does not need it).
    class_log_prior_ : ndarray of shape (n_classes,).

    Class attributes (what the rest of textnb reads of an event model: ``EVENT_MODELS``)
    ----------------
    event_model : str, its name in the config (``model.event_model``).
    counts_presence : bool, whether it reads only which tokens a message holds: counting
        and scoring see X binarised (``_presence``), and a message counts each token once
        whatever ``features.features`` says.
    pmml_model : str or None, the PMML element that expresses it (textnb.pmml.exchange);
        None: it has no PMML form, and export refuses it.
    """

    event_model: str
    counts_presence: bool = False
    pmml_model: str | None = None

    def __init__(self, *, alpha: float = 1.0, fit_prior: bool = True, class_prior=None,
                 n_classes: int = 2, route_alpha: float | None = None):
        self.alpha = alpha
        self.route_alpha = route_alpha
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.n_classes = n_classes

    # -- storage -------------------------------------------------------------
    # Counts and mask live in buffers with spare columns: most learned messages add a
    # few tokens to the vocabulary, and widening a (n_classes, n) array by copying it
    # would make learning one message cost O(vocabulary). Spare columns hold zero
    # counts and are kept (True), as new columns start.
    @property
    def feature_count_(self) -> np.ndarray:
        return self._fc[:, :self._n]

    @feature_count_.setter
    def feature_count_(self, value) -> None:
        self._set_feature_count(value, copy=True)

    def _set_feature_count(self, value, copy: bool) -> None:
        value = (np.array if copy else np.asarray)(value, dtype=np.float64, order="C")
        if value.ndim != 2 or value.shape[0] != self.n_classes:
            raise ValueError(f"feature counts of shape {value.shape} do not fit a model of "
                             f"{self.n_classes} classes")
        mask = self._mask[:value.shape[1]] if hasattr(self, "_mask") else np.ones(0, bool)
        route = self._route[:value.shape[1]] if hasattr(self, "_route") else np.zeros(0, bool)
        self._fc, self._n = value, value.shape[1]
        self._mask = np.concatenate([mask, np.ones(self._n - mask.size, bool)])
        self._route = np.concatenate([route, np.zeros(self._n - route.size, bool)])
        self._route_known = min(getattr(self, "_route_known", 0), self._n)
        self._sums()

    @property
    def feature_mask_(self) -> np.ndarray:
        return self._mask[:self._n]

    @feature_mask_.setter
    def feature_mask_(self, mask) -> None:
        self.set_feature_mask(mask)

    @property
    def route_columns_(self) -> np.ndarray:
        """ndarray of bool, shape (n_features,): the route's columns, as far as
        ``set_route_columns`` has told (False beyond ``route_columns_known``)."""
        return self._route[:self._n]

    @property
    def route_columns_known(self) -> int:
        """How many columns, from the first, ``set_route_columns`` has marked."""
        return self._route_known

    @property
    def per_column_alpha(self) -> bool:
        """Whether the route's columns have a pseudo-count of their own (route_alpha set
        and not alpha): only then do the route flags matter."""
        return self.route_alpha is not None and self.route_alpha != self.alpha

    @property
    def feature_log_prob_(self) -> np.ndarray:
        return self._full_log_probs()[0]

    def _full_log_probs(self) -> tuple[np.ndarray, ...]:
        full = self._full
        if full is None:  # the counts or the mask changed since the last full refresh
            full = self._full = self._column_log_probs(slice(0, self._n))
        return full

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
        self._update_class_log_prior()
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

    def add_counts(self, class_count, feature_count, columns=None, n_features=None):
        """Add counts made elsewhere (another model, another process) to this model's.

        class_count : array of shape (n_classes,); feature_count : array of shape
        (n_classes, n), columns in this model's order (it widens to n if needed).
        columns : None, or distinct column numbers, one per column of feature_count:
            where those counts go (then only they are read and written).
        n_features : with ``columns``, the width to widen the model to (default: just
            past the largest column).
        Negative counts remove what was learned; the sums must stay >= 0.
        """
        class_count = np.asarray(class_count, dtype=np.float64)
        feature_count = np.asarray(feature_count, dtype=np.float64)
        if class_count.shape != (self.n_classes,) or feature_count.shape[:1] != (self.n_classes,):
            raise ValueError(f"counts of shape {class_count.shape} and {feature_count.shape} do "
                             f"not fit a model of {self.n_classes} classes")
        if columns is None:
            n = feature_count.shape[1]
            cols = np.flatnonzero((feature_count != 0).any(axis=0))
            feature_count = feature_count[:, cols]
        else:
            cols = np.asarray(columns, dtype=np.int64)
            if cols.shape != feature_count.shape[1:]:
                raise ValueError(f"{cols.size} columns for counts of shape {feature_count.shape}")
            n = max(int(cols.max()) + 1 if cols.size else 0, n_features or 0)
        if not hasattr(self, "class_count_"):
            self._reset(n)
        self._grow(n)
        self._add(class_count, cols, feature_count)
        self._update_class_log_prior()
        return self

    def set_counts(self, class_count, feature_count, *, copy: bool = True) -> "_BaseNB":
        """Replace the counts (a model read from a file): class_count of shape
        (n_classes,), feature_count of shape (n_classes, n_features).

        copy (bool): False takes a C-ordered float64 feature_count as it is (a loader's
        own array, which nothing else holds)."""
        self.class_count_ = class_count
        self._mask = np.ones(feature_count.shape[1], dtype=bool)  # every column kept
        self._set_feature_count(feature_count, copy)  # also the running sums (a full pass)
        self._update_class_log_prior()
        return self

    def _reset(self, n_features: int) -> None:
        self.class_count_ = np.zeros(self.n_classes)
        self._fc = np.zeros((self.n_classes, n_features))
        self._mask = np.ones(n_features, dtype=bool)
        self._route = np.zeros(n_features, dtype=bool)
        self._route_known = 0
        self._n = n_features
        self._sums()

    def _grow(self, n_features: int) -> None:
        """Widen the counts to n_features columns (the vocabulary only grows)."""
        extra = n_features - self._n
        if extra <= 0:
            return
        # Out of spare columns: double (textnb.features.buffers); new columns kept by the mask.
        self._fc = with_room(self._fc, self._n, n_features)
        self._mask = with_room(self._mask, self._n, n_features, fill=True)
        # New columns are not the route's until set_route_columns says so (nor counted
        # in _n_kept_route); scoring refuses while any column is unmarked.
        self._route = with_room(self._route, self._n, n_features)
        self._n = n_features
        self._n_kept += extra  # new columns: no counts yet, kept until a mask says otherwise
        self._full = None

    def _sums(self) -> None:
        """Recompute the running sums from the counts and the mask (after loading)."""
        # np.compress, not a boolean index: the same elements in the same order, without
        # the two-dimensional fancy index (``_add``). With every column kept (a model
        # never pruned) the rows are summed where they lie: the same rows, no copy, and
        # less of a load holding the GIL while spaCy is imported beside it
        # (docs/design/startup.md#the-load-beside-spacys-import).
        mask = self.feature_mask_
        self._n_kept = int(mask.sum())
        if self._n_kept == mask.size:
            self._kept_count = self.feature_count_.sum(axis=1)
        else:
            self._kept_count = np.compress(mask, self.feature_count_, axis=1).sum(axis=1)
        self._n_kept_route = int(np.count_nonzero(mask & self.route_columns_))
        self._full = None

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

    def _count(self, X, Y) -> None:
        """Add class counts and per-class feature counts (no smoothing here), touching
        only the columns the documents hold."""
        cols, Xc = _touched_columns(self._presence(X))
        self._add(Y.sum(axis=0), cols, np.asarray((sp.csr_matrix(Y.T) @ Xc).todense()))

    def _add(self, class_count: np.ndarray, cols: np.ndarray, feature_count: np.ndarray) -> None:
        """Add counts to the given (distinct) columns and keep the running sums in step.

        Columns are gathered with ``np.take``, written back a class row at a time and the
        kept ones picked with ``np.compress``: NumPy's two-dimensional fancy indexing
        walks an index per element, and these take the same elements in the same order,
        so the same sums (docs/design/counting-and-scoring.md#adding-a-batch-to-the-model)."""
        classes = self.class_count_ + class_count
        counts = _columns_of(self._fc, cols)
        counts += feature_count
        # Unlearning more than was learned would make counts negative: refuse loudly,
        # before anything changes.
        if classes.min() < -1e-9 or (counts.size and counts.min() < -1e-9):
            raise ValueError("counts went negative: a message was forgotten that was never "
                             "learned (or twice)")
        self.class_count_ = classes
        for row, values in zip(self._fc, counts):
            row[cols] = values
        kept = np.compress(self._mask[cols], feature_count, axis=1)
        self._kept_count = self._kept_count + kept.sum(axis=1)
        self._full = None

    # -- smoothing and priors ------------------------------------------------
    def set_feature_mask(self, mask: np.ndarray, columns=None) -> None:
        """Keep only the columns where mask is True (pruning); counts are untouched.

        columns : None, or distinct column numbers: then mask holds the new values of
            those columns only, and the others keep theirs (O(len(columns))).
        """
        mask = np.asarray(mask, dtype=bool)
        if columns is None:
            if mask.shape != (self._n,):
                raise ValueError(f"mask has {mask.shape[0]} entries, model has "
                                 f"{self._n} features")
            columns = np.flatnonzero(mask != self.feature_mask_)
            mask = mask[columns]
        else:
            columns = np.asarray(columns, dtype=np.int64)
            if mask.shape != columns.shape:
                raise ValueError(f"mask has {mask.shape[0]} entries for {columns.shape[0]} columns")
            if columns.size and (columns.min() < 0 or columns.max() >= self._n):
                raise ValueError(f"columns must be 0..{self._n - 1}, got {columns.min()}.."
                                 f"{columns.max()}")
        changed = self._mask[columns] != mask
        columns, mask = columns[changed], mask[changed]
        if not columns.size:
            return
        sign = np.where(mask, 1.0, -1.0)
        self._kept_count = self._kept_count + (self._fc[:, columns] * sign).sum(axis=1)
        self._n_kept += int(sign.sum())
        self._n_kept_route += int(sign[self._route[columns]].sum())
        self._mask[columns] = mask
        self._full = None

    def set_route_columns(self, route, start: int) -> None:
        """Mark columns ``start .. start + len(route) - 1`` as the route's (True) or not.

        The filter marks each column once, as the vocabulary grows
        (``SpamFilter._update_mask``); ``route_columns_known`` is where it got to. With
        ``per_column_alpha`` a model refuses to score while a column is unmarked, since
        its pseudo-count would be unknown."""
        route = np.asarray(route, dtype=bool)
        stop = start + route.size
        if not 0 <= start <= self._route_known or stop > self._n:
            raise ValueError(f"route flags for columns {start}..{stop - 1} do not follow the "
                             f"{self._route_known} marked of a model of {self._n} features")
        before = self._route[start:stop]
        kept = self._mask[start:stop]
        self._n_kept_route += (int(np.count_nonzero(route & kept))
                               - int(np.count_nonzero(before & kept)))
        self._route[start:stop] = route
        self._route_known = max(self._route_known, stop)
        self._full = None

    def column_alpha(self, cols):
        """The pseudo-count of each of ``cols`` (column numbers or a slice): an array
        broadcasting over the classes, or the one alpha when every column has it."""
        if not self.per_column_alpha:
            return self.alpha
        if self._route_known < self._n:
            raise ValueError(f"route_alpha={self.route_alpha} needs every column marked as the "
                             f"route's or not; {self._n - self._route_known} of {self._n} are "
                             "not (mark them with set_route_columns)")
        return np.where(self._route[cols], self.route_alpha, self.alpha)

    def _alpha_sum(self):
        """Σ_j α_j over the kept columns: the multinomial normaliser's pseudo-counts."""
        if not self.per_column_alpha:
            return self.alpha * self._n_kept
        n_route = self._n_kept_route
        return self.alpha * (self._n_kept - n_route) + self.route_alpha * n_route

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
        X = self._check_X(X)
        if isinstance(X, Rows):  # the products below are SciPy's
            X = X.to_csr()
        return self._joint_log_likelihood(X)

    def predict_log_proba(self, X) -> np.ndarray:
        jll = self.joint_log_likelihood(X)
        return jll - special.logsumexp(jll, axis=1, keepdims=True)

    def predict_proba(self, X) -> np.ndarray:
        return np.exp(self.predict_log_proba(X))

    def predict(self, X) -> np.ndarray:
        return np.argmax(self.joint_log_likelihood(X), axis=1)

    def log_odds(self, X) -> np.ndarray:
        """log P(class 1|x) - log P(class 0|x) for each row: the spam score."""
        jll = self.joint_log_likelihood(X)
        return jll[:, 1] - jll[:, 0]

    def log_odds_contributions(self, X) -> tuple[sp.csr_matrix | Rows, float]:
        """Split the log-odds into per-token parts: ``log_odds = baseline + C.sum(axis=1)``.

        Returns C, a CSR matrix of shape (n_docs, n_features) with C[i, j] the log-odds
        that token j adds to document i, and the baseline every document starts from
        (the prior log-odds; for Bernoulli also the log-odds of every kept token being absent).
        """
        self._check_fitted()
        X = self._check_X(X)
        present = self._presence(X)
        cols, Xc = _touched_columns(present)
        weights, baseline = self._token_weights(cols)
        if isinstance(X, Rows):
            # Each entry times its column's weight, in place: what SciPy's
            # ``multiply`` below gives for sorted, distinct indices (1.17 keeps the
            # zero products of pruned columns, so these keep them too).
            C = Rows(Xc.data * weights[Xc.indices], present.indices, present.indptr, X.shape)
            return C, float(self.class_log_prior_[1] - self.class_log_prior_[0] + baseline)
        C = sp.csr_matrix(Xc.multiply(weights.reshape(1, -1)))
        C = sp.csr_matrix((C.data, cols[C.indices], C.indptr), shape=X.shape)
        C.sort_indices()
        return C, float(self.class_log_prior_[1] - self.class_log_prior_[0] + baseline)

    def selected_log_odds(self, X, max_discriminators: int, limited=None,
                          max_limited: int | None = None, each_side: bool = False,
                          min_strength: float = 0.0, combine: str = "sum", *,
                          header=None, header_places: int = 0, header_clues: int = 0,
                          dependence=None) -> np.ndarray:
        """Log-odds from only the ``max_discriminators`` strongest tokens of each document.

        Graham's "plan for spam", SpamBayes' max_discriminators and bogofilter's min_dev
        all score a message by its most telling tokens: in a long message the many weak,
        correlated tokens otherwise outvote the few strong ones (the naive independence
        assumption fails most there). 0 means all tokens (the plain naive Bayes log-odds).
        Of the columns ``limited`` (bool mask; word pairs) at most ``max_limited`` count;
        ``each_side`` gives half the places to spam clues and half to ham clues; tokens
        with |log-likelihood ratio| <= ``min_strength`` are no clues:
        :func:`textnb.models.evidence.strongest` does the selection (``header`` and
        ``header_places``: places a side for clues from header fields, ``header_clues``: the
        same apart from ``max_discriminators``; ``dependence``: clues
        that repeat a stronger one's evidence, dropped first). ``combine`` is how
        the clues add up (:mod:`textnb.models.combining`: their sum, or chi-square combining).
        """
        if not max_discriminators and not min_strength and combine == "sum":
            return self.log_odds(X)
        C, baseline = self.log_odds_contributions(X)
        C.sort_indices()
        keep = strongest(C, max_discriminators, limited, max_limited, each_side, min_strength,
                         header=header, header_places=header_places,
                         header_clues=header_clues, dependence=dependence)
        rows = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
        return baseline + combining.combine(C.data[keep], rows[keep], C.shape[0], combine)

    def _presence(self, X):
        """X as the model reads it: 0/1 (any count > 0 is 1) if it reads presence only."""
        if not self.counts_presence:
            return X
        X = X.copy()
        X.data = (X.data > 0).astype(np.float64)
        return X

    def _check_X(self, X) -> sp.csr_matrix | Rows:
        """X as a float CSR matrix as wide as the model (``Rows`` stay ``Rows``)."""
        n_model = self._n
        if isinstance(X, Rows):
            if X.shape[1] > n_model:
                raise ValueError(f"X has {X.shape[1]} features, the model was fit with {n_model}")
            return X.with_columns(n_model) if X.shape[1] < n_model else X
        X = sp.csr_matrix(X, dtype=np.float64)
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


def _distinct_columns(indices: np.ndarray, n_columns: int) -> np.ndarray:
    """``np.unique(indices)`` for indices below ``n_columns``: when they are not far
    fewer than the columns, marked in a bool array and read back, which needs no sort.
    The sort costs about 57 ns an index and the read-back about 0.4 ns a column, so the
    marks win from about one index in 150 columns
    (docs/design/counting-and-scoring.md#scoring-a-batch)."""
    if indices.size * 128 < n_columns:
        return np.unique(indices)
    seen = np.zeros(n_columns, dtype=bool)
    seen[indices] = True
    return np.flatnonzero(seen)


def _columns_of(counts: np.ndarray, cols) -> np.ndarray:
    """``counts[:, cols]``: for an index array a new array, by ``np.take`` (4x faster than
    the fancy index; ``_BaseNB._add``); for a slice, the view."""
    if isinstance(cols, slice):
        return counts[:, cols]
    return np.take(counts, cols, axis=1)


def _touched_columns(X: sp.csr_matrix | Rows) -> tuple[np.ndarray, sp.csr_matrix | Rows]:
    """The distinct columns X holds (sorted) and X re-indexed onto them: products with
    the model then read and write those columns only, not the whole vocabulary."""
    cols = _distinct_columns(X.indices, X.shape[1])
    if isinstance(X, Rows):
        return cols, Rows(X.data, np.searchsorted(cols, X.indices), X.indptr,
                          (X.shape[0], cols.size))
    Xc = sp.csr_matrix((X.data, np.searchsorted(cols, X.indices), X.indptr),
                       shape=(X.shape[0], cols.size))
    return cols, Xc


class MultinomialNB(_BaseNB):
    """Multinomial event model: term counts (or 0/1, the "Boolean multinomial")."""

    event_model = "multinomial"
    # Its log-odds are linear in the counts: a logistic regression (no honest table of
    # counts reproduces the per-term factor θ^x; textnb.pmml.exchange).
    pmml_model = "RegressionModel"

    def _column_log_probs(self, cols) -> tuple[np.ndarray]:
        # log θ_cj = log(N_cj + α_j) - log(N_c + Σ α_j), N_c and the sum over the kept
        # columns (the running sums), 0 in pruned columns.
        alpha = self.column_alpha(cols)
        normaliser = np.log(self._kept_count + self._alpha_sum()).reshape(-1, 1)
        flp = np.log(_columns_of(self._fc, cols) + alpha) - normaliser
        flp[:, ~self._mask[cols]] = 0.0
        return (flp,)

    def _joint_log_likelihood(self, X) -> np.ndarray:
        cols, Xc = _touched_columns(self._presence(X))
        (flp,) = self._column_log_probs(cols)
        return np.asarray(Xc @ flp.T) + self.class_log_prior_

    def _token_weights(self, cols) -> tuple[np.ndarray, float]:
        # Each occurrence of token j adds log θ_spam,j - log θ_ham,j.
        (flp,) = self._column_log_probs(cols)
        return flp[1] - flp[0], 0.0


class BernoulliNB(_BaseNB):
    """Multivariate Bernoulli event model: presence and absence of each term.

    X is binarised (any count > 0 is 1) when counting and when scoring (``counts_presence``).
    Absence is modelled without densifying 1 - X:
    Σ_j (1 - b_j) log(1 - p_cj) = Σ_j log(1 - p_cj) - b · log(1 - p_c).
    The first sum runs over every kept term and changes with every learned document
    (D_c is in each term), so scoring after an update pays one pass over the
    vocabulary for it; learning itself touches only the document's columns.
    """

    event_model = "bernoulli"
    counts_presence = True
    pmml_model = "NaiveBayesModel"

    @property
    def neg_log_prob_(self) -> np.ndarray:
        return self._full_log_probs()[1]

    def _column_log_probs(self, cols) -> tuple[np.ndarray, np.ndarray]:
        alpha = self.column_alpha(cols)
        fc = _columns_of(self._fc, cols)
        # (n_classes, 1), or (n_classes, len(cols)) with a pseudo-count per column
        denominator = np.log(self.class_count_.reshape(-1, 1) + 2.0 * alpha)
        flp = np.log(fc + alpha) - denominator
        # log(1 - p) computed from counts, not as log1p(-exp(flp)): exact, no cancellation.
        neg = np.log(self.class_count_.reshape(-1, 1) - fc + alpha) - denominator
        pruned = ~self._mask[cols]
        flp[:, pruned] = 0.0
        neg[:, pruned] = 0.0
        return flp, neg

    def _absent_log_prob(self) -> np.ndarray:
        """Σ_j log(1 - p_cj) over the kept terms, per class (from the full refresh)."""
        full = self._full_log_probs()
        if len(full) == 2:
            full = self._full = (*full, full[1].sum(axis=1))
        return full[2]

    def _joint_log_likelihood(self, X) -> np.ndarray:
        cols, Xc = _touched_columns(self._presence(X))
        flp, neg = self._column_log_probs(cols)
        jll = np.asarray(Xc @ (flp - neg).T)
        return jll + self._absent_log_prob() + self.class_log_prior_

    def _token_weights(self, cols) -> tuple[np.ndarray, float]:
        # A present token swaps its absence term for its presence term.
        flp, neg = self._column_log_probs(cols)
        absent = self._absent_log_prob()
        return (flp[1] - neg[1]) - (flp[0] - neg[0]), float(absent[1] - absent[0])


# The event models by name: the config checks ``model.event_model`` against it, the
# filter builds its model from it, tune searches over it, and the model checks and the
# PMML export read its classes' attributes. A third event model is one class and one entry.
EVENT_MODELS: dict[str, type[_BaseNB]] = {cls.event_model: cls
                                          for cls in (MultinomialNB, BernoulliNB)}


def event_model_names() -> str:
    """The registered names, for messages: "'multinomial' or 'bernoulli'"."""
    return " or ".join(f"'{name}'" for name in EVENT_MODELS)


def make_model(event_model: str, **params) -> _BaseNB:
    """The model class for a config's ``event_model`` name."""
    if event_model not in EVENT_MODELS:
        raise ValueError(f"unknown event model {event_model!r}; use {event_model_names()}")
    return EVENT_MODELS[event_model](**params)
