"""A document-term matrix as bare CSR arrays: what scoring needs, without SciPy.

Scoring with the default evidence selection (``_BaseNB.selected_log_odds``) reads a
matrix's rows as CSR arrays and multiplies each entry by its column's weight; it
never needs SciPy's sparse matrix class. Importing ``scipy.sparse`` and
``scipy.special`` is a large share of ``textnb filter``'s start-up on one message, and is
paid again in each worker process of ``textnb classify`` (SciPy 1.17's array-API layer
imports ``numpy.f2py``, ``numpy.ma`` and more: textnb.features.lazy_scipy;
docs/design/startup.md#scipy-kept-off-the-scoring-path). So scoring
builds ``Rows``; a path that needs SciPy's products (plain naive Bayes, ``explain``,
the export) turns them into a ``csr_matrix`` with ``to_csr``, which holds the same
arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Rows"]


@dataclass
class Rows:
    """A matrix of shape ``shape`` in CSR form: row i's columns are
    ``indices[indptr[i]:indptr[i + 1]]``, sorted and distinct, its values ``data`` there
    (float64). The attributes are those of ``scipy.sparse.csr_matrix`` with sorted
    indices, so code that reads a CSR matrix's arrays reads these."""

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    shape: tuple[int, int]

    has_sorted_indices = True

    def sort_indices(self) -> None:
        """Nothing to do: the indices are sorted (as csr_matrix.sort_indices leaves them)."""

    @property
    def nnz(self) -> int:
        return int(self.data.size)

    def copy(self) -> Rows:
        return Rows(self.data.copy(), self.indices.copy(), self.indptr.copy(), self.shape)

    def with_columns(self, n_columns: int) -> Rows:
        """The same entries in a matrix ``n_columns`` wide (columns added since it was
        built; as csr_matrix with a wider shape)."""
        return Rows(self.data, self.indices, self.indptr, (self.shape[0], n_columns))

    def to_csr(self):
        """The same matrix as ``scipy.sparse.csr_matrix`` (imports SciPy)."""
        import scipy.sparse as sp

        return sp.csr_matrix((self.data, self.indices, self.indptr), shape=self.shape)
