"""What a worker sends back: the sufficient statistics of a run of messages.

Both engines count the same way. A worker parses, tokenises and counts the
messages it is given into ``Counts`` (distinct tokens in order of first sight,
per-class token counts, document frequencies, class counts) and returns those,
never token lists. The calling process adds them to the model in input order, so
the vocabulary gets its columns in the order one process would give them.

Identity. Counts are integer-valued floats, exact below 2**53 in any order and
grouping, so the model does not depend on how the messages were cut into runs or
how many processes counted them (tests/test_speed_invariance.py, test_distributed.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._c.speedups import count_messages
from ..features.token_store import TokenStore
from ..features.vectorize import Vocabulary
from ..modelfile.lifecycle import LedgerMismatchError
from ..models.ledger import counted_runs_hashes, matches
from ..spamfilter import SpamFilter

__all__ = ["Counts", "merge_counts", "count_tokens", "Work", "Counted", "count_work",
           "count_into"]


@dataclass
class Counts:
    """The sufficient statistics of some messages, over their own tokens.

    tokens (list[str] | TokenStore): distinct tokens, in order of first sight
        (``count_tokens`` packs them: ``Vocabulary.add`` compares and copies them as
        bytes).
    class_count (ndarray): shape (2,), messages per class (ham, spam).
    feature_count (ndarray): shape (2, n_tokens), the model's per-class counts.
    doc_freq (ndarray): shape (n_tokens,), messages holding each token.
    token_hashes (ndarray | None): int64 (n_tokens,), ``TokenStore.hashes`` of the
        tokens when the counter took them (``count_tokens`` does, for the tokens
        hashes): the model's vocabulary looks the tokens up by them without hashing
        them again (docs/design/counting-and-scoring.md#adding-a-batch-to-the-model).
    """

    tokens: list[str] | TokenStore
    class_count: np.ndarray
    feature_count: np.ndarray
    doc_freq: np.ndarray
    token_hashes: np.ndarray | None = None

    @classmethod
    def of(cls, spam_filter: SpamFilter) -> Counts:
        if not hasattr(spam_filter.model, "class_count_"):  # learned nothing
            return cls([], np.zeros(2), np.zeros((2, 0)), np.zeros(0))
        counts = spam_filter.counts()
        n = len(counts["tokens"])
        return cls(list(counts["tokens"]), counts["class_count"].copy(),
                   counts["feature_count"][:, :n].copy(), counts["doc_freq"][:n].copy())

    def add_to(self, spam_filter: SpamFilter, weight: float = 1.0) -> None:
        if self.class_count.any():
            spam_filter.add_counts(self.tokens, self.class_count, self.feature_count,
                                   self.doc_freq, weight, token_hashes=self.token_hashes)


def merge_counts(*parts: Counts) -> Counts:
    """The counts of consecutive runs of messages, given in order, as one.

    Columns: the first part's tokens, then each next part's unseen tokens in their
    order, which is the order of first sight over the concatenated runs.
    """
    vocabulary = Vocabulary()
    columns = [vocabulary.add(p.tokens, p.token_hashes) for p in parts]
    n = len(vocabulary)
    class_count, feature_count, doc_freq = np.zeros(2), np.zeros((2, n)), np.zeros(n)
    for p, cols in zip(parts, columns):
        class_count += p.class_count
        feature_count[:, cols] += p.feature_count
        doc_freq[cols] += p.doc_freq
    return Counts(vocabulary.tokens_, class_count, feature_count, doc_freq)


@dataclass
class Work:
    """Messages to count, already normalised (``textnb.models.ledger.normalise``).

    norms (list[bytes]): the messages, in the order their tokens get columns.
    labels (list[int]): the label code each is learned under.
    old (list[int]): for a moved message, the label code it leaves (its counts are
        removed from it); -1 for a new one.
    old_hash (list[int | None]): for a moved message, the ledger's tokens hash, which its
        tokens must still have (by the definition that made it, ``ledger.matches``);
        None: not checked (learned earlier in this very run).
    sources (list[str]): where each came from, for error messages.
    """

    norms: list[bytes]
    labels: list[int]
    old: list[int]
    old_hash: list[int | None]
    sources: list[str]

    def __len__(self) -> int:
        return len(self.norms)


@dataclass
class Counted:
    """A worker's answer: counts to add (every message under its label), counts to
    remove (moved messages under their old label), each message's tokens hash."""

    plus: Counts
    minus: Counts
    hashes: list[int]  # one per message (``ledger.tokens_hash``)


def count_tokens(token_lists: Sequence[list[str]], label_codes: Sequence[int],
                 presence: bool = False, hashes: bool = True) -> tuple[Counts, list[int]]:
    """The counts of token lists learned under ``label_codes`` (0 ham, 1 spam), and the
    ledger's tokens hash of each list (``textnb.models.ledger.tokens_hash``; empty if not
    ``hashes``).

    presence (bool): count a token once per message (binary features, or the
    Bernoulli model, which counts documents); else its occurrences.

    No vocabulary, no matrix, no string sorted. One pass over the tokens gives each
    its column among the batch's distinct tokens and each message's distinct tokens
    with their term frequencies (``speedups.count_messages``); the tokens hashes are
    sums over the distinct tokens' hashes (``ledger.counted_runs_hashes``). Sorting the
    strings, which the first tokens hash needed, cost about twice as much
    (docs/design/counting-and-scoring.md#counting-a-batch).
    """
    lengths = np.fromiter(map(len, token_lists), dtype=np.int64, count=len(token_lists))
    # The columns, in order of first sight; per message, its distinct tokens' columns
    # and term frequencies.
    tokens, distinct, column, tf = count_messages(token_lists)
    n = len(tokens)
    if hashes:
        # Packed as UTF-8 once, for the hashes and for the answer: the calling process
        # adds them to the vocabulary as bytes (``Vocabulary.add``), and a store
        # crosses the process boundary as two buffers, not a str a token.
        tokens = TokenStore(tokens)
        hashed = tokens.hashes().view(np.uint64)
        message_hashes = counted_runs_hashes(hashed, column, tf, distinct, lengths)
    else:
        hashed, message_hashes = None, []
    row = np.repeat(np.arange(len(token_lists), dtype=np.int64), distinct)
    codes = np.asarray(label_codes, dtype=np.int64)
    weights = np.ones(column.size) if presence else tf.astype(np.float64)
    feature_count = np.bincount(codes[row] * n + column, weights=weights,
                                minlength=2 * n).reshape(2, n)
    doc_freq = np.bincount(column, minlength=n).astype(np.float64)
    class_count = np.bincount(codes, minlength=2).astype(np.float64)
    return (Counts(tokens, class_count, feature_count, doc_freq,
                   None if hashed is None else hashed.view(np.int64)), message_hashes)


def count_work(tokenizing: SpamFilter, work: Work) -> Counted:
    """Parse, tokenise and count ``work`` with ``tokenizing``'s tokenizer and settings:
    every message under its label (``plus``), and the moved ones under the label they
    leave (``minus``).

    The ledger's tokens hash is taken here too, beside the tokens, so that no token
    list ever leaves the worker. A moved message whose tokens hash is not the one its
    ledger entry holds stops the work (LedgerMismatchError): its counts could not be
    removed exactly.
    """
    token_lists = tokenizing.tokens_many(work.norms)
    presence = tokenizing.counts_presence
    plus, hashes = count_tokens(token_lists, work.labels, presence)
    removes, old_codes = [], []
    for i, old in enumerate(work.old):
        if old < 0:
            continue
        expected = work.old_hash[i]
        if expected is not None and not matches(expected, token_lists[i], hashes[i]):
            raise LedgerMismatchError.of(work.sources[i])
        removes.append(token_lists[i])
        old_codes.append(old)
    minus = count_tokens(removes, old_codes, presence, hashes=False)[0]
    return Counted(plus, minus, hashes)


def count_into(tokenizing: SpamFilter, work: Work, model: SpamFilter) -> list[int]:
    """``count_work`` in this process, added to ``model`` (additions first: counts never
    dip below 0). RETURNS (list[int]): each message's tokens hash."""
    counted = count_work(tokenizing, work)
    counted.plus.add_to(model)
    counted.minus.add_to(model, weight=-1.0)
    return counted.hashes
