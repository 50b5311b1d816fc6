"""Token lists -> scipy.sparse CSR document-term matrices.

The vocabulary only grows: a token seen once in training keeps its column for
ever, so counts survive pruning and a later retrain or forget stays exact.
Pruning (``min_df``, ``max_features``) is a *mask* over columns that the model
applies when it turns counts into log-probabilities; nothing is thrown away.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import scipy.sparse as sp


class Vocabulary:
    """A growing token -> column map.

    Attributes
    ----------
    tokens_ : list of str, the token of each column, in order of first sight.
    index_ : dict token -> column.
    """

    def __init__(self, tokens: Sequence[str] = ()):
        self.tokens_: list[str] = list(tokens)
        self.index_: dict[str, int] = {t: i for i, t in enumerate(self.tokens_)}
        if len(self.index_) != len(self.tokens_):
            raise ValueError("vocabulary has duplicate tokens")

    def __len__(self) -> int:
        return len(self.tokens_)

    def __contains__(self, token: str) -> bool:
        return token in self.index_

    def transform(self, docs: Iterable[Sequence[str]], *, grow: bool = False,
                  binary: bool = False) -> sp.csr_matrix:
        """Count tokens per document into a CSR matrix of shape (n_docs, len(self)).

        grow (bool): add unseen tokens as new columns (training); otherwise they are
            dropped (scoring).
        binary (bool): 1 for presence instead of the term frequency.
        """
        if isinstance(docs, (str, bytes)):
            raise TypeError("an iterable of token lists is expected, got a single string")
        index = self.index_
        tokens = self.tokens_
        indices: list[int] = []
        values: list[int] = []
        indptr = [0]
        for doc in docs:
            counts: dict[int, int] = {}
            for tok in doc:
                j = index.get(tok)
                if j is None:
                    if not grow:
                        continue
                    j = len(tokens)
                    index[tok] = j
                    tokens.append(tok)
                counts[j] = counts.get(j, 0) + 1
            # Sorted column indices make canonical CSR (fast products, exact equality).
            for j in sorted(counts):
                indices.append(j)
                values.append(counts[j])
            indptr.append(len(indices))
        X = sp.csr_matrix(
            (np.asarray(values, dtype=np.float64), np.asarray(indices, dtype=np.int64),
             np.asarray(indptr, dtype=np.int64)),
            shape=(len(indptr) - 1, len(tokens)),
        )
        if binary:
            X.data.fill(1.0)
        return X


def binarize(X: sp.csr_matrix) -> sp.csr_matrix:
    """Presence/absence copy of a count matrix (never densifies)."""
    X = X.copy()
    X.data.fill(1.0)
    return X


def feature_mask(doc_freq: np.ndarray, min_df: int = 1, max_features: int = 0) -> np.ndarray:
    """Boolean mask of the columns kept by pruning.

    doc_freq : ndarray of shape (n_features,), documents (of any class) containing each token.
    min_df : keep tokens seen in at least this many training documents.
    max_features : if > 0, keep only that many, the most frequent (ties broken by column order).
    """
    mask = doc_freq >= min_df
    if max_features and mask.sum() > max_features:
        order = np.lexsort((np.arange(len(doc_freq)), -doc_freq))
        keep = order[mask[order]][:max_features]
        mask = np.zeros_like(mask)
        mask[keep] = True
    return mask
