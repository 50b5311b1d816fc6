"""A growing list of strings packed into one UTF-8 buffer: ``Vocabulary.tokens_``.

A Python ``str`` costs 49 bytes of header besides its characters, and a list slot 8
more: for a vocabulary of millions of tokens, a large share of a training run's peak
memory (docs/design/memory.md#the-packed-vocabulary). Here the tokens are their UTF-8
bytes, one after another in a ``bytearray``, and the end offset of each (an ``array`` of
int64): the characters plus 8 bytes a token. Both grow by ``realloc`` (large blocks are
remapped, not copied), so growing never holds two copies.

A token is decoded when it is read: indexing, slices (lists), iteration (in chunks)
and ``take`` (many at once, vectorised). Lone surrogates round-trip ("surrogatepass").

Nothing outside this class may keep a NumPy view of the buffers: a view blocks their
growth (BufferError), so every array handed out is a copy.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from operator import eq

import numpy as np

from .._c import speedups
from .._c.token_bytes import (CHUNK, ENCODING, GOLDEN_GAMMA, WORD_MASKS, region_of,
                              split_region, splitmix64, words_at)

__all__ = ["TokenStore"]

# Tokens decoded at a time while iterating (tests shrink it to cross chunk boundaries).
_CHUNK = CHUNK


def _ends_key(region: bytes | bytearray, ends: np.ndarray) -> np.ndarray:
    """A key of each token's length, first 8 and last 8 bytes: equal for equal tokens,
    and rarely for others; cheaper than the hash (two words a token, whatever its length;
    namespaced tokens share their first 8 bytes, so the last 8 count too)."""
    lengths = np.diff(ends, prepend=0)
    words = words_at(region)
    short = WORD_MASKS[np.minimum(lengths, 8)]
    key = splitmix64((words[ends - lengths] & short) ^ lengths.astype(np.uint64) * GOLDEN_GAMMA)
    key += splitmix64(words[np.maximum(ends - 8, ends - lengths)] & short)
    return key


class TokenStore(Sequence):
    """A list of str that only grows (``append``, ``extend``), packed as UTF-8.

    Reads as a list: ``len``, ``store[i]`` (negative too), ``store[a:b]`` (a list),
    iteration, ``==`` with a list or another store; ``take`` decodes many positions at
    once and ``startswith`` tests a prefix on the bytes.
    """

    def __init__(self, tokens: Iterable[str] = ()):
        self._bytes = bytearray()
        self._ends = array("q")  # end offset of each token in _bytes
        if isinstance(tokens, TokenStore):
            self._bytes += tokens._bytes
            self._ends.extend(tokens._ends)
        else:
            self.extend(tokens)

    # -- growing ---------------------------------------------------------------
    def extend(self, tokens: Iterable[str]) -> None:
        tokens = tokens if isinstance(tokens, list) else list(tokens)
        if not tokens:
            return
        data, ends = speedups.pack_tokens(tokens)  # TypeError for anything but str
        self._bytes += data
        ends += self._ends[-1] if self._ends else 0
        self._ends.frombytes(ends.tobytes())

    @classmethod
    def from_utf8(cls, data, ends) -> "TokenStore":
        """The tokens whose UTF-8 bytes are ``data`` (any bytes-like), one after another,
        token i ending at byte ``ends[i]`` (ascending, the last ``len(data)``): no str is
        made (``store`` reads a model's vocabulary this way). A bytearray becomes the
        store's buffer as it is, not copied: the caller hands it over."""
        data = data if isinstance(data, bytearray) else bytearray(data)
        ends = np.asarray(ends, dtype=np.int64)
        if ends.size and (ends[-1] != len(data) or ends[0] < 0 or (np.diff(ends) < 0).any()):
            raise ValueError(f"token ends do not cut {len(data)} bytes")
        if not ends.size and data:
            raise ValueError(f"no token ends for {len(data)} bytes")
        store = cls()
        store._bytes = data
        store._ends.frombytes(memoryview(np.ascontiguousarray(ends)).cast("B"))
        return store

    def append(self, token: str) -> None:
        self.extend([token])

    def copy(self) -> "TokenStore":
        return TokenStore(self)

    # -- reading -----------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._ends)

    @property
    def nbytes(self) -> int:
        """Bytes held by the tokens' text and offsets (without spare capacity)."""
        return len(self._bytes) + 8 * len(self._ends)

    def _start(self, i: int) -> int:
        return self._ends[i - 1] if i else 0

    def __getitem__(self, i):
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step == 1:
                return self._decode(start, stop)
            return self.take(range(start, stop, step))
        n = len(self._ends)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("token index out of range")
        return self._bytes[self._start(i):self._ends[i]].decode(*ENCODING)

    def _decode(self, i: int, j: int) -> list[str]:
        """Tokens i..j-1 as a list (one region of the buffer)."""
        return split_region(*region_of(self._bytes, self._ends, i, j)) if i < j else []

    def __iter__(self) -> Iterator[str]:
        for i in range(0, len(self), _CHUNK):
            yield from self._decode(i, min(i + _CHUNK, len(self)))

    def take(self, positions) -> list[str]:
        """The tokens at ``positions`` (ints, negative counting from the end), in that
        order: their bytes gathered and decoded together."""
        region, ends = self._gather(positions)
        return split_region(region, ends) if ends.size else []

    def _gather(self, positions) -> tuple[bytes, np.ndarray]:
        """The bytes of the tokens at ``positions``, one after another, and each one's end."""
        return speedups.gather_tokens(self._bytes, self._ends, positions)

    def extend_from(self, other: "TokenStore", positions) -> None:
        """Append ``other``'s tokens at ``positions``, in that order, as bytes (no str)."""
        region, ends = other._gather(positions)
        if not ends.size:
            return
        ends += self._ends[-1] if self._ends else 0
        self._bytes += region
        self._ends.frombytes(ends.tobytes())

    def equal_at(self, positions, other: "TokenStore", other_positions) -> np.ndarray:
        """Whether each token at ``positions`` equals ``other``'s at ``other_positions``
        (bool ndarray), compared as bytes, nothing decoded (``speedups.equal_tokens``):
        how a worker's counts are merged and a scoring batch's tokens confirmed
        (docs/design/counting-and-scoring.md#adding-a-batch-to-the-model)."""
        return speedups.equal_tokens(self._bytes, self._ends, positions, other._bytes,
                                     other._ends, other_positions)

    def hashes(self, start: int = 0) -> np.ndarray:
        """A 64-bit hash of each token's bytes from ``start`` on (int64; the same in every
        process, computed on the buffer without decoding a token; ``speedups.hash_tokens``,
        whose definition is ``token_bytes.hash_region``).

        Also the terms of the ledger's version-2 tokens hash, which saved models hold
        (``textnb.models.ledger``): never change it (tests/test_tokens_hash.py pins it)."""
        return speedups.hash_tokens(self._bytes, self._ends, start)

    def _regions(self, start: int = 0) -> Iterator[tuple[int, int, bytearray, np.ndarray]]:
        """(i, j, the bytes of tokens i..j-1, their ends in those bytes), a chunk at a time."""
        for i in range(start, len(self), _CHUNK):
            j = min(i + _CHUNK, len(self))
            yield i, j, *region_of(self._bytes, self._ends, i, j)

    def json_items(self) -> Iterator[bytes]:
        """The tokens as ``json.dumps`` writes the items of a list of them (ASCII, joined by
        ", "), a chunk at a time (``textnb.modelfile.store``'s ``vocabulary.json``)."""
        for i in range(0, len(self), _CHUNK):
            yield speedups.json_items(self._bytes, self._ends, i, min(i + _CHUNK, len(self)))

    def candidates(self, tokens: list[str]) -> np.ndarray:
        """The positions whose token has the byte length, first and last 8 bytes of one
        of ``tokens``: every position of each of them, and rarely others (a pass over
        the buffer, two words a token, nothing decoded; ``Vocabulary.columns``)."""
        query = TokenStore(tokens)
        wanted = np.unique(np.concatenate([_ends_key(r, e) for _, _, r, e in query._regions()]
                                          or [np.zeros(0, np.uint64)]))
        found = [np.zeros(0, dtype=np.int64)]
        if wanted.size:
            # A table of the keys' low 16 bits first: a look-up in 64 kB, where a binary
            # search of every key would be most of the pass
            # (docs/design/startup.md#the-load-beside-spacys-import).
            table = np.zeros(1 << 16, dtype=bool)
            table[wanted & np.uint64(0xFFFF)] = True
            for i, _, region, ends in self._regions():
                keys = _ends_key(region, ends)
                maybe = np.flatnonzero(table[keys & np.uint64(0xFFFF)])
                at = np.minimum(np.searchsorted(wanted, keys[maybe]), wanted.size - 1)
                found.append(maybe[wanted[at] == keys[maybe]] + i)
        return np.concatenate(found)

    def startswith(self, prefix: str, start: int = 0) -> np.ndarray:
        """Which tokens from ``start`` on begin with ``prefix`` (bool ndarray), tested on
        the bytes without decoding a token."""
        wanted = prefix.encode(*ENCODING)
        offsets = np.frombuffer(self._ends, dtype=np.int64)
        ends = offsets[start:].copy()
        starts = np.empty_like(ends)
        starts[1:] = ends[:-1]
        if starts.size:
            starts[0] = self._start(start)
        del offsets
        mask = ends - starts >= len(wanted)
        if not mask.any():
            return mask
        data = np.frombuffer(self._bytes, dtype=np.uint8)
        for k, byte in enumerate(wanted):  # a token too short is masked already
            mask &= data[np.minimum(starts + k, data.size - 1)] == byte
        return mask

    def before_first(self, separator: str, width: int, start: int = 0
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each token's bytes before its first ``separator`` (one ASCII character), from
        ``start`` on, read on the buffer without decoding a token.

        RETURNS (lengths, heads, graphic): their byte length (int64; -1 when the token
        has no separator); their first ``width`` bytes ('S<width>' array, b"" when none);
        whether they are all graphic ASCII, '!' to '~' (bool; False when none)."""
        sep = separator.encode("ascii")
        if len(sep) != 1:
            raise ValueError(f"separator {separator!r} is not one ASCII character")
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = [
            (np.zeros(0, np.int64), np.zeros(0, f"S{width}"), np.zeros(0, bool))]
        offsets = np.arange(width)
        for _, _, region, ends in self._regions(start):
            data = np.frombuffer(region, dtype=np.uint8)
            starts = np.concatenate([[0], ends[:-1]])
            seps = np.append(np.flatnonzero(data == sep[0]), data.size)
            first = seps[np.searchsorted(seps, starts)]  # the first at or after each start
            found = first < ends
            lengths = np.where(found, first - starts, -1)
            # bytes outside '!'..'~' before each offset (int32: a chunk is far below 2 GB)
            other = np.zeros(data.size + 1, dtype=np.int32)
            np.cumsum((data < 0x21) | (data > 0x7E), dtype=np.int32, out=other[1:])
            graphic = found & (other[first] == other[starts])
            within = offsets < lengths.reshape(-1, 1)
            at = np.minimum(starts.reshape(-1, 1) + offsets, max(data.size - 1, 0))
            head = np.where(within, data[at] if data.size else 0, 0).astype(np.uint8)
            parts.append((lengths, np.ascontiguousarray(head).view(f"S{width}").ravel(),
                          graphic))
            del data
        return tuple(np.concatenate(p) for p in zip(*parts))

    def __eq__(self, other) -> bool:
        if isinstance(other, TokenStore):
            return self._ends == other._ends and self._bytes == other._bytes
        if isinstance(other, list):
            return len(other) == len(self) and all(map(eq, self, other))
        return NotImplemented

    __hash__ = None  # mutable, as a list

    def __repr__(self) -> str:
        return f"TokenStore({len(self)} tokens, {len(self._bytes)} bytes)"
