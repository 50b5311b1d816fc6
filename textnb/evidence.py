"""Evidence selection: which of a message's tokens its score is made of.

A message is scored by the log-likelihood ratios of its ``k`` strongest tokens
(``model.max_discriminators``; see ``_BaseNB.selected_log_odds``). With word pairs
on (``tokenizer.bigrams``) a pair and its two words are largely one piece of
evidence counted three times, and a message whose strongest words run together
fills its ``k`` places with them. So at most ``model.max_pair_discriminators`` of
the ``k`` may be pairs; the places left go to the next-strongest single tokens.

Why the cap, measured (5-fold CV on the training splits; ``configs/default.toml``
has the table): pairs with no cap make SpamAssassin worse (1-AUC 0.028% -> 0.062%)
and Enron better (0.117% -> 0.069%); with at most 4 pairs among 20 both gain
(SpamAssassin 0.021%, Enron 0.076%, and spam caught at 0.1% ham lost rises on both).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

__all__ = ["PAIR_PREFIX", "pair_columns", "strongest"]

PAIR_PREFIX = "bi:"  # the tokenizer's namespace for word pairs (tokenize.py)


def pair_columns(tokens: Sequence[str]) -> np.ndarray:
    """Which vocabulary columns hold word pairs (bool, one per token)."""
    return np.fromiter((t.startswith(PAIR_PREFIX) for t in tokens), dtype=bool,
                       count=len(tokens))


def strongest(C: sp.csr_matrix, k: int, limited: np.ndarray | None = None,
              max_limited: int | None = None) -> np.ndarray:
    """Positions in ``C.data`` of each row's ``k`` strongest entries, row by row.

    C (csr_matrix): per-token contributions (log-likelihood ratios), rows = documents,
        indices sorted.
    k (int): entries kept per row; 0 keeps all (and then caps nothing: every token is
        plain naive Bayes, the model a PMML export describes).
    limited (ndarray of bool | None): columns of which a row keeps at most ``max_limited``.
    RETURNS (ndarray of int): positions, grouped by row, strongest (largest |value|) first
        within a row, ties in column order.
    """
    rows = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
    strength = -np.abs(C.data)
    eligible = np.arange(C.data.size)
    if k and limited is not None and max_limited is not None and max_limited < k:
        if limited.size < C.shape[1]:  # columns the vocabulary gained after the mask was made
            limited = np.concatenate([limited, np.zeros(C.shape[1] - limited.size, bool)])
        # Rank the limited entries among themselves, per row, strongest first.
        lim = np.flatnonzero(limited[C.indices])
        order = lim[np.lexsort((strength[lim], rows[lim]))]
        first = np.searchsorted(rows[order], rows[order], side="left")
        over = order[np.arange(order.size) - first >= max_limited]
        keep = np.ones(C.data.size, bool)
        keep[over] = False
        eligible = np.flatnonzero(keep)
    order = eligible[np.lexsort((strength[eligible], rows[eligible]))]
    if not k:
        return order
    first = np.searchsorted(rows[order], rows[order], side="left")
    return order[np.arange(order.size) - first < k]

