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

Each side (``model.evidence = "each-side"``): half the ``k`` places (and half the
pair cap) go to the strongest *spam* clues, half to the strongest *ham* clues, and
neither side can take the other's. With one ranking over both (``"strongest"``) a
ham that talks about a spammy subject -- a forwarded health scare full of
"medications", "tablets" and "fda" -- fills all ``k`` places with spam clues and
its plain ham evidence ("original message", colleagues' names) never counts; it
then outscores most spam. SpamBayes' chi-square combining keeps the two tails apart
for the same reason. ``configs/default.toml`` has the cross-validation table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # annotations only
    import scipy.sparse as sp

from . import combining, speedups
from .token_store import TokenStore

__all__ = ["PAIR_PREFIX", "RankedEvidence", "pair_columns", "selection_text", "split_places",
           "strongest"]

PAIR_PREFIX = "bi:"  # the tokenizer's namespace for word pairs (tokenize.py)


def pair_columns(tokens: Sequence[str]) -> np.ndarray:
    """Which vocabulary columns hold word pairs (bool, one per token)."""
    if isinstance(tokens, TokenStore):  # tested on its bytes, nothing decoded
        return tokens.startswith(PAIR_PREFIX)
    return np.fromiter((t.startswith(PAIR_PREFIX) for t in tokens), dtype=bool,
                       count=len(tokens))


def split_places(k: int, max_limited: int | None) -> tuple[tuple[int, int | None],
                                                             tuple[int, int | None]]:
    """(spam side's places and cap, ham side's places and cap) in each-side mode: the
    halves, the spam side taking an odd one."""
    spam_cap = None if max_limited is None else max_limited - max_limited // 2
    ham_cap = None if max_limited is None else max_limited // 2
    return (k - k // 2, spam_cap), (k // 2, ham_cap)


def selection_text(k: int, max_pairs: int, mode: str, pairs: bool = True) -> str:
    """The selection in words, for `info` and the PMML export's notes."""
    if not k:
        return "every token (plain naive Bayes)"
    if mode == "each-side":
        (k_spam, cap_spam), (k_ham, cap_ham) = split_places(k, max_pairs)
        text = f"the {k_spam} strongest spam clues and the {k_ham} strongest ham clues"
        if pairs and max_pairs < k:
            text += f", at most {cap_spam} + {cap_ham} of them word pairs"
        return text
    text = f"the {k} strongest clues"
    if pairs and max_pairs < k:
        text += f", at most {max_pairs} of them word pairs"
    return text


def strongest(C: sp.csr_matrix, k: int, limited: np.ndarray | None = None,
              max_limited: int | None = None, each_side: bool = False,
              min_strength: float = 0.0) -> np.ndarray:
    """Positions in ``C.data`` of each row's ``k`` strongest entries, row by row.

    C (csr_matrix): per-token contributions (log-likelihood ratios), rows = documents,
        indices sorted.
    k (int): entries kept per row; 0 keeps all (and then caps nothing: every token is
        plain naive Bayes, the model a PMML export describes).
    limited (ndarray of bool | None): columns of which a row keeps at most ``max_limited``.
    each_side (bool): split ``k`` and ``max_limited`` between the positive (spam) and
        the negative (ham) entries, each side ranked on its own (:func:`split_places`).
    min_strength (float): entries with |value| <= this are not clues (0: all count).
    RETURNS (ndarray of int): positions, grouped by row, strongest (largest |value|) first
        within a row, ties in column order.
    """
    return speedups.strongest_positions(C, k, limited, max_limited, each_side, min_strength)


def _strongest_first(key: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``np.lexsort((key, rows))``: the entries by row, then by ``key``; ties stay in
    their order (column order: C's indices are sorted).

    Up to 65,536 rows, two stable sorts give the same order faster: ``key``, then the
    rows as 16-bit integers, which NumPy radix-sorts in linear time. 6,000 Enron
    messages in batches of 128: 0.147 -> 0.112 s (docs/benchmarks.md, stop 27)."""
    if rows.size and rows[-1] < 1 << 16:
        by_key = np.argsort(key, kind="stable")
        return by_key[np.argsort(rows.astype(np.uint16)[by_key], kind="stable")]
    return np.lexsort((key, rows))


class RankedEvidence:
    """A contribution matrix sorted once, strongest first within each row, so that the
    selection for any ``k`` and cap is a linear pass, not another sort.

    ``tune --search`` scores every (k, cap) of its grid from one model per fold
    through this (the sort is most of a selection's cost).
    """

    def __init__(self, C: sp.csr_matrix, limited: np.ndarray | None = None):
        self.n_rows = C.shape[0]
        rows = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
        self.order = _strongest_first(-np.abs(C.data), rows)
        self.rows = rows[self.order]
        self.values = C.data[self.order]
        self._row_start = C.indptr[self.rows]  # sorted position of each entry's row's first
        self._limited = None
        if limited is not None:
            if limited.size < C.shape[1]:  # columns the vocabulary gained after the mask
                limited = np.concatenate([limited, np.zeros(C.shape[1] - limited.size, bool)])
            self._limited = limited[C.indices][self.order]
            self._limited_rank = self._rank_within_row(self._limited)

    def _rank_within_row(self, mask: np.ndarray) -> np.ndarray:
        """For each sorted entry, how many entries of ``mask`` come before it in its row."""
        before = np.cumsum(mask) - mask
        return before - before[self._row_start]

    def kept(self, k: int, max_limited: int | None = None, each_side: bool = False,
             min_strength: float = 0.0) -> np.ndarray:
        """Bool over the sorted entries: each row's k strongest, at most ``max_limited``
        of them limited (the cap applies only when 0 < max_limited < k); with
        ``each_side``, the same for the positive and the negative entries apart, with
        the places and the cap split by :func:`split_places`. Entries no stronger than
        ``min_strength`` (|value| <= it) are not clues at all (as bogofilter's min_dev and
        SpamBayes' minimum_prob_strength); 0 keeps every non-zero entry."""
        if not k:
            keep = np.ones(self.values.size, bool)
        elif not each_side:
            keep = self._kept_among(np.ones(self.values.size, bool), k, max_limited)
        else:
            (k_spam, cap_spam), (k_ham, cap_ham) = split_places(k, max_limited)
            keep = (self._kept_among(self.values > 0, k_spam, cap_spam)
                    | self._kept_among(self.values < 0, k_ham, cap_ham))
        if min_strength > 0:
            keep &= np.abs(self.values) > min_strength
        return keep

    def _kept_among(self, candidates: np.ndarray, k: int, max_limited: int | None
                    ) -> np.ndarray:
        eligible = candidates.copy()
        if self._limited is not None and max_limited is not None and max_limited < k:
            limited = self._limited & candidates
            rank = self._limited_rank if candidates.all() else self._rank_within_row(limited)
            eligible &= ~(limited & (rank >= max_limited))
        return eligible & (self._rank_within_row(eligible) < k)

    def positions(self, k: int, max_limited: int | None = None, each_side: bool = False,
                  min_strength: float = 0.0) -> np.ndarray:
        """:func:`strongest`'s answer: positions in C.data, by row, strongest first."""
        return self.order[self.kept(k, max_limited, each_side, min_strength)]

    def sums(self, k: int, max_limited: int | None = None, each_side: bool = False,
             min_strength: float = 0.0, combine: str = "sum") -> np.ndarray:
        """Per row, the kept contributions combined (:func:`textnb.combining.combine`:
        their sum, or chi-square combining)."""
        keep = self.kept(k, max_limited, each_side, min_strength)
        return combining.combine(self.values[keep], self.rows[keep], self.n_rows, combine)
