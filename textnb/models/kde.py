"""Naive Bayes with kernel density estimates for numeric features.

Each feature k of class c is modelled by a Gaussian kernel density over the class's
training values b_1 … b_n (N. Knappmeier, "Naive Bayes für Regressionsprobleme",
seminar slides, Knowledge Engineering, TU Darmstadt, 2005; after G. H. John and
P. Langley, "Estimating Continuous Distributions in Bayesian Classifiers", UAI 1995)::

    f(x) = 1/(n h) Σ_i K((x - b_i) / h),        K(u) = exp(-u²/2) / sqrt(2π)

with the bandwidth h chosen by leave-one-out log-likelihood over a grid (Knappmeier's
"Ausprobieren von Werten für h über einem festgelegten Intervall")::

    h_CV = argmax_h 1/n Σ_i log f*_i(b_i),    f*_i(b) = 1/((n-1) h) Σ_{j≠i} K((b - b_j) / h)

One departure, because mail features repeat: when a value occurs more than once (0
links, 1 recipient), its twin sits at distance 0, so f*_i(b_i) → ∞ as h → 0 and the
criterion picks the smallest h on the grid whatever the data. We leave out every copy
of the value (leave-one-value-out): the criterion stays bounded and for data without
ties it is Knappmeier's. The grid is Silverman's rule of thumb times 2^(k/2),
k = -12 … 6; the selection uses at most ``max_points`` values per class (an evenly
spaced deterministic subsample: the criterion costs O(n²)).

The training values are the state (there is no smaller sufficient statistic):
``partial_fit`` with weight -1 removes one copy of each row again, and bandwidths are
chosen again on the next score after any change.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from ..errors import EmptyTrainingSetError, NotFittedError
from .density_nb import DensityNB

__all__ = ["KernelDensityNB", "loo_log_likelihood", "loo_bandwidth"]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
GRID_STEPS = np.arange(-12, 7) / 2.0  # h = h_silverman * 2**step
CONSTANT_BANDWIDTH = 0.1  # a feature with one distinct value in a class: nothing to leave out


def loo_log_likelihood(values: np.ndarray, bandwidths: np.ndarray) -> np.ndarray:
    """Mean leave-one-value-out log-likelihood of ``values`` for each bandwidth."""
    u, m = np.unique(np.asarray(values, dtype=np.float64), return_counts=True)
    n = m.sum()
    if u.size < 2:
        return np.full(len(bandwidths), -np.inf)
    d2 = (u[:, None] - u[None, :]) ** 2
    weights = np.tile(m.astype(np.float64), (u.size, 1))
    np.fill_diagonal(weights, 0.0)  # leave out every copy of the point's own value
    out = np.empty(len(bandwidths))
    for i, h in enumerate(bandwidths):
        # in log space: far neighbours underflow exp() long before the criterion does
        log_f = (logsumexp(-0.5 * d2 / (h * h), axis=1, b=weights)
                 - np.log((n - m) * h) - _LOG_SQRT_2PI)
        out[i] = (m * log_f).sum() / n
    return out


def loo_bandwidth(values: np.ndarray, max_points: int = 1000) -> tuple[float, bool]:
    """The grid bandwidth of largest leave-one-value-out likelihood, and whether it is
    at an edge of the grid (then the grid, not the data, decided)."""
    values = np.sort(np.asarray(values, dtype=np.float64))
    if values.size > max_points:  # evenly spaced order statistics: keeps the shape
        values = values[np.linspace(0, values.size - 1, max_points).round().astype(int)]
    if np.unique(values).size < 2:
        return CONSTANT_BANDWIDTH, False
    std = values.std(ddof=1)
    iqr = np.subtract(*np.percentile(values, [75, 25]))
    spread = min(std, iqr / 1.34) if iqr > 0 else std
    silverman = 0.9 * spread * values.size ** -0.2
    grid = silverman * 2.0 ** GRID_STEPS
    scores = loo_log_likelihood(values, grid)
    best = int(np.argmax(scores))
    return float(grid[best]), best in (0, len(grid) - 1)


class KernelDensityNB(DensityNB):
    """Per-class Gaussian kernel densities over dense numeric features.

    Parameters
    ----------
    max_points : int, values per class used to choose each bandwidth.
    min_density : float >= 0, floor of each density (0: none).
    fit_prior, class_prior, n_classes : as :class:`textnb.models.gaussian.GaussianNB`.

    Attributes
    ----------
    class_count_ : ndarray of shape (n_classes,).
    values_ : list of n_classes ndarrays of shape (n_c, n_features), the training values.
    bandwidth_ : ndarray of shape (n_classes, n_features), chosen on first use.
    at_grid_edge_ : ndarray of bool, same shape: the choice hit the end of the grid.
    """

    kind = "kde"

    def __init__(self, *, max_points: int = 1000, min_density: float = 0.0,
                 fit_prior: bool = True, class_prior=None, n_classes: int = 2):
        self.max_points = max_points
        self.min_density = min_density
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.n_classes = n_classes

    def fit(self, Z, y, sample_weight=None) -> "KernelDensityNB":
        Z = np.asarray(Z, dtype=np.float64)
        self.values_ = [np.zeros((0, Z.shape[1])) for _ in range(self.n_classes)]
        return self.partial_fit(Z, y, sample_weight)

    def partial_fit(self, Z, y, sample_weight=None) -> "KernelDensityNB":
        """Add the rows of Z (integer weights repeat them; negative ones remove copies)."""
        Z, y = self._check_Z_y(Z, y)
        if not hasattr(self, "values_"):
            self.values_ = [np.zeros((0, Z.shape[1])) for _ in range(self.n_classes)]
        w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, float)
        if not np.array_equal(w, np.round(w)):
            raise ValueError("KernelDensityNB takes integer sample weights (copies of a row)")
        for c in range(self.n_classes):
            add = np.repeat(Z[(y == c) & (w > 0)], w[(y == c) & (w > 0)].astype(int), axis=0)
            values = np.vstack([self.values_[c], add])
            for row, times in zip(Z[(y == c) & (w < 0)], -w[(y == c) & (w < 0)].astype(int)):
                for _ in range(times):
                    hit = np.flatnonzero((values == row).all(axis=1))
                    if hit.size == 0:
                        raise ValueError("a row was removed that was never added")
                    values = np.delete(values, hit[0], axis=0)
            self.values_[c] = values
        self.class_count_ = np.array([len(v) for v in self.values_], dtype=np.float64)
        self.bandwidth_ = None  # chosen again on first use
        self._update_class_log_prior()
        return self

    def unlearn(self, Z, y, sample_weight=None) -> "KernelDensityNB":
        w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, float)
        return self.partial_fit(Z, y, -w)

    def _update_class_log_prior(self) -> None:
        if self.class_prior is not None:
            self.class_log_prior_ = np.log(np.asarray(self.class_prior, dtype=np.float64))
        elif self.fit_prior:
            with np.errstate(divide="ignore"):
                self.class_log_prior_ = np.log(self.class_count_) - np.log(self.class_count_.sum())
        else:
            self.class_log_prior_ = np.full(self.n_classes, -np.log(self.n_classes))

    def select_bandwidths(self) -> np.ndarray:
        """Choose h for every (class, feature) by leave-one-value-out likelihood."""
        self._check_fitted()
        n_features = self.values_[0].shape[1]
        self.bandwidth_ = np.empty((self.n_classes, n_features))
        self.at_grid_edge_ = np.zeros((self.n_classes, n_features), dtype=bool)
        for c, values in enumerate(self.values_):
            for k in range(n_features):
                self.bandwidth_[c, k], self.at_grid_edge_[c, k] = loo_bandwidth(
                    values[:, k], self.max_points)
        return self.bandwidth_

    # -- scoring ------------------------------------------------------------------
    def log_likelihood(self, Z) -> np.ndarray:
        """Σ_k log f_ck(x_k) per row: an ndarray of shape (n_docs, n_classes), no prior."""
        self._check_fitted()
        if self.bandwidth_ is None:
            self.select_bandwidths()
        Z = np.asarray(Z, dtype=np.float64)
        out = np.zeros((Z.shape[0], self.n_classes))
        for c, values in enumerate(self.values_):
            for k in range(Z.shape[1]):
                u, m = np.unique(values[:, k], return_counts=True)  # ties share one kernel
                h = self.bandwidth_[c, k]
                for start in range(0, Z.shape[0], 512):
                    x = Z[start:start + 512, k]
                    lp = logsumexp(-0.5 * ((x[:, None] - u[None, :]) / h) ** 2, axis=1,
                                   b=m[None, :])
                    lp -= math.log(len(values) * h) + _LOG_SQRT_2PI
                    if self.min_density > 0:
                        lp = np.maximum(lp, math.log(self.min_density))
                    out[start:start + 512, c] += lp
        return out

    def _check_fitted(self) -> None:
        if not hasattr(self, "values_"):
            raise NotFittedError("this KernelDensityNB is not trained yet; train it first")
        if min(len(v) for v in self.values_) < 2:
            raise EmptyTrainingSetError("a kernel density needs at least 2 training documents "
                                        f"per class, got {[len(v) for v in self.values_]}")

    # -- state as plain arrays (model files) ---------------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        return {f"values_{c}": v for c, v in enumerate(self.values_)}

    @classmethod
    def from_arrays(cls, arrays: dict, **params) -> "KernelDensityNB":
        model = cls(**params)
        model.values_ = [np.asarray(arrays[f"values_{c}"], dtype=np.float64)
                         for c in range(model.n_classes)]
        model.class_count_ = np.array([len(v) for v in model.values_], dtype=np.float64)
        model.bandwidth_ = None
        model._update_class_log_prior()
        return model
