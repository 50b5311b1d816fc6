"""Dependent evidence: which of a message's clues are one piece of evidence counted twice.

Naive Bayes adds every token's log-likelihood ratio as if each were an independent
observation. Two kinds of token are not, and both can be told from the token string:

- **One header field's tokens.** A field is tokenised into its presence token
  (``header:mailing-list``) and its words under the field's name
  (``mailing-list:contact``, ``mailing-list:ezmlm``, ...): ezmlm's one ``Mailing-List:``
  line makes seven ham clues of about the same strength, one fact (the list) counted
  seven times. With ``model.clues_per_header_field = m``, at most the ``m`` strongest
  tokens of one field (every instance of it: all ``Received:`` lines are one field) count
  on each side; the rest are no clues. Header fields are those
  :func:`textnb.text.namespaces.is_header_token` names (not Subject, whose words are
  text the sender writes).
- **A word pair and its own words.** ``bi:take alook`` is made of ``take`` and ``alook``;
  counting all three counts one phrase three times. With ``model.tile_word_pairs``,
  SpamBayes' tiling: the clues are taken strongest first, and a clue is dropped when it
  shares a word with a stronger clue already taken (a pair covers its two words, a word
  itself), so a pair and its own words, or two pairs sharing a word, never both count.
  A message is a bag of tokens here, so a word that occurs twice is covered by a pair
  made of either occurrence.

Both only remove clues before the selection (``evidence.strongest``) ranks the rest: the
score is still the prior plus the sum of the selected clues' log-likelihood ratios, and
``textnb explain`` lists exactly those. Why these settings and their values:
docs/dependent-evidence.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..features.csr_arrays import Rows
from ..text.namespaces import OWN_NAMESPACES, PAIR_PREFIX, is_header_token

__all__ = ["Dependence", "field_ids", "field_of", "independent_entries", "make_dependence",
           "pair_word_columns", "restricted"]

NO_FIELD = -1


@lru_cache(maxsize=4096)
def _field_id(field: str) -> int:
    """A stable non-negative id of a header field name (56 bits of its BLAKE2b hash: the
    same id in every process and for every vocabulary, so no table needs keeping)."""
    return int.from_bytes(hashlib.blake2b(field.encode("utf-8", "surrogatepass"),
                                          digest_size=7).digest(), "big")


def field_of(token: str) -> str | None:
    """The header field a token comes from (``received`` for ``received:ip:192.0.2``
    and for ``header:received``), None for a token not from a header field."""
    if not is_header_token(token):
        return None
    name, _, rest = token.partition(":")
    if name != "header":
        return name
    # the presence token: a field named like textnb's own namespaces writes its words
    # under header-<name> (textnb/text/tokenize.py)
    return f"header-{rest}" if rest in OWN_NAMESPACES else rest


def field_ids(tokens: Sequence[str]) -> np.ndarray:
    """The header field of each token as an id (int64, one per token; ``NO_FIELD`` for
    tokens not from a header field)."""
    ids = np.full(len(tokens), NO_FIELD, dtype=np.int64)
    for i, token in enumerate(tokens):
        field = field_of(token)
        if field is not None:
            ids[i] = _field_id(field)
    return ids


def pair_word_columns(tokens: Sequence[str],
                      columns: Callable[[list[str]], np.ndarray]) -> np.ndarray:
    """For each token, the columns of its two words if it is a word pair (``bi:a b``),
    else -1 and -1 (int64, shape (n_tokens, 2)); a word the vocabulary lacks is -1.

    columns: the vocabulary's look-up, a list of tokens -> their columns (-1 unknown).
    """
    out = np.full((len(tokens), 2), -1, dtype=np.int64)
    where = [i for i, t in enumerate(tokens) if t.startswith(PAIR_PREFIX)]
    if not where:
        return out
    words: list[str] = []
    for i in where:
        left, _, right = tokens[i][len(PAIR_PREFIX):].partition(" ")
        words += [left, right]
    out[where] = np.asarray(columns(words), dtype=np.int64).reshape(-1, 2)
    return out


@dataclass(frozen=True)
class Dependence:
    """What makes two clues of a message one piece of evidence, per vocabulary column.

    field (ndarray of int64 | None): :func:`field_ids` of the columns; None: no grouping.
    per_field (int): of one field's clues, at most this many count on each side (0: all).
    pair_words (ndarray of int64, shape (n, 2) | None): :func:`pair_word_columns`; None:
        pairs and their words both count.
    Columns the vocabulary gained after the arrays were made belong to no field and are
    no pairs.
    """

    field: np.ndarray | None = None
    per_field: int = 0
    pair_words: np.ndarray | None = None

    @property
    def n_columns(self) -> int:
        """How many columns the arrays describe."""
        arrays = [a for a in (self.field, self.pair_words) if a is not None]
        return arrays[0].shape[0] if arrays else 0

    @staticmethod
    def unclassified(n_columns: int, like: "Dependence") -> "Dependence":
        """``n_columns`` columns of no field and no pair, with ``like``'s settings."""
        return Dependence(None if like.field is None else np.full(n_columns, NO_FIELD, np.int64),
                          like.per_field,
                          None if like.pair_words is None else np.full((n_columns, 2), -1, np.int64))

    def extended(self, more: "Dependence") -> "Dependence":
        """This dependence with ``more``'s columns after its own (the same settings)."""
        join = lambda a, b: None if a is None else np.concatenate([a, b])  # noqa: E731
        return Dependence(join(self.field, more.field), self.per_field,
                          join(self.pair_words, more.pair_words))

    def first(self, n_columns: int) -> "Dependence":
        """This dependence of its first ``n_columns`` columns (views, no copies)."""
        if self.n_columns == n_columns:
            return self
        cut = lambda a: None if a is None else a[:n_columns]  # noqa: E731
        return Dependence(cut(self.field), self.per_field, cut(self.pair_words))

    @property
    def active(self) -> bool:
        return (self.field is not None and self.per_field > 0) or self.pair_words is not None


def independent_entries(C, dependence: Dependence) -> np.ndarray:
    """Bool over ``C.data``: the entries left as clues once dependent ones are dropped.

    C (csr_matrix | Rows): per-token contributions, rows = documents, indices sorted.
    RETURNS (ndarray of bool): True where the entry may still be selected.
    """
    keep = np.ones(C.data.size, bool)
    if not C.data.size:
        return keep
    rows = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
    if dependence.field is not None and dependence.per_field > 0:
        keep &= _per_field(C, rows, _widened(dependence.field, C.shape[1], NO_FIELD),
                           dependence.per_field)
    if dependence.pair_words is not None:
        keep &= _tiled(C, rows, _widened(dependence.pair_words, C.shape[1], -1))
    return keep


def _widened(values: np.ndarray, n_columns: int, fill: int) -> np.ndarray:
    """A per-column array as long as the matrix is wide (later columns: ``fill``)."""
    if values.shape[0] >= n_columns:
        return values
    extra = np.full((n_columns - values.shape[0],) + values.shape[1:], fill, values.dtype)
    return np.concatenate([values, extra])


def _per_field(C, rows: np.ndarray, field: np.ndarray, per_field: int) -> np.ndarray:
    """Each (row, field, side)'s ``per_field`` strongest entries, ties in column order."""
    keep = np.ones(C.data.size, bool)
    fields = field[C.indices]
    grouped = np.flatnonzero(fields != NO_FIELD)
    if not grouped.size:
        return keep
    value = C.data[grouped]
    spam = value > 0
    order = np.lexsort((C.indices[grouped], -np.abs(value), spam, fields[grouped], rows[grouped]))
    g_row, g_field, g_spam = rows[grouped][order], fields[grouped][order], spam[order]
    start = np.r_[True, (g_row[1:] != g_row[:-1]) | (g_field[1:] != g_field[:-1])
                  | (g_spam[1:] != g_spam[:-1])]
    first = np.maximum.accumulate(np.where(start, np.arange(order.size), 0))
    rank = np.arange(order.size) - first
    keep[grouped[order[rank >= per_field]]] = False
    return keep


def _tiled(C, rows: np.ndarray, pair_words: np.ndarray) -> np.ndarray:
    """SpamBayes' tiling over each row's entries: strongest first (ties: ham clue first,
    then column order),
    an entry is dropped when a word it covers is covered by a stronger entry kept.

    A pair covers its two words' columns, any other entry its own column. Each round
    keeps every undecided entry that is the strongest undecided one on all its words,
    then drops the undecided entries that share a word with one kept: the greedy
    choice, a round per link of the longest chain of overlaps (a few)."""
    n = C.data.size
    words = pair_words[C.indices]                         # (n, 2)
    is_pair = (words >= 0).any(axis=1)
    width = max(C.shape[1], 1)
    entry = np.r_[np.flatnonzero(~is_pair), np.flatnonzero(is_pair), np.flatnonzero(is_pair)]
    word = np.r_[C.indices[~is_pair], words[is_pair, 0], words[is_pair, 1]]
    real = word >= 0
    entry, word = entry[real], word[real]
    slot_key = rows[entry].astype(np.int64) * width + word
    slots, slot = np.unique(slot_key, return_inverse=True)
    shared = np.bincount(slot, minlength=slots.size) > 1
    involved = shared[slot]
    entry, slot = entry[involved], slot[involved]
    keep = np.ones(n, bool)
    if not entry.size:
        return keep
    # Strength rank within the row (0 = strongest; of entries as strong, the ham clue
    # first), the order the selection uses (evidence.strongest).
    order = np.lexsort((C.indices, C.data > 0, -np.abs(C.data), rows))
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    state = np.zeros(n, np.int8)                          # 0 undecided, 1 kept, -1 dropped
    while True:
        live = state[entry] == 0
        if not live.any():
            break
        best = np.full(slots.size, n, np.int64)
        np.minimum.at(best, slot[live], rank[entry[live]])
        on_top = live & (best[slot] == rank[entry])
        n_live = np.bincount(entry[live], minlength=n)
        n_top = np.bincount(entry[on_top], minlength=n)
        won = (state == 0) & (n_live > 0) & (n_live == n_top)
        state[won] = 1
        taken = np.zeros(slots.size, bool)
        taken[slot[state[entry] == 1]] = True
        lost = np.zeros(n, bool)
        lost[entry[taken[slot] & (state[entry] == 0)]] = True
        state[lost] = -1
    keep[state == -1] = False
    return keep


def restricted(C, keep: np.ndarray) -> tuple[Rows, np.ndarray]:
    """The entries of C where ``keep`` is True as a matrix of their own, and their
    positions in C.data (to map positions in it back)."""
    where = np.flatnonzero(keep)
    rows = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
    indptr = np.zeros(C.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows[where], minlength=C.shape[0]), out=indptr[1:])
    return Rows(C.data[where], C.indices[where], indptr, C.shape), where


def make_dependence(tokens: Sequence[str], columns: Callable[[list[str]], np.ndarray],
                    clues_per_header_field: int = 0, tile_word_pairs: bool = False
                    ) -> Dependence | None:
    """The :class:`Dependence` of a vocabulary's ``tokens`` for the settings
    ``model.clues_per_header_field`` and ``model.tile_word_pairs`` (None when both are off).

    columns: the vocabulary's look-up, a list of tokens -> their columns (-1 unknown)."""
    if not clues_per_header_field and not tile_word_pairs:
        return None
    return Dependence(field_ids(tokens) if clues_per_header_field else None,
                      clues_per_header_field,
                      pair_word_columns(tokens, columns) if tile_word_pairs else None)
