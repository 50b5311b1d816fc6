"""Gaussian naive Bayes for numeric message features (size, links, recipients, ...).

Each feature k is modelled per class c by a normal density with the class's mean
and *sample* variance (ddof = 1, as the worked example in Wikipedia's "Naive Bayes
classifier", https://en.wikipedia.org/wiki/Naive_Bayes_classifier#Examples)::

    p(x_k | c) = exp(-(x_k - μ_ck)² / (2 σ²_ck)) / sqrt(2π σ²_ck)

As for the term counts, the state is a sufficient statistic that adds and subtracts
exactly: per class the weight n_c, the means μ_c and the sums of squared deviations
M2_c, merged by Chan et al.'s pairwise update, so ``partial_fit`` in chunks equals one
``fit`` and ``unlearn`` takes a message back out.

Two guards, both off by default where they would change a textbook number:
``var_smoothing`` adds that fraction of the feature's pooled variance to every class
variance (a feature constant within one class would otherwise give an infinite
density), and ``min_density`` floors each density (an outlier 40 σ out should not
veto a class on its own; it is the PMML ``threshold`` of an exported model, which is
what JPMML-Evaluator and PyPMML floor densities at).
"""

from __future__ import annotations

import numpy as np

from ..errors import EmptyTrainingSetError, NotFittedError
from .density_nb import DensityNB

__all__ = ["GaussianNB"]


class GaussianNB(DensityNB):
    """Per-class normal densities over dense numeric features.

    Parameters
    ----------
    var_smoothing : float >= 0, fraction of each feature's pooled variance added to
        every class variance.
    min_density : float >= 0, floor of each density (0: none).
    fit_prior : bool, class priors from the class weights (else uniform).
    class_prior : sequence of n_classes floats or None, fixed priors.
    n_classes : int, labels are 0 .. n_classes-1.

    Attributes
    ----------
    class_count_ : ndarray of shape (n_classes,), weight per class.
    mean_ : ndarray of shape (n_classes, n_features).
    m2_ : ndarray of shape (n_classes, n_features), sums of squared deviations.
    var_ : ndarray of shape (n_classes, n_features), the variances used (after smoothing).
    """

    kind = "gaussian"

    def __init__(self, *, var_smoothing: float = 1e-9, min_density: float = 0.0,
                 fit_prior: bool = True, class_prior=None, n_classes: int = 2):
        self.var_smoothing = var_smoothing
        self.min_density = min_density
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.n_classes = n_classes

    def fit(self, Z, y, sample_weight=None) -> "GaussianNB":
        Z = np.asarray(Z, dtype=np.float64)
        self._reset(Z.shape[1])
        return self.partial_fit(Z, y, sample_weight)

    def partial_fit(self, Z, y, sample_weight=None) -> "GaussianNB":
        """Merge the rows of Z (labels y, weights ±w) into the per-class statistics."""
        Z, y = self._check_Z_y(Z, y)
        if not hasattr(self, "class_count_"):
            self._reset(Z.shape[1])
        if Z.shape[1] != self.mean_.shape[1]:
            raise ValueError(f"Z has {Z.shape[1]} features, the model was fit with "
                             f"{self.mean_.shape[1]}")
        w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, float)
        for c in range(self.n_classes):
            rows = y == c
            n_b = w[rows].sum()
            if not rows.any() or n_b == 0:
                continue
            mean_b = (w[rows, None] * Z[rows]).sum(axis=0) / n_b
            m2_b = (w[rows, None] * (Z[rows] - mean_b) ** 2).sum(axis=0)
            self._merge(c, n_b, mean_b, m2_b)
        self._update()
        return self

    def unlearn(self, Z, y, sample_weight=None) -> "GaussianNB":
        w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, float)
        return self.partial_fit(Z, y, -w)

    def _reset(self, n_features: int) -> None:
        self.class_count_ = np.zeros(self.n_classes)
        self.mean_ = np.zeros((self.n_classes, n_features))
        self.m2_ = np.zeros((self.n_classes, n_features))

    def _merge(self, c: int, n_b: float, mean_b: np.ndarray, m2_b: np.ndarray) -> None:
        """Chan et al.'s update; a negative n_b removes (exact up to rounding)."""
        n_a, mean_a = self.class_count_[c], self.mean_[c]
        n = n_a + n_b
        if abs(n) < 1e-9:  # everything removed
            self.class_count_[c] = 0.0
            self.mean_[c] = 0.0
            self.m2_[c] = 0.0
            return
        delta = mean_b - mean_a
        self.mean_[c] = mean_a + delta * (n_b / n)
        self.m2_[c] = np.maximum(self.m2_[c] + m2_b + delta ** 2 * (n_a * n_b / n), 0.0)
        self.class_count_[c] = n

    def _update(self) -> None:
        """Variances (ddof = 1) with smoothing, and the class log-priors."""
        n = self.class_count_.reshape(-1, 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            var = np.where(n > 1, self.m2_ / np.maximum(n - 1, 1e-300), 0.0)
        if self.var_smoothing:
            var = var + self.var_smoothing * np.maximum(self._pooled_var(), 1e-12)
        self.var_ = var
        if self.class_prior is not None:
            self.class_log_prior_ = np.log(np.asarray(self.class_prior, dtype=np.float64))
        elif self.fit_prior:
            with np.errstate(divide="ignore"):
                self.class_log_prior_ = np.log(self.class_count_) - np.log(self.class_count_.sum())
        else:
            self.class_log_prior_ = np.full(self.n_classes, -np.log(self.n_classes))

    def _pooled_var(self) -> np.ndarray:
        """Each feature's variance over all classes together (ddof = 1)."""
        n = self.class_count_.sum()
        if n <= 1:
            return np.zeros(self.mean_.shape[1])
        mean = (self.class_count_ @ self.mean_) / n
        m2 = self.m2_.sum(axis=0) + self.class_count_ @ (self.mean_ - mean) ** 2
        return m2 / (n - 1)

    # -- scoring ------------------------------------------------------------------
    def feature_log_density(self, Z) -> np.ndarray:
        """log p(x_k | c): an ndarray of shape (n_docs, n_classes, n_features)."""
        self._check_fitted()
        Z = np.asarray(Z, dtype=np.float64)
        var = self.var_
        lp = -0.5 * (np.log(2 * np.pi * var)[None] + (Z[:, None, :] - self.mean_[None]) ** 2
                     / var[None])
        if self.min_density > 0:
            lp = np.maximum(lp, np.log(self.min_density))
        return lp

    def log_likelihood(self, Z) -> np.ndarray:
        """Σ_k log p(x_k | c) per row: an ndarray of shape (n_docs, n_classes), no prior."""
        return self.feature_log_density(Z).sum(axis=2)

    def _check_fitted(self) -> None:
        if not hasattr(self, "class_count_"):
            raise NotFittedError("this GaussianNB is not trained yet; train it first")
        if (self.class_count_ < 2).any():
            raise EmptyTrainingSetError("a Gaussian needs at least 2 training documents per "
                                        f"class, got {self.class_count_.tolist()}")

    # -- state as plain arrays (model files, PMML) --------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        return {"class_count": self.class_count_, "mean": self.mean_, "m2": self.m2_}

    @classmethod
    def from_arrays(cls, arrays: dict, **params) -> "GaussianNB":
        model = cls(**params)
        model.class_count_ = np.asarray(arrays["class_count"], dtype=np.float64)
        model.mean_ = np.asarray(arrays["mean"], dtype=np.float64)
        model.m2_ = np.asarray(arrays["m2"], dtype=np.float64)
        model._update()
        return model
