"""Token lists -> scipy.sparse CSR document-term matrices.

The vocabulary only grows: a token seen once in training keeps its column for
ever, so counts survive pruning and a later retrain or forget stays exact.
Pruning (``min_df``, ``max_features``) is a *mask* over columns that the model
applies when it turns counts into log-probabilities; nothing is thrown away.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import repeat

import numpy as np

from .._c.speedups import hash_index, number_tokens, sortable_keys
from .csr_arrays import Rows
from .lazy_scipy import lazy_module
from .token_store import TokenStore

sp = lazy_module("scipy.sparse")  # imported when a matrix is first built


# The recent columns' arrays are merged into the main ones when they hold more than a
# quarter of the indexed columns, and never below this many (each merge costs O(n)).
_MIN_REBUILD = 1 << 16


def _token_hashes(store: TokenStore, start: int = 0) -> np.ndarray:
    """The index's hash of each token of ``store`` from ``start`` on (its bytes' hash)."""
    return store.hashes(start)


# Entries of the sorted arrays moved at a time by ``_merge_into``.
_MERGE_CHUNK = 1 << 18


def _merge_into(keys: np.ndarray, values: np.ndarray, new_keys: np.ndarray,
                new_values: np.ndarray) -> None:
    """Merge sorted ``new_keys`` (and their ``values``) into the sorted ``keys`` and
    ``values``, in place: both are resized (``realloc``: a large block is remapped, not
    copied) and their entries moved up from the back a chunk at a time, so no second
    copy of them exists (``np.insert``'s did: 16 bytes a token at the peak).

    keys, values (ndarray): owned by the caller, no views of them alive.
    """
    n, m = keys.size, new_keys.size
    if not m:
        return
    at = np.searchsorted(keys, new_keys)  # where each new entry goes among the old
    keys.resize(n + m, refcheck=False)
    values.resize(n + m, refcheck=False)
    for stop in range(n, 0, -_MERGE_CHUNK):  # from the back: no entry moves down
        start = max(stop - _MERGE_CHUNK, 0)
        old = np.arange(start, stop)
        to = old + np.searchsorted(at, old, side="right")  # old entries pass the new ones before them
        keys[to], values[to] = keys[start:stop].copy(), values[start:stop].copy()
    to = at + np.arange(m)
    keys[to], values[to] = new_keys, new_values


class Vocabulary:
    """A growing token -> column map.

    Attributes
    ----------
    tokens_ : TokenStore (a list of str packed as UTF-8), the token of each column, in
        order of first sight.

    Both halves are compact. The tokens are one UTF-8 buffer and an offset each
    (``TokenStore``: their bytes plus 8 a token, against ~70 for a list of str). The
    map from token to column is two pairs of NumPy arrays, the tokens' hashes sorted
    and the column of each (16 bytes a token): the main pair, and the columns added
    since it was last rebuilt (at most a quarter of them), plus a dict of the rare
    tokens whose hash another token shares. Where textnb's C module was built, a hash
    table (``speedups.HashIndex``: an int32 slot a column, the hashes in column order)
    takes the place of the arrays, with the same dict beside it. A dict of str would cost
    several times as much a token, a large share of a big vocabulary's peak memory
    (docs/design/memory.md#the-packed-vocabulary). The hash is of the
    UTF-8 bytes (``TokenStore.hashes``), so a loaded vocabulary is indexed without
    decoding its tokens; a hash match is confirmed by decoding the candidate token and
    comparing the strings, so a lookup is exact. Nothing of the index is saved.

    A repeated token (a damaged file) raises ValueError when the columns are first
    indexed (``check``, or a lookup), not at construction: a loaded model that scores
    a message or two never indexes them (``columns``).
    """

    def __init__(self, tokens: Sequence[str] = ()):
        self.tokens_ = TokenStore(tokens)
        # Sorted hashes and their columns, and the same for the recent columns: arrays
        # this class alone holds (no view of them outlives a call), grown in place.
        self._hashes, self._order = np.zeros(0, np.int64), np.zeros(0, np.int64)
        self._new_hashes, self._new_order = np.zeros(0, np.int64), np.zeros(0, np.int64)
        self._shared: dict[str, int] = {}  # indexed tokens whose hash is not unique
        # With the C module, the index is a hash table instead of the sorted arrays
        # (``speedups.HashIndex``); ``_shared`` works the same with either.
        self._table = hash_index()
        self._indexed = 0                  # columns below this are indexed
        self._lookups = 0  # calls to ``columns`` made before the columns were indexed

    @classmethod
    def of_store(cls, store: TokenStore) -> "Vocabulary":
        """The vocabulary of ``store``'s tokens, taking the store over (not copied, as
        ``Vocabulary(store)`` copies it): for a loader whose store is its own."""
        vocabulary = cls()
        vocabulary.tokens_ = store
        return vocabulary

    @property
    def index_(self) -> dict[str, int]:
        """The whole map as a dict (built on request, for tests and tools; the filter's
        own look-ups go through ``columns`` and ``add``)."""
        index = dict(zip(self.tokens_, range(len(self.tokens_))))
        if len(index) != len(self.tokens_):
            raise ValueError("vocabulary has duplicate tokens")
        return index

    def __len__(self) -> int:
        return len(self.tokens_)

    def __contains__(self, token: str) -> bool:
        return bool(self.columns([token])[0] >= 0)

    def check(self) -> None:
        """Index every column now; ValueError when a token repeats."""
        self._ensure_indexed()

    def columns(self, tokens: Sequence[str]) -> np.ndarray:
        """The column of each token, -1 for tokens not in the vocabulary.

        The first call on a vocabulary whose columns are not indexed yet (a loaded
        model) finds its columns in one pass over the tokens' bytes instead
        (``TokenStore.candidates``); later calls index them. The pass costs a fraction
        of building the index, so ``textnb filter`` on one message, which loads the
        model for that message alone, skips the index; a second batch (``classify``,
        the resident server) builds it once
        (docs/design/startup.md#the-load-beside-spacys-import).

        RETURNS (ndarray of int64, shape (len(tokens),)).
        """
        tokens = tokens if isinstance(tokens, list) else list(tokens)
        if self._indexed == 0 and len(self.tokens_) and self._lookups == 0:
            self._lookups += 1
            wanted, maybe = set(tokens), self.tokens_.candidates(tokens).tolist()
            found = [(t, j) for t, j in zip(self.tokens_.take(maybe), maybe) if t in wanted]
            index = dict(found)
            if len(index) != len(found):
                raise ValueError("vocabulary has duplicate tokens")
            return np.fromiter(map(index.get, tokens, repeat(-1)), dtype=np.int64,
                               count=len(tokens))
        self._ensure_indexed()
        return self._lookup(tokens)

    def add(self, tokens: Iterable[str], hashes: np.ndarray | None = None) -> np.ndarray:
        """The column of each token, adding unseen tokens at the end in the order given.

        hashes (ndarray | None): the tokens' ``TokenStore.hashes`` (int64), if the
            caller has them (``engines.counting.Counts``): not taken again.
        RETURNS (ndarray of int64, shape (n_tokens,)).
        """
        if isinstance(tokens, TokenStore):
            added = self._add_store(tokens, hashes)
            if added is not None:
                return added
        tokens = tokens if isinstance(tokens, list) else list(tokens)
        self._ensure_indexed()
        cols = self._lookup(tokens, hashes)
        missing = np.flatnonzero(cols < 0)
        if not missing.size:
            return cols
        missed = list(map(tokens.__getitem__, missing.tolist()))
        start = len(self.tokens_)
        if hashes is not None and np.unique(hashes[missing]).size == missing.size:
            # Distinct hashes, so distinct tokens (the counts' are): each new one is the
            # next column, no dict of them needed.
            self.tokens_.extend(missed)
            self._index(start, hashes[missing])
            cols[missing] = np.arange(start, start + missing.size)
            return cols
        new = list(dict.fromkeys(missed))  # in order of first sight
        self.tokens_.extend(new)
        self._index(start, _token_hashes(self.tokens_, start))
        batch = dict(zip(new, range(start, start + len(new))))
        cols[missing] = np.fromiter(map(batch.__getitem__, missed), dtype=np.int64,
                                    count=len(missed))
        return cols

    def _add_store(self, store: TokenStore, hashes: np.ndarray | None) -> np.ndarray | None:
        """``add`` for distinct tokens packed in a TokenStore (a worker's counts), as bytes:
        a hash match is confirmed by comparing the two stores' bytes, and new tokens are
        copied over as bytes, so no str is made. None when a token would need the str
        path (the rare tokens that share a hash: ``_shared``, or two new ones alike)."""
        self._ensure_indexed()
        hashes = _token_hashes(store) if hashes is None else hashes
        cols = self._find_hashes(hashes)
        indexed = cols >= 0
        hit = np.flatnonzero(indexed)
        if hit.size:
            cols[hit[~self.tokens_.equal_at(cols[hit], store, hit)]] = -1
        missing = np.flatnonzero(cols < 0)
        if self._shared and missing.size:
            return None
        if not missing.size:
            return cols
        new_hashes = hashes[missing]
        order = None
        if self._table is None:
            order = np.argsort(new_hashes)  # also what ``_index`` sorts by
            ordered = new_hashes[order]
            if (ordered[1:] == ordered[:-1]).any():
                return None
        elif self._table.repeats(new_hashes):
            return None
        start = len(self.tokens_)
        self.tokens_.extend_from(store, missing)
        # What the look-up found is what ``_index`` would look up again: the new
        # tokens' hashes that some other token has.
        self._index(start, new_hashes, order, indexed[missing])
        cols[missing] = np.arange(start, start + missing.size)
        return cols

    # -- the compact index ---------------------------------------------------
    def _ensure_indexed(self) -> None:
        """Index the columns of a loaded vocabulary."""
        if self._indexed == 0 and len(self.tokens_):  # ``add`` indexes what it adds
            self._index(0, _token_hashes(self.tokens_))

    def _index(self, first: int, hashes: np.ndarray, order: np.ndarray | None = None,
               indexed: np.ndarray | None = None) -> None:
        """Index columns ``first`` .. ``first + len(hashes) - 1`` (``hashes``: their
        tokens' hashes, in column order) into the recent arrays.

        order (ndarray | None): ``np.argsort(hashes)``, if the caller has it.
        indexed (ndarray | None): bool, whether each hash is indexed already, if known.
        """
        if self._table is not None:
            self._index_in_table(first, hashes)
            return
        if order is None:
            order = np.argsort(hashes)  # any order of equal hashes will do (``_shared``)
        hashes, columns = hashes[order], order + first
        # A hash already indexed, or repeated among the new ones, goes to ``_shared``
        # (after checking that the strings differ: an equal string is a repeated token).
        # Nothing indexed yet (a loaded vocabulary, or a new one's first tokens).
        empty = not (self._hashes.size or self._new_hashes.size)
        if indexed is not None:
            taken = indexed[order]
        else:
            taken = np.zeros(hashes.size, bool) if empty else self._find_hashes(hashes) >= 0
        taken[1:] |= hashes[1:] == hashes[:-1]
        if taken.any():
            tokens = self.tokens_
            for i in np.flatnonzero(taken).tolist():
                token = tokens[columns[i]]
                k = i - 1  # the new tokens before it with the same hash
                while k >= 0 and hashes[k] == hashes[i]:
                    if tokens[columns[k]] == token:
                        raise ValueError("vocabulary has duplicate tokens")
                    k -= 1
                if token in self._shared or self._lookup([token])[0] >= 0:
                    raise ValueError("vocabulary has duplicate tokens")
                self._shared[token] = int(columns[i])
            hashes, columns = hashes[~taken], columns[~taken]
        self._indexed = first + len(order)
        if empty:  # the sorted arrays as they are: nothing to merge them into
            self._hashes, self._order = hashes, columns
            return
        _merge_into(self._new_hashes, self._new_order, hashes, columns)
        if self._new_hashes.size > max(_MIN_REBUILD, self._hashes.size // 4):
            _merge_into(self._hashes, self._order, self._new_hashes, self._new_order)
            self._new_hashes.resize(0, refcheck=False)
            self._new_order.resize(0, refcheck=False)

    def _index_in_table(self, first: int, hashes: np.ndarray) -> None:
        """``_index`` with the C hash table: a column whose hash an earlier one holds goes
        to ``_shared`` (after checking that the strings differ), in column order."""
        if first != len(self._table):
            raise AssertionError(f"columns {len(self._table)}.. not indexed before {first}")
        taken = self._table.add(hashes)
        if taken.any():
            tokens = self.tokens_
            for i in np.flatnonzero(taken).tolist():
                token = tokens[first + i]
                if token in self._shared or self._lookup([token])[0] >= 0:
                    raise ValueError("vocabulary has duplicate tokens")
                self._shared[token] = first + i
        self._indexed = first + len(hashes)

    def _find_hashes(self, hashes: np.ndarray) -> np.ndarray:
        """The column indexed under each hash, -1 for none (not yet the string check)."""
        if self._table is not None:
            return self._table.find(hashes)
        cols = np.full(hashes.size, -1, dtype=np.int64)
        if not (self._hashes.size or self._new_hashes.size):
            return cols
        # Searched in sorted order, each search starts where the last one ended, so the
        # searches walk the arrays once (docs/design/c-loops.md#twins-and-the-fallback).
        order = np.argsort(hashes)
        ordered = hashes[order]
        for keys, columns in ((self._hashes, self._order), (self._new_hashes, self._new_order)):
            if keys.size:
                at = np.empty(hashes.size, dtype=np.int64)
                at[order] = np.searchsorted(keys, ordered)
                np.minimum(at, keys.size - 1, out=at)
                hit = keys[at] == hashes
                cols[hit] = columns[at[hit]]
        return cols

    def _lookup(self, tokens: list[str], hashes: np.ndarray | None = None) -> np.ndarray:
        """Columns of indexed tokens (-1 for others): hash (unless given), binary search,
        bytes check."""
        packed = TokenStore(tokens)
        cols = self._find_hashes(_token_hashes(packed) if hashes is None else hashes)
        hit = np.flatnonzero(cols >= 0)
        if hit.size:
            # Compared as bytes (``TokenStore.equal_at``): decoding and comparing as str
            # was a third of a scoring batch's look-ups
            # (docs/design/counting-and-scoring.md#scoring-a-batch).
            cols[hit[~self.tokens_.equal_at(cols[hit], packed, hit)]] = -1
        if self._shared:
            for i in np.flatnonzero(cols < 0).tolist():
                cols[i] = self._shared.get(tokens[i], -1)
        return cols

    def transform(self, docs: Iterable[Sequence[str]], *, grow: bool = False,
                  binary: bool = False) -> sp.csr_matrix:
        """Count tokens per document into a CSR matrix of shape (n_docs, len(self)).

        grow (bool): add unseen tokens as new columns (training); otherwise they are
            dropped (scoring).
        binary (bool): 1 for presence instead of the term frequency.
        """
        return self.rows(docs, grow=grow, binary=binary).to_csr()

    def rows(self, docs: Iterable[Sequence[str]], *, grow: bool = False,
             binary: bool = False) -> Rows:
        """``transform``'s matrix as bare CSR arrays (``textnb.features.csr_arrays``: no SciPy)."""
        if isinstance(docs, (str, bytes)):
            raise TypeError("an iterable of token lists is expected, got a single string")
        docs = docs if isinstance(docs, list) else list(docs)
        tokens = self.tokens_
        lengths = np.fromiter(map(len, docs), dtype=np.int64, count=len(docs))
        # One pass numbers the batch's distinct tokens in order of first sight (the
        # order new columns get), then each distinct token is looked up once in the
        # vocabulary (``engines.counting.count_tokens`` numbers them the same way).
        local, distinct = number_tokens(docs)
        found = self.add(distinct) if grow else self.columns(distinct)
        cols = found[local]
        doc_rows = np.repeat(np.arange(len(docs), dtype=np.int64), lengths)
        if not grow:  # unknown tokens are dropped
            known = cols >= 0
            doc_rows, cols = doc_rows[known], cols[known]
        # One sort of (row, column) keys counts every cell and leaves the columns of
        # each row sorted: canonical CSR (fast products, exact equality). The dict
        # look-ups run in one pass, not a Python loop per token (``number_tokens``; even
        # its Python twin's map and np.fromiter beat such a loop by a fifth or more).
        n_features = max(len(tokens), 1)
        keys = sortable_keys(doc_rows * n_features + cols, len(docs) * n_features)
        keys, counts = np.unique(keys, return_counts=True)
        doc_rows, cols = np.divmod(keys, n_features)
        indptr = np.zeros(len(docs) + 1, dtype=np.int64)
        np.cumsum(np.bincount(doc_rows, minlength=len(docs)), out=indptr[1:])
        data = np.ones(counts.size) if binary else counts.astype(np.float64)
        return Rows(data, cols, indptr, (len(docs), len(tokens)))


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
