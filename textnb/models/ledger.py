"""The ledger: which messages a model's counts hold, and under which label.

Each entry is keyed by the SHA-256 of the message's *normalised* bytes
(:func:`normalise`) and holds the label it was learned under and a hash of
the tokens it added (:func:`tokens_hash`). With it, ``textnb retrain`` can
tell a message it has learned before from a new one without re-reading
anything, and ``move`` or ``forget`` it exactly: the message is tokenised again
and its counts leave one class (and join the other). The tokens hash is the
guard on that exactness: if this textnb now tokenises the message differently
from the textnb that learned it (a tokenizer change between versions), the
counts it would subtract are not the ones that were added, and the update is
refused instead of silently drifting.

What normalisation removes, and why only that
---------------------------------------------
The same message reaches a mailbox in slightly different bytes: with or without
an mbox ``From `` line, with CRLF or LF line ends, with or without a trailing
blank line, and with header fields that mail clients and filters add and change
while the message sits in a folder (``Status:``, ``X-Mozilla-Status:``,
``X-Keywords:``, a filter's ``X-Spam-Status:``, our own ``X-TextNB-*``). A
client that flags a message or a filter that scores it must not turn it into a
"new" message, so those are removed.

``Received:`` and ``Return-Path:`` stay. They are evidence the tokenizer reads
(``received:ip:…``, ``return-path:domain:…``); two copies that differ in them
are two different documents to the model, and giving them one digest would make
``forget`` subtract tokens that were never added. The learned tokens are the
tokens of the normalised message (``textnb.modelfile.lifecycle`` tokenises
``normalise(raw)``), so one digest always means one token list.

With the default header selection none of the removed fields is tokenised
anyway; with ``tokenizer.header_mode = "all"`` this also keeps a previous
filter's verdict (``X-Spam-Flag: YES``) and textnb's own headers out of what is
learned, the feedback loop SpamAssassin's Bayes avoids the same way.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType

import numpy as np

from .._c.speedups import normalise_message
from .._c.token_bytes import GOLDEN_GAMMA, splitmix64
from ..features.buffers import with_room
from ..features.token_store import TokenStore
from ..labels import LABELS
from ..mail.added_headers import ADDED_FIELDS, ADDED_PREFIXES

__all__ = ["Ledger", "message_digest", "normalise", "tokens_hash", "tokens_hash_v1", "matches",
           "token_hashes", "runs_hashes", "VERSION_2", "DIGEST_SIZE"]

DIGEST_SIZE = 32  # SHA-256
_INT32_MAX = 2**31 - 1  # the column history is int32 while every serial fits (Ledger)
_LOW_64 = (1 << 64) - 1

# The same names as bytes, as ``speedups.normalise_message`` takes them.
_DROP_FIELD_NAMES = tuple(sorted(name.encode() for name in ADDED_FIELDS))
_DROP_PREFIX_NAMES = tuple(prefix.encode() for prefix in ADDED_PREFIXES)


def normalise(raw: bytes) -> bytes:
    """The bytes a message is identified and learned by.

    Drops a leading mbox ``From `` line, turns CRLF into LF, removes the header
    fields ``textnb.mail.added_headers`` names (with their continuation
    lines) and trailing line ends; every other byte is kept as it was
    (``speedups.normalise_message``).
    """
    return normalise_message(raw, _DROP_FIELD_NAMES, _DROP_PREFIX_NAMES)


def message_digest(raw: bytes) -> bytes:
    """SHA-256 (32 bytes) of :func:`normalise` (raw): the message's ledger key."""
    return hashlib.sha256(normalise(raw)).digest()


# Tokens hashes. An entry's tokens hash is an int that says which definition made it,
# so that a model keeps its entries' hashes for ever: relabelled, merged, journalled
# (``textnb.modelfile.count_patch``) or dumped (``textnb.modelfile.dump``), an entry keeps its
# value, and a check recomputes the message's hash by
# the definition its entry was made with (``matches``).
#   version 1, below 2**64 (models saved before 2026-11-24): blake2b of the sorted
#     tokens joined by NUL, which needs every message's tokens sorted as strings.
#   version 2, 2**64 + h (new entries): order-free, the sum (mod 2**64) of each token's
#     64-bit hash (``TokenStore.hashes``: of its UTF-8 bytes, vectorised), plus the
#     number of tokens, mixed. A batch's hashes are then one gather and one cumulative
#     sum over its distinct tokens' hashes, where version 1 made every batch sort its
#     strings (docs/design/counting-and-scoring.md#the-order-free-tokens-hash).
# Neither definition may ever change: tests/test_tokens_hash.py pins both on fixed tokens.
VERSION_2 = 1 << 64


def tokens_hash(tokens: Iterable[str]) -> int:
    """The hash of a token list as counted (order-free: a repeated token counts), by
    the current definition (version 2; see above)."""
    tokens = tokens if isinstance(tokens, list) else list(tokens)
    return runs_hashes(token_hashes(tokens), np.arange(len(tokens)), [len(tokens)])[0]


def tokens_hash_v1(tokens: Iterable[str]) -> int:
    """The version-1 tokens hash (models saved before 2026-11-24)."""
    data = "\x00".join(sorted(tokens)).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def matches(stored: int, tokens: Sequence[str], current: int | None = None) -> bool:
    """Whether ``tokens`` have the tokens hash ``stored`` (by the definition that made it).
    current (int | None): their ``tokens_hash``, if the caller has it already."""
    if stored < VERSION_2:
        return tokens_hash_v1(tokens) == stored
    return (tokens_hash(tokens) if current is None else current) == stored


def token_hashes(tokens: Sequence[str]) -> np.ndarray:
    """Each token's 64-bit hash (uint64), the terms of the version-2 tokens hash."""
    return TokenStore(tokens).hashes().view(np.uint64)


def runs_hashes(hashes: np.ndarray, columns: np.ndarray, lengths: Sequence[int]) -> list[int]:
    """The version-2 tokens hash of consecutive token lists, given as ``columns`` into
    ``hashes`` (``token_hashes`` of their distinct tokens) cut into runs of ``lengths``.
    RETURNS (list[int]): one per list, tagged ``VERSION_2``."""
    lengths = np.asarray(lengths, dtype=np.int64)
    sums = np.zeros(columns.size + 1, dtype=np.uint64)  # uint64 sums wrap: mod 2**64
    np.cumsum(hashes[columns], dtype=np.uint64, out=sums[1:])
    ends = np.cumsum(lengths)
    return _mixed(sums[ends] - sums[ends - lengths], lengths)


def counted_runs_hashes(hashes: np.ndarray, columns: np.ndarray, counts: np.ndarray,
                        distinct: np.ndarray, lengths: Sequence[int]) -> list[int]:
    """``runs_hashes`` of token lists given by their distinct tokens: list i is the next
    ``distinct[i]`` entries of ``columns`` (into ``hashes``), each held ``counts`` times,
    ``lengths[i]`` tokens in all. A token's hash times its count is the sum over its
    occurrences (uint64 arithmetic wraps: mod 2**64), so the result is the same."""
    terms = np.zeros(columns.size + 1, dtype=np.uint64)
    np.cumsum(hashes[columns] * counts.astype(np.uint64), dtype=np.uint64, out=terms[1:])
    ends = np.cumsum(distinct)
    return _mixed(terms[ends] - terms[ends - distinct], lengths)


def _mixed(sums: np.ndarray, lengths: Sequence[int]) -> list[int]:
    """The version-2 hashes of token lists from their sums of token hashes."""
    lengths = np.asarray(lengths, dtype=np.int64)
    mixed = splitmix64(sums + (lengths.astype(np.uint64) + np.uint64(1)) * GOLDEN_GAMMA)
    return [VERSION_2 | h for h in mixed.tolist()]


class Ledger:
    """Learned messages: digest (32 bytes) -> (label code 0 ham / 1 spam, tokens hash, serial).

    Kept in insertion order, which is the order the arrays are saved in. The
    model file holds it as arrays (see :meth:`to_arrays`).

    Serials and column history (what makes a size bound exact, ``textnb.modelfile.prune``).
    Every learned message gets the next *serial* (0, 1, 2, ...; a relabelled message
    keeps its own); ``pruned_at`` is the serial count at the last prune (0: never).
    Per vocabulary column the ledger keeps ``last``, the serial of the latest message
    that held the token, and ``born``, the serial from which the column counts: a
    column is made when a message holds a token the vocabulary lacks, and it is born
    at ``pruned_at``. That is exact: no message since the last prune held the token
    (it would have its column), and one before it that did had its count dropped
    with the token. So a column holds message m's count iff ``born <= serial(m)``,
    and :meth:`held` tells ``forget`` and relabelling exactly which of a message's
    tokens the model still counts. Columns made outside ``textnb.modelfile.lifecycle`` (or in a
    file from before serials) get the same ``born`` when first covered, and ``last``
    = now, which is conservative (a prune keeps them a while longer).
    """

    def __init__(self):
        self._entries: dict[bytes, tuple[int, int, int]] = {}
        self.next_serial = 0
        self.pruned_at = 0
        # 32-bit serials in memory while they fit (two billion messages): 8 bytes a
        # vocabulary column fewer than int64 (41 MB for five million tokens), and the
        # file's arrays are written from them without a converted copy (to_arrays).
        self.born = np.zeros(0, dtype=np.int32)
        self.last = np.zeros(0, dtype=np.int32)

    # The column history is a view of buffers with room to grow (``cover``,
    # ``textnb.features.buffers``). Assigning one sets its length.
    @property
    def born(self) -> np.ndarray:
        return self._born[:self._columns]

    @born.setter
    def born(self, value) -> None:
        self._born = np.asarray(value)
        self._columns = self._born.shape[0]

    @property
    def last(self) -> np.ndarray:
        return self._last[:self._columns]

    @last.setter
    def last(self, value) -> None:
        self._last = np.asarray(value)
        self._columns = self._last.shape[0]

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> Mapping[bytes, tuple[int, int, int]]:
        """digest -> (label code, tokens hash, serial) of every message, read-only and
        live (``textnb.modelfile.count_patch`` compares two states of it)."""
        return MappingProxyType(self._entries)

    def copy(self) -> "Ledger":
        """A copy that learning in this one leaves as it is: the entries and the column
        history are copied (``cover`` writes into the history's buffers in place)."""
        other = copy.copy(self)
        other._entries = dict(self._entries)
        other.born, other.last = self.born.copy(), self.last.copy()
        return other

    def holding(self, raws: Iterable[bytes]) -> int:
        """How many of these messages (raw bytes) the ledger holds: the ones the model
        learned, whose scores are optimistic (``textnb evaluate`` says so)."""
        return sum(message_digest(raw) in self._entries for raw in raws) if self._entries else 0

    def __contains__(self, digest: bytes) -> bool:
        return digest in self._entries

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._entries)

    def __eq__(self, other) -> bool:
        """The same messages with the same labels and token hashes (what the counts hold);
        serials and column history say when, see :meth:`same_history`."""
        return (isinstance(other, Ledger) and len(self) == len(other)
                and all(other._entries.get(d, (None,))[:2] == e[:2]
                        for d, e in self._entries.items()))

    def same_history(self, other: "Ledger") -> bool:
        """Equal, and with the same serials and column history (a file's round trip)."""
        return (self == other and self._entries == other._entries
                and (self.next_serial, self.pruned_at) == (other.next_serial, other.pruned_at)
                and np.array_equal(self.born, other.born)
                and np.array_equal(self.last, other.last))

    def label(self, digest: bytes) -> str | None:
        """'spam', 'ham', or None for a message not in the ledger."""
        entry = self._entries.get(digest)
        return None if entry is None else LABELS[entry[0]]

    def tokens_hash(self, digest: bytes) -> int:
        return self._entries[digest][1]

    def serial(self, digest: bytes) -> int:
        """The message's place in the order of learning (relabelling keeps it)."""
        return self._entries[digest][2]

    def record(self, digest: bytes, label: str, tokens_hash: int, serial: int | None = None
               ) -> int:
        """Add an entry (with the next serial), or relabel an existing one (its place in
        the order and its serial stay). RETURNS (int): the entry's serial."""
        if len(digest) != DIGEST_SIZE:
            raise ValueError(f"a digest has {DIGEST_SIZE} bytes, got {len(digest)}")
        old = self._entries.get(digest)
        if serial is None:
            serial = old[2] if old is not None else self.next_serial
        self.next_serial = max(self.next_serial, serial + 1)
        tokens_hash = int(tokens_hash)
        if not 0 <= tokens_hash < VERSION_2 << 1:
            raise ValueError(f"tokens hash {tokens_hash} is not one of version 1 (64 bits) or 2")
        self._entries[digest] = (LABELS.index(label), tokens_hash, int(serial))
        return serial

    def _widen(self, serial: int = 0) -> None:
        """int64 column history before a serial (``serial``, or the counters ``cover``
        writes) that does not fit 32 bits goes into it."""
        if self.born.dtype == np.int32 and max(serial, self.next_serial,
                                               self.pruned_at) > _INT32_MAX:
            self.born, self.last = self.born.astype(np.int64), self.last.astype(np.int64)

    def remove(self, digest: bytes) -> None:
        del self._entries[digest]

    def counts(self) -> dict[str, int]:
        """Entries per label: {'ham': n, 'spam': n}."""
        spam = sum(entry[0] for entry in self._entries.values())
        return {"ham": len(self._entries) - spam, "spam": spam}

    def summary(self, n_learned: dict[str, int]) -> dict:
        """Size and counts per class, and how many learned messages it does not cover.

        n_learned (dict): the model's messages per class. A model trained without a
            ledger (``SpamFilter.fit``, or a file from before ledgers) has more
            messages than entries: those are ``untracked`` and cannot be forgotten.
        """
        counts = self.counts()
        untracked = {k: int(n_learned.get(k, 0)) - counts[k] for k in LABELS}
        return {"messages": len(self), **counts, "untracked": sum(untracked.values())}

    # -- column history --------------------------------------------------------
    def cover(self, n_columns: int) -> None:
        """Extend the column history to ``n_columns`` (see the class docstring)."""
        n = self._columns
        if n_columns > n:
            self._widen()
            self._born = with_room(self._born, n, n_columns)
            self._last = with_room(self._last, n, n_columns)
            self._born[n:n_columns] = self.pruned_at
            self._last[n:n_columns] = self.next_serial
            self._columns = n_columns

    def saw(self, columns: np.ndarray, serial: int) -> None:
        """Message ``serial`` holds ``columns`` (its token columns)."""
        if len(columns):
            self.cover(int(columns.max()) + 1)
            self._widen(serial)
            self.last[columns] = serial

    def held(self, digest: bytes, columns: np.ndarray) -> np.ndarray:
        """Which of a learned message's token columns (-1: not in the vocabulary) still
        hold its contribution: a bool mask, all True when nothing was pruned since it."""
        columns = np.asarray(columns, dtype=np.int64)
        held = columns >= 0
        serial = self.serial(digest)
        if serial >= self.pruned_at:  # learned after the last prune: nothing of it went
            return held
        born = np.full(columns.shape, self.pruned_at, np.int64)  # not covered: see cover()
        covered = held & (columns < self.born.shape[0])
        born[covered] = self.born[columns[covered]]
        return held & (born <= serial)

    def keep_columns(self, keep: np.ndarray) -> None:
        """Drop the history of the columns a prune removed (``keep``: bool per column)."""
        self.cover(keep.shape[0])
        self.born, self.last = self.born[:keep.shape[0]][keep], self.last[:keep.shape[0]][keep]
        if not keep.all():
            self.pruned_at = self.next_serial

    # -- storage -------------------------------------------------------------
    def to_arrays(self, n_columns: int | None = None) -> dict[str, np.ndarray]:
        """The entries as arrays, in order: ``ledger_digest`` uint8 of shape (n, 32),
        ``ledger_label`` uint8 (n,), ``ledger_tokens`` uint64 (n,), ``ledger_serial``
        int64 (n,); the column history ``ledger_born``, ``ledger_last`` int64
        (n_columns,) and ``ledger_state`` int64 [next_serial, pruned_at]; and
        ``ledger_hash_version`` uint8 (n,), the definition of each tokens hash (1 or 2;
        a file without it holds version 1 alone)."""
        n = len(self._entries)
        digests = np.frombuffer(b"".join(self._entries), dtype=np.uint8).reshape(n, DIGEST_SIZE)
        values = self._entries.values()
        labels = np.fromiter((e[0] for e in values), dtype=np.uint8, count=n)
        tagged = [e[1] for e in values]
        hashes = np.fromiter((h & _LOW_64 for h in tagged), dtype=np.uint64, count=n)
        versions = np.fromiter((1 + (h >> 64) for h in tagged), dtype=np.uint8, count=n)
        serials = np.fromiter((e[2] for e in values), dtype=np.int64, count=n)
        if n_columns is not None:
            self.cover(n_columns)
        k = self.born.shape[0] if n_columns is None else n_columns
        # Serials fit 32 bits for two billion messages. The history costs 9 % of the file
        # (SpamAssassin learned in delivery order: 4,726,869 bytes, 4,304,723 without the
        # serials and history; int64 would make it 4,764,116: compression takes most of it).
        small = np.int32 if self.next_serial <= _INT32_MAX else np.int64
        return {"ledger_digest": digests, "ledger_label": labels, "ledger_tokens": hashes,
                "ledger_serial": serials.astype(small),
                "ledger_born": self.born[:k].astype(small, copy=False),
                "ledger_last": self.last[:k].astype(small, copy=False),
                "ledger_state": np.array([self.next_serial, self.pruned_at], np.int64),
                "ledger_hash_version": versions}

    @classmethod
    def from_arrays(cls, digest: np.ndarray, label: np.ndarray, tokens: np.ndarray,
                    serial: np.ndarray | None = None, born: np.ndarray | None = None,
                    last: np.ndarray | None = None, state: np.ndarray | None = None,
                    hash_version: np.ndarray | None = None) -> "Ledger":
        """The inverse of :meth:`to_arrays`; ValueError when the arrays do not fit together.
        Files from before serials have none: the entries get 0, 1, 2, ... in order (no
        such file was ever pruned, so any increasing numbering is exact)."""
        n = label.shape[0]
        if (digest.dtype != np.uint8 or digest.shape != (n, DIGEST_SIZE)
                or tokens.shape != (n,) or label.ndim != 1
                or (serial is not None and serial.shape != (n,))
                or (hash_version is not None and hash_version.shape != (n,))):
            raise ValueError(f"ledger arrays disagree: digests {digest.shape}, labels "
                             f"{label.shape}, token hashes {tokens.shape}"
                             + (f", serials {serial.shape}" if serial is not None else "")
                             + (f", hash versions {hash_version.shape}"
                                if hash_version is not None else ""))
        if n and int(label.max()) > 1:
            raise ValueError("ledger labels must be 0 (ham) or 1 (spam)")
        hashes = tokens.astype(np.uint64).tolist()
        if hash_version is not None and n:
            if not np.isin(hash_version, (1, 2)).all():
                raise ValueError(f"ledger hash versions must be 1 or 2, found "
                                 f"{sorted(set(hash_version.tolist()) - {1, 2})[:3]}")
            hashes = [h | VERSION_2 if v == 2 else h
                      for h, v in zip(hashes, hash_version.tolist())]
        ledger = cls()
        raw = np.ascontiguousarray(digest).tobytes()
        keys = [raw[i * DIGEST_SIZE:(i + 1) * DIGEST_SIZE] for i in range(n)]
        serial = np.arange(n, dtype=np.int64) if serial is None else serial.astype(np.int64)
        ledger._entries = dict(zip(keys, zip(label.tolist(), hashes, serial.tolist())))
        if len(ledger._entries) != n:
            raise ValueError("ledger has duplicate digests")
        ledger.next_serial = int(serial.max()) + 1 if n else 0
        if state is not None:
            if state.shape != (2,) or int(state[0]) < ledger.next_serial or state[1] < 0:
                raise ValueError(f"ledger state {state.tolist()} does not fit its serials")
            ledger.next_serial, ledger.pruned_at = int(state[0]), int(state[1])
        if born is not None or last is not None:
            if born is None or last is None or born.shape != last.shape or born.ndim != 1:
                raise ValueError("ledger column history: born and last must come together, "
                                 "of one length")
            fits = max(ledger.next_serial, ledger.pruned_at) <= _INT32_MAX
            small = np.int32 if fits else np.int64
            ledger.born, ledger.last = born.astype(small), last.astype(small)
        return ledger
