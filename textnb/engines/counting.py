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

from dataclasses import dataclass

import numpy as np

from ..labels import LABELS
from ..ledger import tokens_hash
from ..pipeline import SpamFilter
from ..retrain import LedgerMismatchError
from ..vectorize import Vocabulary

__all__ = ["Counts", "merge_counts", "Work", "Counted", "count_work", "count_into"]



@dataclass
class Counts:
    """The sufficient statistics of some messages, over their own tokens.

    tokens (list[str]): distinct tokens, in order of first sight.
    class_count (ndarray): shape (2,), messages per class (ham, spam).
    feature_count (ndarray): shape (2, n_tokens), the model's per-class counts.
    doc_freq (ndarray): shape (n_tokens,), messages holding each token.
    """

    tokens: list[str]
    class_count: np.ndarray
    feature_count: np.ndarray
    doc_freq: np.ndarray

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
                                   self.doc_freq, weight)


def merge_counts(*parts: Counts) -> Counts:
    """The counts of consecutive runs of messages, given in order, as one.

    Columns: the first part's tokens, then each next part's unseen tokens in their
    order, which is the order of first sight over the concatenated runs.
    """
    vocabulary = Vocabulary()
    columns = [vocabulary.add(p.tokens) for p in parts]
    n = len(vocabulary)
    class_count, feature_count, doc_freq = np.zeros(2), np.zeros((2, n)), np.zeros(n)
    for p, cols in zip(parts, columns):
        class_count += p.class_count
        feature_count[:, cols] += p.feature_count
        doc_freq[cols] += p.doc_freq
    return Counts(vocabulary.tokens_, class_count, feature_count, doc_freq)


@dataclass
class Work:
    """Messages to count, already normalised (``textnb.ledger.normalise``).

    norms (list[bytes]): the messages, in the order their tokens get columns.
    labels (list[int]): the label code each is learned under.
    old (list[int]): for a moved message, the label code it leaves (its counts are
        removed from it); -1 for a new one.
    old_hash (list[int | None]): for a moved message, the ledger's tokens hash, which its
        tokens must still have; None: not checked (learned earlier in this very run).
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
    hashes: np.ndarray  # uint64, (n_messages,)


def count_work(tokenizing: SpamFilter, work: Work) -> Counted:
    """Parse, tokenise and count ``work`` with ``tokenizing``'s tokenizer and settings.

    The ledger's tokens hash is taken here too, beside the tokens, so that no token
    list ever leaves the worker.
    """
    plus, minus = SpamFilter(tokenizing.config), SpamFilter(tokenizing.config)
    hashes = count_into(tokenizing, work, plus, minus)
    return Counted(Counts.of(plus), Counts.of(minus), hashes)


def count_into(tokenizing: SpamFilter, work: Work, plus: SpamFilter, minus: SpamFilter | None
               ) -> np.ndarray:
    """Count ``work`` into ``plus`` (every message under its label) and the moved
    messages under their old labels into ``minus`` (None: out of ``plus``, weight -1).
    RETURNS (ndarray of uint64): each message's tokens hash.

    One process counts straight into its model (``minus=None``); a worker counts into
    empty filters whose ``Counts`` it sends back (``count_work``). The counts are
    the same integers either way (tests/test_engines.py).
    """
    token_lists = [tokenizing.tokens(norm) for norm in work.norms]
    hashes = np.fromiter(map(tokens_hash, token_lists), dtype=np.uint64, count=len(token_lists))
    removes, old_labels = [], []
    for i, old in enumerate(work.old):
        if old < 0:
            continue
        expected = work.old_hash[i]
        if expected is not None and int(hashes[i]) != expected:
            raise LedgerMismatchError(
                f"message {work.sources[i]!r} tokenises differently now than when it was "
                "learned (a textnb upgrade changed the tokenizer?), so its counts cannot be "
                "removed exactly; train the model again from your mail with 'textnb train'")
        removes.append(token_lists[i])
        old_labels.append(LABELS[old])
    if token_lists:  # additions first: counts never dip below 0
        plus.learn_tokens(token_lists, [LABELS[code] for code in work.labels])
    if removes:
        if minus is None:
            plus.learn_tokens(removes, old_labels, weight=-1.0)
        else:
            minus.learn_tokens(removes, old_labels)
    return hashes

