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

Places for the route (``model.header_places``): of each side's places, a few are kept
for its strongest clues from header fields other than Subject (who sent the message and
by which route: ``textnb.text.namespaces.is_header_token``), as far as it has them; the rest
go to its strongest remaining clues of any kind, header clues included. With one ranking
a long advertisement's words fill every spam place and a mailing list's own header
fields, the evidence of how it came, may not get one on either side
(docs/conflicting-evidence.md).

The route and the text apart (``model.header_discriminators``, the default): header fields
and the text are two sources of evidence, and each gets its own places. Each side takes
its ``header_discriminators`` strongest clues from header fields other than Subject and,
apart from them, its ``k / 2`` strongest clues from the text (body and Subject), so
neither source can crowd out the other: a long advertisement's words leave the route
its places, and a list's many header lines leave the advertisement its own. On a real
mailbox this ranks far better than one budget shared (docs/route-and-text.md). With it,
``header_places`` has nothing to reserve and is ignored.

Dependent clues (``model.clues_per_header_field``, ``model.tile_word_pairs``): before any
of this, a clue that repeats a stronger one's evidence -- a header field's third token
on a side, a word beside its own word pair -- is dropped (textnb/models/dependence.py,
docs/dependent-evidence.md), and the places above are filled from the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # annotations only
    import scipy.sparse as sp

from .._c import speedups
from ..features.csr_arrays import Rows
from ..features.token_store import TokenStore
from ..text.namespaces import CONTENT_NAMESPACES, PAIR_PREFIX, is_header_token
from . import combining
from .dependence import Dependence, independent_entries, restricted

__all__ = ["PAIR_PREFIX", "RankedEvidence", "header_columns", "pair_columns", "selection_text",
           "split_places", "strongest", "strongest_positions"]


def pair_columns(tokens: Sequence[str]) -> np.ndarray:
    """Which vocabulary columns hold word pairs (bool, one per token)."""
    if isinstance(tokens, TokenStore):  # tested on its bytes, nothing decoded
        return tokens.startswith(PAIR_PREFIX)
    return np.fromiter((t.startswith(PAIR_PREFIX) for t in tokens), dtype=bool,
                       count=len(tokens))


def header_columns(tokens: Sequence[str], start: int = 0) -> np.ndarray:
    """Which vocabulary columns hold clues from header fields other than Subject (bool, one
    per token from ``start`` on): the sender and the route
    (:func:`textnb.text.namespaces.is_header_token`). A TokenStore is read on its bytes,
    nothing decoded but the few tokens that begin "header:subject": a loaded model's
    millions of tokens are classified in a few passes over the buffer."""
    n = max(len(tokens) - start, 0)
    if isinstance(tokens, TokenStore):
        if n > _FEW_TOKENS:
            return _header_columns_of_store(tokens, start)
        tokens = tokens.take(np.arange(start, start + n))  # a learned message's new ones
        start = 0
    return np.fromiter(map(is_header_token, tokens[start:]), dtype=bool, count=n)


# Up to this many tokens are decoded and read one by one: the buffer pass costs about
# 130 us of NumPy calls whatever the count, one by one about 0.65 us a token (the last
# 16 / 128 / 256 / 1,024 tokens of a 459,305-token vocabulary: 127 against 20, 147
# against 86, 164 against 164, 291 against 750 us). A thick pass marks each learned
# message's new tokens, tens of them (docs/performance.md#training-thick).
_FEW_TOKENS = 128


# The longest content namespace decides how much of each token's namespace is compared.
_NAMESPACE_WIDTH = max(map(len, CONTENT_NAMESPACES))
_CONTENT = np.array(sorted(CONTENT_NAMESPACES), dtype=f"S{_NAMESPACE_WIDTH}")


def _header_columns_of_store(tokens: TokenStore, start: int) -> np.ndarray:
    """``is_header_token`` of each token from ``start`` on, on the store's bytes: a
    namespace of graphic ASCII that is no content namespace, but not "header:subject"."""
    lengths, heads, graphic = tokens.before_first(":", _NAMESPACE_WIDTH, start)
    content = (lengths <= _NAMESPACE_WIDTH) & np.isin(heads, _CONTENT)
    header = graphic & (lengths > 0) & ~content
    # Only "header:..." tokens can be "header:subject": the few field-presence tokens.
    maybe_subject = np.flatnonzero(header & (heads == b"header"))
    if maybe_subject.size:
        words = tokens.take(maybe_subject + start)
        header[maybe_subject] = [is_header_token(t) for t in words]
    return header


def split_places(k: int, max_limited: int | None) -> tuple[tuple[int, int | None],
                                                             tuple[int, int | None]]:
    """(spam side's places and cap, ham side's places and cap) in each-side mode: the
    halves, the spam side taking an odd one."""
    spam_cap = None if max_limited is None else max_limited - max_limited // 2
    ham_cap = None if max_limited is None else max_limited // 2
    return (k - k // 2, spam_cap), (k // 2, ham_cap)


def selection_text(k: int, max_pairs: int, mode: str, pairs: bool = True,
                   header_places: int = 0, clues_per_header_field: int = 0,
                   tile_word_pairs: bool = False, header_clues: int = 0) -> str:
    """The selection in words, for `info` and the PMML export's notes."""
    if not k:
        return "every token (plain naive Bayes)"
    text = _selection_text(k, max_pairs, mode, pairs, 0 if header_clues else header_places)
    if header_clues and mode == "each-side":
        text = (f"from the text (body and Subject) {text}; apart from them, each side's "
                f"{header_clues} strongest clues from the other header fields")
    if clues_per_header_field:
        text += (f"; of one header field's tokens at most {clues_per_header_field} "
                 f"{'clue' if clues_per_header_field == 1 else 'clues'} a side")
    if tile_word_pairs and pairs:
        text += "; a word pair and its own words never both count (tiling)"
    return text


def _selection_text(k: int, max_pairs: int, mode: str, pairs: bool, header_places: int) -> str:
    if mode == "each-side":
        (k_spam, cap_spam), (k_ham, cap_ham) = split_places(k, max_pairs)
        text = f"the {k_spam} strongest spam clues and the {k_ham} strongest ham clues"
        if pairs and max_pairs < k:
            text += f", at most {cap_spam} + {cap_ham} of them word pairs"
        if header_places:
            text += (f"; each side keeps {header_places} of its places for its strongest "
                     "clues from header fields other than Subject, as far as it has them")
        return text
    text = f"the {k} strongest clues"
    if pairs and max_pairs < k:
        text += f", at most {max_pairs} of them word pairs"
    return text


def strongest(C: sp.csr_matrix, k: int, limited: np.ndarray | None = None,
              max_limited: int | None = None, each_side: bool = False,
              min_strength: float = 0.0, *, header: np.ndarray | None = None,
              header_places: int = 0, header_clues: int = 0,
              dependence: Dependence | None = None) -> np.ndarray:
    """Positions in ``C.data`` of each row's ``k`` strongest entries, row by row.

    C (csr_matrix): per-token contributions (log-likelihood ratios), rows = documents,
        indices sorted.
    k (int): entries kept per row; 0 keeps all (and then caps nothing: every token is
        plain naive Bayes, the model a PMML export describes).
    limited (ndarray of bool | None): columns of which a row keeps at most ``max_limited``.
    each_side (bool): split ``k`` and ``max_limited`` between the positive (spam) and
        the negative (ham) entries, each side ranked on its own (:func:`split_places`).
    min_strength (float): entries with |value| <= this are not clues (0: all count).
    header (ndarray of bool | None): columns from header fields (:func:`header_columns`).
    header_places (int): with ``each_side``, this many (at most ``k // 2``) of each side's
        places are kept for the side's strongest ``header`` entries, as far as it has them;
        the rest go to its strongest remaining entries of any kind (module docstring).
    header_clues (int): with ``each_side``, places a side for ``header`` entries *apart from*
        the ``k``, which then go to the other entries only (the route and the text apart,
        module docstring); ``header_places`` is then ignored.
    dependence (Dependence | None): with ``k``, entries that repeat a stronger entry's
        evidence are dropped first (:mod:`textnb.models.dependence`: one header field's
        tokens, a word pair and its own words); the rest are selected as above.
    RETURNS (ndarray of int): positions, grouped by row, strongest (largest |value|) first
        within a row; of entries as strong, the ham clue (value < 0) first, then column
        order. So the score does not depend on the vocabulary's column order (two models
        with the same counts in another order, as a shared store's hosts build, score
        alike): entries as strong on one side add the same whichever is kept.
    """
    if k and dependence is not None and dependence.active:
        keep = independent_entries(C, dependence)
        if not keep.all():
            sub, where = restricted(C, keep)
            return where[strongest(sub, k, limited, max_limited, each_side, min_strength,
                                   header=header, header_places=header_places,
                                   header_clues=header_clues)]
    if header_clues and each_side and k and header is not None:
        return _route_and_text(C, k, limited, max_limited, min_strength, header, header_clues)
    if not (header_places and each_side and k and header is not None):
        return strongest_positions(C, k, limited, max_limited, each_side, min_strength)
    is_header = _widened(header, C.shape[1])[C.indices]
    (k_spam, _), (k_ham, _) = split_places(k, max_limited)
    places = min(header_places, k_ham)
    head = _positions_among(C, is_header, 2 * places, None, None, min_strength)
    others = np.ones(C.data.size, bool)
    others[head] = False
    body = _positions_among(C, others, k, limited, max_limited, min_strength)
    entry_row = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
    head_spam = C.data[head] > 0
    taken_spam = np.bincount(entry_row[head[head_spam]], minlength=C.shape[0])
    taken_ham = np.bincount(entry_row[head[~head_spam]], minlength=C.shape[0])
    # The other entries come each row's strongest first, a side's in the order its places
    # are filled (pair cap included), so its first k_side - taken fill the places left.
    rows, spam = entry_row[body], C.data[body] > 0
    left = np.where(spam, k_spam - taken_spam[rows], k_ham - taken_ham[rows])
    kept = np.concatenate([head, body[_rank_in_group(rows * 2 + spam) < left]])
    return kept[_strongest_order(C, kept, entry_row)]


def _route_and_text(C, k: int, limited, max_limited, min_strength: float,
                    header: np.ndarray, header_clues: int) -> np.ndarray:
    """:func:`strongest` with ``header_clues``: each side's strongest ``header_clues`` header
    entries, and apart from them its share of ``k`` among the other entries."""
    is_header = _widened(header, C.shape[1])[C.indices]
    route = _positions_among(C, is_header, 2 * header_clues, None, None, min_strength)
    text = _positions_among(C, ~is_header, k, limited, max_limited, min_strength)
    kept = np.concatenate([route, text])
    entry_row = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
    return kept[_strongest_order(C, kept, entry_row)]


def strongest_positions(C, k: int, limited: np.ndarray | None = None,
                        max_limited: int | None = None, each_side: bool = False,
                        min_strength: float = 0.0) -> np.ndarray:
    """:func:`strongest` without header places: in C where it was built
    (``speedups.strongest_positions``), else with NumPy (:class:`RankedEvidence`), the
    same positions in the same order (tests/test_speedups.py); ``k == 0`` (every entry)
    is NumPy's."""
    if k:
        sides = split_places(k, max_limited) if each_side else ((k, max_limited),)
        positions = speedups.strongest_positions(C, sides, limited, min_strength)
        if positions is not None:
            return positions
    return RankedEvidence(C, limited).positions(k, max_limited, each_side, min_strength)


def _strongest_order(C, kept: np.ndarray, entry_row: np.ndarray) -> np.ndarray:
    """The order of C's entries at ``kept``: by row, strongest first, of entries as strong
    the ham clue first, then column order (:func:`strongest`)."""
    value = C.data[kept]
    return np.lexsort((C.indices[kept], value > 0, -np.abs(value), entry_row[kept]))


def _widened(mask: np.ndarray, n_columns: int) -> np.ndarray:
    """A column mask as wide as the matrix (columns the vocabulary gained after it: False)."""
    mask = np.asarray(mask, dtype=bool)
    if mask.size < n_columns:
        mask = np.concatenate([mask, np.zeros(n_columns - mask.size, bool)])
    return mask


def _positions_among(C, entries: np.ndarray, k: int, limited, max_limited,
                     min_strength: float) -> np.ndarray:
    """:func:`strongest` (each side) over the entries of C where ``entries`` is True:
    positions in C.data."""
    where = np.flatnonzero(entries)
    entry_row = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
    indptr = np.zeros(C.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(entry_row[where], minlength=C.shape[0]), out=indptr[1:])
    sub = Rows(C.data[where], C.indices[where], indptr, C.shape)
    return where[strongest_positions(sub, k, limited, max_limited, True, min_strength)]


def _rank_in_group(key: np.ndarray) -> np.ndarray:
    """For each entry, how many entries with the same key come before it."""
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if key.size else order
    first = np.repeat(starts, np.diff(np.r_[starts, key.size]))
    rank = np.empty_like(order)
    rank[order] = np.arange(key.size) - first
    return rank


def _strongest_first(key: np.ndarray, rows: np.ndarray, later: np.ndarray) -> np.ndarray:
    """``np.lexsort((later, key, rows))``: the entries by row, then by ``key``, then the
    entries where ``later`` is False first; ties stay in their order (column order: C's
    indices are sorted).

    Up to 65,536 rows, stable sorts give the same order faster: ``later`` (bytes), ``key``,
    then the rows as 16-bit integers, which NumPy radix-sorts in linear time
    (docs/design/counting-and-scoring.md#scoring-a-batch)."""
    if rows.size and rows[-1] < 1 << 16:
        by_later = np.argsort(later.view(np.uint8), kind="stable")
        by_key = by_later[np.argsort(key[by_later], kind="stable")]
        return by_key[np.argsort(rows.astype(np.uint16)[by_key], kind="stable")]
    return np.lexsort((later, key, rows))


class RankedEvidence:
    """A contribution matrix sorted once, strongest first within each row, so that the
    selection for any ``k`` and cap is a linear pass, not another sort.

    ``tune --search`` scores every (k, cap) of its grid from one model per fold
    through this (the sort is most of a selection's cost).
    """

    def __init__(self, C: sp.csr_matrix, limited: np.ndarray | None = None,
                 header: np.ndarray | None = None):
        self.n_rows = C.shape[0]
        rows = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
        # strongest first; of entries as strong, the ham clue first (strongest's tie rule)
        self.order = _strongest_first(-np.abs(C.data), rows, C.data > 0)
        self.rows = rows[self.order]
        self.values = C.data[self.order]
        self._row_start = C.indptr[self.rows]  # sorted position of each entry's row's first
        self._limited = None
        if limited is not None:
            if limited.size < C.shape[1]:  # columns the vocabulary gained after the mask
                limited = np.concatenate([limited, np.zeros(C.shape[1] - limited.size, bool)])
            self._limited = limited[C.indices][self.order]
            self._limited_rank = self._rank_within_row(self._limited)
        self._header = None if header is None else _widened(header, C.shape[1])[C.indices][self.order]

    def _rank_within_row(self, mask: np.ndarray) -> np.ndarray:
        """For each sorted entry, how many entries of ``mask`` come before it in its row."""
        before = np.cumsum(mask) - mask
        return before - before[self._row_start]

    def kept(self, k: int, max_limited: int | None = None, each_side: bool = False,
             min_strength: float = 0.0, header_places: int = 0, header_clues: int = 0
             ) -> np.ndarray:
        """Bool over the sorted entries: each row's k strongest, at most ``max_limited``
        of them limited (the cap applies only when 0 < max_limited < k); with
        ``each_side``, the same for the positive and the negative entries apart, with
        the places and the cap split by :func:`split_places`. Entries no stronger than
        ``min_strength`` (|value| <= it) are not clues at all (as bogofilter's min_dev and
        SpamBayes' minimum_prob_strength); 0 keeps every non-zero entry. ``header_places``
        and ``header_clues`` are :func:`strongest`'s."""
        if header_clues and k and each_side and self._header is not None:
            keep = self._kept_route_and_text(k, max_limited, header_clues)
        elif not k:
            keep = np.ones(self.values.size, bool)
        elif header_places and each_side and self._header is not None:
            keep = self._kept_with_header_places(k, max_limited, header_places)
        elif not each_side:
            keep = self._kept_among(np.ones(self.values.size, bool), k, max_limited)
        else:
            (k_spam, cap_spam), (k_ham, cap_ham) = split_places(k, max_limited)
            keep = (self._kept_among(self.values > 0, k_spam, cap_spam)
                    | self._kept_among(self.values < 0, k_ham, cap_ham))
        if min_strength > 0:
            keep &= np.abs(self.values) > min_strength
        return keep

    def _kept_route_and_text(self, k: int, max_limited: int | None, header_clues: int
                             ) -> np.ndarray:
        (k_spam, cap_spam), (k_ham, cap_ham) = split_places(k, max_limited)
        spam, ham, header = self.values > 0, self.values < 0, self._header
        return (self._kept_among(spam & header, header_clues, None)
                | self._kept_among(ham & header, header_clues, None)
                | self._kept_among(spam & ~header, k_spam, cap_spam)
                | self._kept_among(ham & ~header, k_ham, cap_ham))

    def _kept_with_header_places(self, k: int, max_limited: int | None, header_places: int
                                 ) -> np.ndarray:
        (k_spam, cap_spam), (k_ham, cap_ham) = split_places(k, max_limited)
        places = min(header_places, k_ham)
        spam, ham, header = self.values > 0, self.values < 0, self._header
        head_spam = self._kept_among(spam & header, places, None)
        head_ham = self._kept_among(ham & header, places, None)
        left_spam = k_spam - np.bincount(self.rows[head_spam], minlength=self.n_rows)
        left_ham = k_ham - np.bincount(self.rows[head_ham], minlength=self.n_rows)
        return (head_spam | head_ham
                | self._kept_among(spam & ~head_spam, left_spam[self.rows], cap_spam)
                | self._kept_among(ham & ~head_ham, left_ham[self.rows], cap_ham))

    def _kept_among(self, candidates: np.ndarray, k, max_limited: int | None
                    ) -> np.ndarray:
        """Each row's ``k`` (one number, or one per entry) strongest ``candidates``, at most
        ``max_limited`` of them limited."""
        eligible = candidates.copy()
        if self._limited is not None and max_limited is not None and np.any(max_limited < k):
            limited = self._limited & candidates
            rank = self._limited_rank if candidates.all() else self._rank_within_row(limited)
            eligible &= ~(limited & (rank >= max_limited))
        return eligible & (self._rank_within_row(eligible) < k)

    def positions(self, k: int, max_limited: int | None = None, each_side: bool = False,
                  min_strength: float = 0.0, header_places: int = 0, header_clues: int = 0
                  ) -> np.ndarray:
        """:func:`strongest`'s answer: positions in C.data, by row, strongest first."""
        return self.order[self.kept(k, max_limited, each_side, min_strength, header_places,
                                    header_clues)]

    def sums(self, k: int, max_limited: int | None = None, each_side: bool = False,
             min_strength: float = 0.0, combine: str = "sum", header_places: int = 0,
             header_clues: int = 0) -> np.ndarray:
        """Per row, the kept contributions combined (:func:`textnb.models.combining.combine`:
        their sum, or chi-square combining)."""
        keep = self.kept(k, max_limited, each_side, min_strength, header_places, header_clues)
        return combining.combine(self.values[keep], self.rows[keep], self.n_rows, combine)
