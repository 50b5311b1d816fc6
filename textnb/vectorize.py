"""Token lists -> scipy.sparse CSR document-term matrices.

The vocabulary only grows: a token seen once in training keeps its column for
ever, so counts survive pruning and a later retrain or forget stays exact.
Pruning (``min_df``, ``max_features``) is a *mask* over columns that the model
applies when it turns counts into log-probabilities; nothing is thrown away.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain, compress, repeat

import numpy as np
import scipy.sparse as sp


class Vocabulary:
    """A growing token -> column map.

    Attributes
    ----------
    tokens_ : list of str, the token of each column, in order of first sight.
    index_ : dict token -> column, built on first use (see ``columns``).

    A repeated token raises ValueError when the index is built (or when ``columns``
    meets it), not at construction: a loaded model that only scores a message or two
    never builds the index.
    """

    def __init__(self, tokens: Sequence[str] = ()):
        self.tokens_: list[str] = list(tokens)
        self._index: dict[str, int] | None = None
        self._lookups = 0  # calls to ``columns`` made without the index

    @property
    def index_(self) -> dict[str, int]:
        if self._index is None:
            index = dict(zip(self.tokens_, range(len(self.tokens_))))
            if len(index) != len(self.tokens_):
                raise ValueError("vocabulary has duplicate tokens")
            self._index = index
        return self._index

    def __len__(self) -> int:
        return len(self.tokens_)

    def check(self) -> None:
        """Build the index now; ValueError when a token repeats (a damaged file)."""
        self.index_

    def __contains__(self, token: str) -> bool:
        return token in self.index_

    def columns(self, tokens: Sequence[str]) -> np.ndarray:
        """The column of each token, -1 for tokens not in the vocabulary.

        The first call on a vocabulary without its index finds the columns in one pass
        over the tokens instead of building the index; later calls build it. On the
        SpamAssassin model (549,730 tokens, one message of 403 distinct tokens) the pass
        costs 34 ms and the index 140 ms (best of 5, load 0.6), so ``textnb filter`` on
        one message, which loads the model for that message alone, skips the index; a
        second batch (``classify``, the resident server) builds it once.

        RETURNS (ndarray of int64, shape (len(tokens),)).
        """
        if self._index is None and self._lookups == 0:
            self._lookups += 1
            wanted = set(tokens)
            found = list(compress(range(len(self.tokens_)),
                                  map(wanted.__contains__, self.tokens_)))
            index = {self.tokens_[j]: j for j in found}
            if len(index) != len(found):
                raise ValueError("vocabulary has duplicate tokens")
        else:
            index = self.index_
        return np.fromiter(map(index.get, tokens, repeat(-1)), dtype=np.int64, count=len(tokens))

    def add(self, tokens: Iterable[str]) -> np.ndarray:
        """The column of each token, adding unseen tokens at the end in the order given.

        RETURNS (ndarray of int64, shape (n_tokens,)).
        """
        index, known = self.index_, self.tokens_
        columns = []
        for tok in tokens:
            j = index.get(tok)
            if j is None:
                j = index[tok] = len(known)
                known.append(tok)
            columns.append(j)
        return np.asarray(columns, dtype=np.int64)

    def transform(self, docs: Iterable[Sequence[str]], *, grow: bool = False,
                  binary: bool = False) -> sp.csr_matrix:
        """Count tokens per document into a CSR matrix of shape (n_docs, len(self)).

        grow (bool): add unseen tokens as new columns (training); otherwise they are
            dropped (scoring).
        binary (bool): 1 for presence instead of the term frequency.
        """
        if isinstance(docs, (str, bytes)):
            raise TypeError("an iterable of token lists is expected, got a single string")
        docs = docs if isinstance(docs, list) else list(docs)
        tokens = self.tokens_
        flat = list(chain.from_iterable(docs))
        if grow:
            index = self.index_
            # New columns in order of first sight: dict.fromkeys keeps that order.
            seen = dict.fromkeys(flat)
            if not seen.keys() <= index.keys():
                new = [tok for tok in seen if tok not in index]
                index.update(zip(new, range(len(tokens), len(tokens) + len(new))))
                tokens.extend(new)
            cols = np.fromiter(map(index.__getitem__, flat), dtype=np.int64, count=len(flat))
        else:
            cols = self.columns(flat)
        lengths = np.fromiter(map(len, docs), dtype=np.int64, count=len(docs))
        rows = np.repeat(np.arange(len(docs), dtype=np.int64), lengths)
        if not grow:  # unknown tokens are dropped
            known = cols >= 0
            rows, cols = rows[known], cols[known]
        # One sort of (row, column) keys counts every cell and leaves the columns of
        # each row sorted: canonical CSR (fast products, exact equality). The dict
        # look-ups run in C (map, np.fromiter) instead of a Python loop per token:
        # SpamAssassin's 2.2 million training tokens, 1.39 -> 1.10 s; Enron 1-3's
        # 4.7 million, 2.17 -> 1.53 s (CPU, batches of 512 messages).
        n_features = max(len(tokens), 1)
        keys, counts = np.unique(rows * n_features + cols, return_counts=True)
        rows, cols = np.divmod(keys, n_features)
        indptr = np.zeros(len(docs) + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=len(docs)), out=indptr[1:])
        X = sp.csr_matrix((counts.astype(np.float64), cols, indptr),
                          shape=(len(docs), len(tokens)))
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
