"""What the numeric naive Bayes models share: scoring from per-class log-likelihoods.

``GaussianNB`` (textnb/models/gaussian.py) and ``KernelDensityNB`` (textnb/models/kde.py) differ
only in how they estimate p(x_k | c); each defines ``log_likelihood(Z)`` (Σ_k log p(x_k | c)
per row and class) and ``class_log_prior_``. The rest of the textbook rule
(https://en.wikipedia.org/wiki/Naive_Bayes_classifier),
posterior ∝ P(c) Π_k p(x_k | c), is here once.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp


class DensityNB:
    """Scoring for a naive Bayes model whose subclass supplies ``log_likelihood``."""

    class_log_prior_: np.ndarray

    @staticmethod
    def _check_Z_y(Z, y) -> tuple[np.ndarray, np.ndarray]:
        """Z as finite floats of shape (len(y), n_features), y as integer labels."""
        Z = np.asarray(Z, dtype=np.float64)
        y = np.asarray(y, dtype=np.int64)
        if Z.ndim != 2 or Z.shape[0] != y.shape[0]:
            raise ValueError(f"Z has shape {Z.shape}, expected ({y.shape[0]}, n_features)")
        if not np.isfinite(Z).all():
            raise ValueError("Z holds NaN or infinite values; numeric features must be finite")
        return Z, y

    def log_likelihood(self, Z) -> np.ndarray:  # pragma: no cover - every subclass has one
        raise NotImplementedError

    def joint_log_likelihood(self, Z) -> np.ndarray:
        """log P(c) + Σ_k log p(x_k | c): the log of the encyclopedia's "posterior numerator"."""
        return self.log_likelihood(Z) + self.class_log_prior_

    def predict_log_proba(self, Z) -> np.ndarray:
        jll = self.joint_log_likelihood(Z)
        return jll - logsumexp(jll, axis=1, keepdims=True)

    def predict_proba(self, Z) -> np.ndarray:
        return np.exp(self.predict_log_proba(Z))

    def log_odds(self, Z) -> np.ndarray:
        """log p(z | class 1) - log p(z | class 0): the features' evidence, without the prior."""
        ll = self.log_likelihood(Z)
        return ll[:, 1] - ll[:, 0]
