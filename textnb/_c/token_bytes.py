"""The bytes of packed tokens, in NumPy: what a ``TokenStore`` (``textnb.features.token_store``)
holds, and the reference for the C loops over them (``textnb._c.speedups``).

A store is its tokens' UTF-8 bytes ("surrogatepass"), one after another, and the int64
end of each in them (``ends``). Here: a run of tokens' bytes (``region_of``), decoding a
region (``split_region``), the UTF-8 lengths of strings (``byte_lengths``), the tokens'
64-bit hash (``hash_region``, its definition) and a region as JSON list items
(``region_json_items``). Both ``token_store`` and ``speedups`` import this module; it
imports no other textnb module.
"""

from __future__ import annotations

import json

import numpy as np

__all__ = ["CHUNK", "ENCODING", "GOLDEN_GAMMA", "WORD_MASKS", "byte_lengths", "hash_region",
           "region_json_items", "region_of", "split_region", "splitmix64", "words_at"]

ENCODING = ("utf-8", "surrogatepass")
# Tokens handled at a time (decoded, hashed, written): a chunk's strings and temporaries
# exist together, never the whole vocabulary's.
CHUNK = 1 << 16


def region_of(data: bytes | bytearray, ends, i: int, j: int
              ) -> tuple[bytes | bytearray, np.ndarray]:
    """The bytes of tokens i..j-1 (i < j) of a store (its ``data``, and its tokens' int64
    ``ends``: an array or any buffer), and each token's end in those bytes (a new array:
    no view of a store's buffers outlives the call)."""
    offsets = np.frombuffer(ends, dtype=np.int64)
    base = int(offsets[i - 1]) if i else 0
    cut = offsets[i:j] - base
    return data[base:base + int(cut[-1])], cut


def split_region(region: bytes | bytearray, ends: np.ndarray) -> list[str]:
    """The strings of ``region`` cut at ``ends`` (byte offsets into it, ascending): one
    decode, then slices of the str (C speed)."""
    if region.isascii():
        text = region.decode("ascii")
    else:  # a character's offset: its bytes' offset less the continuation bytes before
        text = region.decode(*ENCODING)
        data = np.frombuffer(region, dtype=np.uint8)
        leads = np.cumsum((data & 0xC0) != 0x80, dtype=np.int64)  # characters begun so far
        ends = np.where(ends > 0, leads[np.maximum(ends - 1, 0)], 0)
    ends = ends.tolist()
    return list(map(text.__getitem__, map(slice, [0, *ends[:-1]], ends)))


def byte_lengths(data: bytes, lengths: np.ndarray) -> np.ndarray:
    """The UTF-8 length of each token, from its length in characters and the tokens'
    bytes (``data``): each continuation byte (10xxxxxx) adds one to its token's. Found
    among the bytes >= 0x80 alone, since most tokens are ASCII: faster than an
    ``isascii`` and an ``encode`` per token (docs/design/memory.md#the-packed-vocabulary)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    wide = np.flatnonzero(raw >= 0x80)
    lead = (raw[wide] & 0xC0) == 0xC0
    # A character's offset is its lead byte's less the continuation bytes before it.
    chars = wide[lead] - np.cumsum(~lead)[lead]
    token = np.searchsorted(np.cumsum(lengths), chars, side="right")
    owner = token[np.cumsum(lead)[~lead] - 1]  # each continuation byte's character
    return lengths + np.bincount(owner, minlength=lengths.size)


# The hash of a token's bytes (``TokenStore.hashes``): each 8-byte word (the last one
# masked to the token's bytes) xored with its place in the token and mixed by
# splitmix64's finaliser, the words summed, the length added, mixed again.
GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
WORD_MASKS = np.array([(1 << 8 * k) - 1 for k in range(8)] + [(1 << 64) - 1], dtype=np.uint64)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, in place (uint64 arithmetic wraps)."""
    x ^= x >> np.uint64(30)
    x *= _MIX1
    x ^= x >> np.uint64(27)
    x *= _MIX2
    x ^= x >> np.uint64(31)
    return x


def words_at(region: bytes | bytearray) -> np.ndarray:
    """Every byte offset of ``region`` read as a little-endian uint64 (unaligned, over a
    copy with 8 zero bytes after it)."""
    padded = bytes(region) + bytes(8)
    return np.ndarray((len(region) + 1,), dtype="<u8", buffer=padded, strides=(1,))


def hash_region(region: bytes | bytearray, ends: np.ndarray) -> np.ndarray:
    """The 64-bit hash of each token of ``region`` (cut at ``ends``), as int64."""
    lengths = np.diff(ends, prepend=0)
    words = np.maximum((lengths + 7) // 8, 1)  # an empty token has one word, 0
    first = np.cumsum(words) - words
    token = np.repeat(np.arange(lengths.size), words)
    place = np.arange(token.size, dtype=np.int64) - first[token]
    left = lengths[token] - 8 * place  # the token's bytes from this word on
    value = words_at(region)[(ends - lengths)[token] + 8 * place]
    value &= WORD_MASKS[np.clip(left, 0, 8)]
    value ^= place.astype(np.uint64) * GOLDEN_GAMMA
    hashes = np.add.reduceat(splitmix64(value), first) if first.size else np.zeros(0, np.uint64)
    hashes ^= lengths.astype(np.uint64) * GOLDEN_GAMMA
    return splitmix64(hashes).view(np.int64)


def region_json_items(region: bytearray, ends: np.ndarray) -> bytes | None:
    """The tokens of ``region`` (cut at ``ends``) as JSON strings joined by ", ", the bytes
    ``json.dumps`` gives a list of them; None when a token holds a NUL or the text
    "\\u0000". One decode and one ``json.dumps`` of the tokens joined by NUL, whose
    escapes ("\\u0000": no token's text makes one) become the joints: about half the
    time of a str a token (docs/design/counting-and-scoring.md#saving)."""
    data = np.frombuffer(region, dtype=np.uint8)
    if not data.all() or b"\\u0000" in region:
        return None
    joined = np.insert(data, ends[:-1], 0).tobytes().decode(*ENCODING)
    return json.dumps(joined).replace("\\u0000", '", "').encode("ascii")
