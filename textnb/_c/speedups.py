"""The per-token loops of training and scoring: in C (``textnb._c._speedups``) when it was
built at install, else in Python. Both give the same results (tests/test_speedups.py).

What is here, by the work it serves:

- tokenising: finding a text's chunks in the tokenizer's cache (``chunk_cache``),
  splitting the new ones into words by spaCy's affix loop and looking the words up
  (``map_chunks``, with ``PlainWords`` for plain ASCII words), joining the chunks' tokens
  with the word pairs between them (``join_chunks``), and the host names and IPv4
  addresses of header values (``find_hostnames``, ``find_ipv4``);
- parsing and the ledger: a plain message's header fields (``plain_fields``) and the
  normalisation of a message's bytes (``normalise_message``);
- counting: numbering a batch's tokens and counting them per message (``number_tokens``,
  ``count_messages``), and the vocabulary's index, a hash table (``HashIndex``) where
  ``vectorize.Vocabulary`` otherwise searches and merges sorted arrays;
- the vocabulary's bytes: a TokenStore's hashes, comparisons, gathers, packing, and its
  JSON in the model file both ways;
- scoring: the selection of each message's strongest clues (``strongest_positions``).

Why C: each of these loops is a dict look-up or a list append per token, word or byte,
which no arrangement of Python built-ins made cheaper; what is left in C is reaching the
objects in memory (docs/design/c-loops.md). The Python twins are the fallback and the
reference. The extension is optional (setup.py): an install without a C compiler still
works, and ``textnb --version`` says which loops run.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from functools import lru_cache
from itertools import chain, count
from typing import Callable, NamedTuple, Protocol

import numpy as np

from .token_bytes import (CHUNK, ENCODING, byte_lengths, hash_region, region_json_items,
                          region_of, split_region)

try:
    from . import _speedups
except ImportError:  # not built: no C compiler at install
    _speedups = None
# The C module as built, whatever TEXTNB_PURE_PYTHON says below: a HashIndex made while
# it was in use keeps working if the switch flips (tests flip it). A module-level name,
# not an attribute, so that a vocabulary holding a HashIndex still deep-copies and pickles.
_built = _speedups

# TEXTNB_PURE_PYTHON=1 runs the Python loops even where the C ones were built (to compare
# the two, or to rule the extension out when something looks wrong).
if os.environ.get("TEXTNB_PURE_PYTHON", "") not in ("", "0"):
    _speedups = None

__all__ = ["implementation",
           # the tokenizer's: its chunk cache, the tokens of a text's chunks
           "chunk_cache", "ChunkCache", "ChunkCachePython", "join_chunks", "count_words",
           "join_chunks_python", "count_words_python",
           # ... and what its new chunks map to
           "ChunkRules", "PlainWords", "map_chunks", "map_chunks_python",
           "plain_word_tokens_python",
           # counting: a batch's tokens numbered and counted per message
           "number_tokens", "count_messages", "number_tokens_python", "count_messages_python",
           "sortable_keys",
           # the vocabulary: its index, and a TokenStore's bytes (hashes, comparisons,
           # gathers, packing, JSON)
           "HashIndex", "hash_index", "hash_tokens", "equal_tokens", "gather_tokens",
           "pack_tokens", "json_items", "read_json_items", "hash_tokens_python",
           "equal_tokens_python", "gather_tokens_python", "pack_tokens_python",
           "json_items_python",
           # scoring: each message's strongest clues
           "strongest_positions",
           # the ledger: a message's bytes as it identifies them
           "normalise_message", "normalise_message_python", "normalise_fields_python",
           # the parser's: a plain message's header fields
           "plain_fields", "plain_fields_python",
           # the tokenizer's header rules: host names and IPv4 addresses in a value
           "find_hostnames", "find_ipv4"]


def implementation() -> str:
    """Which loops run: "C" or "Python"."""
    return "C" if _speedups is not None else "Python"


def _lists_of_lists(token_lists) -> list[list[str]]:
    """What the C loops take: a list of lists (any other sequences copied into lists)."""
    return [t if isinstance(t, list) else list(t) for t in token_lists]


def number_tokens_python(token_lists: list[list[str]]) -> tuple[np.ndarray, list[str]]:
    """``number_tokens`` in Python."""
    lengths = sum(map(len, token_lists))
    column_of = defaultdict(count().__next__)  # a new token gets the next number, in C
    numbers = np.fromiter(map(column_of.__getitem__, chain.from_iterable(token_lists)),
                          dtype=np.int64, count=lengths)
    return numbers, list(column_of)


def number_tokens(token_lists: list[list[str]]) -> tuple[np.ndarray, list[str]]:
    """Number the distinct tokens of ``token_lists`` in order of first sight.

    RETURNS (ndarray, list[str]): each token's number (int64, the lists one after
    another), and the distinct tokens in number order.
    """
    if _speedups is None:
        return number_tokens_python(token_lists)
    lists = _lists_of_lists(token_lists)
    numbers = np.empty(sum(map(len, lists)), dtype=np.int64)
    return numbers, _speedups.number_tokens(lists, numbers)


def sortable_keys(keys: np.ndarray, bound: int) -> np.ndarray:
    """``keys`` (int64, all below ``bound``) as 32-bit integers when they fit: they sort in
    about 0.6 of the time, with the same order and values."""
    return keys.astype(np.int32) if bound <= 2**31 else keys


def count_messages_python(token_lists: list[list[str]]
                          ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """``count_messages`` in Python: the tokens numbered, then one sort of the (list,
    number) keys, whose runs are the lists' distinct tokens (each list's in number
    order)."""
    numbers, tokens = number_tokens_python(token_lists)
    lengths = np.fromiter(map(len, token_lists), dtype=np.int64, count=len(token_lists))
    rows = np.repeat(np.arange(len(token_lists), dtype=np.int64), lengths)
    width = max(len(tokens), 1)
    keys = np.sort(sortable_keys(rows * width + numbers, len(token_lists) * width))
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1]))[:keys.size])
    counts = np.diff(np.append(starts, keys.size))
    row, columns = np.divmod(keys[starts].astype(np.int64), width)
    distinct = np.bincount(row, minlength=len(token_lists))
    return tokens, distinct.astype(np.int64), columns, counts.astype(np.int64)


def count_messages(token_lists: list[list[str]]
                   ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Number the distinct tokens of ``token_lists`` in order of first sight (as
    ``number_tokens``), and count each list's distinct tokens.

    RETURNS (tokens, distinct, columns, counts): the distinct tokens in number order;
    per list, how many distinct tokens it holds (int64); then, list after list, each
    one's number and how many times the list holds it (int64). Within a list the
    entries come in no set order (C: first sight in the list; Python: number order):
    sums over them are the same either way.
    """
    if _speedups is None:
        return count_messages_python(token_lists)
    lists = _lists_of_lists(token_lists)
    total = sum(map(len, lists))
    distinct = np.empty(len(lists), dtype=np.int64)
    columns, counts = np.empty(total, dtype=np.int64), np.empty(total, dtype=np.int64)
    tokens, written = _speedups.count_messages(lists, distinct, columns, counts)
    return tokens, distinct, columns[:written], counts[:written]


class ChunkCache(Protocol):
    """What ``chunk_cache`` gives (C or Python): ``tokenize.EmailTokenizer``'s caches."""

    def lookup(self, text: str, max_chunk: int) -> tuple[list, list[int], list[str]]: ...

    def update(self, values: dict[str, tuple | str]) -> None: ...

    def clear(self) -> None: ...

    def __len__(self) -> int: ...


class ChunkCachePython:
    """``ChunkCache`` in Python: a dict of chunk -> value, and the text split into str."""

    def __init__(self):
        self._values: dict[str, tuple | str] = {}

    def __len__(self) -> int:
        return len(self._values)

    def lookup(self, text: str, max_chunk: int) -> tuple[list, list[int], list[str]]:
        if max_chunk < 1:
            raise ValueError("lookup: max_chunk must be at least 1")
        chunks = text.split()
        if chunks and max(map(len, chunks)) > max_chunk:
            chunks = [chunk[:max_chunk] for chunk in chunks]
        values = list(map(self._values.get, chunks))
        if not values.count(None):
            return values, [], []
        positions = [i for i, value in enumerate(values) if value is None]
        return values, positions, [chunks[i] for i in positions]

    def update(self, values: dict[str, tuple | str]) -> None:
        self._values.update(values)

    def clear(self) -> None:
        self._values.clear()

    def __reduce__(self):
        return (ChunkCachePython, ())  # a copy starts empty, as the C one's does


def chunk_cache():
    """A new cache of a tokenizer's chunk -> value (``tokenize._chunk_entry``).

    ``lookup(text, max_chunk)`` gives, for each whitespace-free chunk of ``text``
    (``text.split()``, each cut to ``max_chunk`` characters), its value or None, and
    the positions and str of the chunks without one; ``update(dict)``, ``clear()`` and
    ``len()`` as a dict's. In C (``_speedups.ChunkCache``) a chunk is hashed and compared
    where it lies in the text, and only the chunks not found are made into str: most of
    a text's chunks would be made, hashed and freed only to be found
    (docs/design/tokenizer-speed.md#chunks-cached). A copy of either starts empty: a
    cache holds no state.
    """
    if _speedups is None:
        return ChunkCachePython()
    return _speedups.ChunkCache()


class ChunkRules(NamedTuple):
    """How a tokenizer splits a whitespace-free chunk into words without spaCy, and what
    it caches for a chunk (``tokenize._CHUNK_RULES``).

    prefixes, suffixes (str): the characters that split off a word's start, its end.
    infixes (str): the characters that split a word between two ASCII letters.
    token_match (callable): keeps a URL or an address whole (truthy for one).
    split (callable): chunk -> its words, or None when spaCy must split it (the
        Python reference of the C loop, which reads the four fields above).
    entry (callable): a chunk's non-empty words' tokens -> its cache entry.
    """

    prefixes: str
    suffixes: str
    infixes: str
    token_match: Callable[[str], object]
    split: Callable[[str], "tuple[str, ...] | None"]
    entry: Callable[[list], "tuple | str"]


class PlainWords(NamedTuple):
    """How a tokenizer maps a plain ASCII word in one namespace
    (``plain_word_tokens_python``): no rule but the length ones applies to it."""

    namespace: str  # ASCII
    lowercase: bool
    min_length: int
    max_length: int
    cache_limit: int  # words stored in a namespace's word cache, at most


# What some rule of ``tokenize._map_plain`` looks for in an ASCII word: a URL or an
# address ("." "@" ":"), a number (a digit), money ("$"), a colon to neutralise. A word
# without any of them (and ASCII: no script to segment, no other currency sign) is
# mapped by its length alone (tests/test_tokenize.py checks it against the full rules).
_NOT_PLAIN = re.compile(r"[0-9.@:$]")


def plain_word_tokens_python(text: str, plain: PlainWords) -> tuple[str, ...] | None:
    """The tokens of ``text`` when it is a plain ASCII word (ASCII, without a digit,
    ".", "@", ":" or "$": letters, but also "don't", "re-send", "!!!"), else None:
    the word (lower-cased, if so set) in its namespace; none when shorter than
    ``min_length``; when longer than ``max_length``, its first character and size in
    tens (SpamBayes: long "words" are mostly encoded junk).

    Such a word can match none of ``_map_plain``'s rules (the characters excluded are
    the ones they look for), so the C loop over new chunks maps it without calling back
    into Python, where the full rules cost far more a word
    (docs/design/tokenizer-speed.md#plain-words-without-spacy)."""
    if not (text and text.isascii()) or _NOT_PLAIN.search(text):
        return None
    word = text.lower() if plain.lowercase else text
    if len(word) < plain.min_length:
        return ()
    if len(word) > plain.max_length:
        return (f"{plain.namespace}skip:{word[0]} {len(word) // 10 * 10}",)
    return (plain.namespace + word,)


def map_chunks_python(chunks: list[str], words: dict, new_word: Callable[[str], tuple],
                      bigrams: bool, rules: ChunkRules, plain: PlainWords | None = None
                      ) -> tuple[dict, list[str]]:
    """``map_chunks`` in Python."""
    values: dict[str, tuple | str] = {}
    left: list[str] = []
    for chunk in chunks:
        texts = rules.split(chunk)
        if texts is None:
            left.append(chunk)
            continue
        mapped = []
        for text in texts:
            word = words.get(text)
            if word is None and plain is not None:
                word = plain_word_tokens_python(text, plain)
                if word is not None and len(words) < plain.cache_limit:
                    words[text] = word
            if word is None:
                word = new_word(text)
            mapped.append(word)
        values[chunk] = (rules.entry([word for word in mapped if word]) if bigrams
                         else tuple(chain.from_iterable(mapped)))
    return values, left


def map_chunks(chunks: list[str], words: dict, new_word: Callable[[str], tuple],
               bigrams: bool, rules: ChunkRules, plain: PlainWords | None = None
               ) -> tuple[dict, list[str]]:
    """What each of ``chunks`` (distinct, whitespace-free) maps to, for the chunks split
    without spaCy (``rules``), and the list of the others, for spaCy.

    A word's tokens come from ``words`` (a dict), else, for a word of ASCII letters
    alone when ``plain`` is given, from ``plain_word_tokens_python`` (stored in
    ``words`` while it holds fewer than ``plain.cache_limit``), else from
    ``new_word(word)``, which stores them there. A chunk's value is ``rules.entry`` of
    its non-empty words' tokens when ``bigrams``, else all its words' tokens in one
    tuple. In C the chunk is split where it lies and a word becomes a str only to be
    looked up, and the loop, the look-ups, the entries and the plain words make no
    Python frame (docs/design/tokenizer-speed.md#plain-words-without-spacy)."""
    if _speedups is None:
        return map_chunks_python(chunks, words, new_word, bigrams, rules, plain)
    return _speedups.map_chunks(chunks if isinstance(chunks, list) else list(chunks), words,
                                new_word, bigrams, rules.prefixes, rules.suffixes,
                                rules.infixes, rules.token_match,
                                plain if plain is None or plain.namespace.isascii() else None)


def join_chunks_python(entries: list[tuple | str]) -> list[str]:
    """``join_chunks`` in Python."""
    out: list[str] = []
    prev, prev_pairs = None, False
    for entry in entries:
        if type(entry) is str:
            out.append(entry)
            pairs = ":" not in entry
            if prev_pairs and pairs:
                out.append(f"bi:{prev} {entry}")
            prev, prev_pairs = entry, pairs
        elif entry:
            head, tail, first, first_pairs, last, last_pairs, _ = entry
            out.extend(head)
            if prev_pairs and first_pairs:
                out.append(f"bi:{prev} {first}")
            out.extend(tail)
            prev, prev_pairs = last, last_pairs
    return out


def join_chunks(entries: list[tuple | str]) -> list[str]:
    """The tokens of a text's consecutive chunk entries (``tokenize._chunk_entry``: ()
    for a chunk that maps to nothing; a str for a chunk of one token; else (first
    word's tokens, the rest's tokens with their pairs, first word, whether it pairs,
    last word, whether it pairs, count)), with the word pair ``bi:LAST FIRST`` across
    two neighbouring entries whose facing words both pair (a word pairs when it holds
    no ':', the namespace mark)."""
    if _speedups is None:
        return join_chunks_python(entries)
    return _speedups.join_chunks(entries if isinstance(entries, list) else list(entries))


def count_words_python(entries: list[tuple | str]) -> int:
    """``count_words`` in Python."""
    return sum(1 if type(entry) is str else entry[6] for entry in entries if entry)


def count_words(entries: list[tuple | str]) -> int:
    """The word tokens of chunk entries (as ``join_chunks`` takes them), not counting
    the pairs between words: what the tokenizer's token budget counts."""
    if _speedups is None:
        return count_words_python(entries)
    return _speedups.count_words(entries if isinstance(entries, list) else list(entries))


# The index's table is grown (doubled, every column put in again) before it is fuller than
# this: linear probing stays short (about 2.5 probes a hit at 3/4 full, fewer below), and
# at 5.16 million tokens 2^23 slots and the hashes are 75 MB of arrays, against the
# sorted arrays' 83 (docs/design/memory.md#the-packed-vocabulary).
_MAX_LOAD = 0.75


class HashIndex:
    """The vocabulary's index in C: a token hash -> the first column with that hash, by
    open addressing (``_speedups.index_insert`` / ``index_find``). Columns are added in
    order from 0; a column whose hash is indexed already is reported (``add`` returns it
    as taken) for the vocabulary to tell the two tokens apart by their strings.

    It replaces, where the C module is built, the sorted arrays that
    ``vectorize.Vocabulary`` searches and merges as they grow, for a fraction of their
    time and memory (docs/design/counting-and-scoring.md#adding-a-batch-to-the-model).
    """

    def __init__(self):
        self._keys = np.zeros(0, dtype=np.int64)   # each column's hash (grown in place)
        self._slots = np.zeros(0, dtype=np.int32)  # 0 empty, else column + 1
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def find(self, hashes: np.ndarray) -> np.ndarray:
        """The column indexed under each hash (int64), -1 for none."""
        hashes = np.ascontiguousarray(hashes, dtype=np.int64)
        out = np.full(hashes.size, -1, dtype=np.int64)
        if self._n and hashes.size:
            _built.index_find(self._slots, self._keys, hashes, out)
        return out

    def add(self, hashes: np.ndarray) -> np.ndarray:
        """Index the next ``len(hashes)`` columns. RETURNS (ndarray of bool): whether each
        one's hash was indexed already (by an earlier column, or an earlier one of these):
        such a column is not indexed."""
        hashes = np.asarray(hashes, dtype=np.int64)
        n = self._n + hashes.size
        if n > self._keys.size:
            # In place, by a quarter more: a doubling would leave up to 8 bytes a token idle.
            self._keys.resize(max(n, self._keys.size + self._keys.size // 4), refcheck=False)
        self._keys[self._n:n] = hashes
        if n > self._slots.size * _MAX_LOAD:
            size = max(self._slots.size, 1024)
            while n > size * _MAX_LOAD:
                size *= 2
            self._slots = np.zeros(size, dtype=np.int32)
            if self._n:  # in column order again, so the same columns hold the slots
                _built.index_insert(self._slots, self._keys, 0, self._n,
                                     np.empty(self._n, dtype=np.uint8))
        taken = np.empty(hashes.size, dtype=np.uint8)
        _built.index_insert(self._slots, self._keys, self._n, n, taken)
        self._n = n
        return taken.view(bool)


    def repeats(self, hashes: np.ndarray) -> bool:
        """Whether a hash occurs twice in ``hashes`` (found with a table of their own)."""
        return bool(HashIndex().add(hashes).any())


# -- a TokenStore's bytes (``token_store``): a store is its UTF-8 ``data`` and the int64
# ``ends`` of its tokens in it; positions may count from the end, as negative numbers.

def hash_tokens_python(data, ends, start: int = 0) -> np.ndarray:
    """``hash_tokens`` in NumPy (``token_bytes.hash_region``, the hash's definition), a
    chunk of tokens at a time (its temporaries are a few words a byte)."""
    n = len(ends)
    out = np.empty(n - start, dtype=np.int64)
    for i in range(start, n, CHUNK):
        j = min(i + CHUNK, n)
        out[i - start:j - start] = hash_region(*region_of(data, ends, i, j))
    return out


def hash_tokens(data, ends, start: int = 0) -> np.ndarray:
    """``TokenStore.hashes``: the 64-bit hash (int64) of each token from ``start`` on."""
    if _speedups is None:
        return hash_tokens_python(data, ends, start)
    out = np.empty(len(ends) - start, dtype=np.int64)
    _speedups.hash_tokens(data, ends, start, out)
    return out


def _token_spans(ends, positions) -> tuple[np.ndarray, np.ndarray]:
    """(first byte, end) of the tokens at ``positions`` of a store with these ``ends``."""
    at = np.asarray(positions, dtype=np.int64).reshape(-1)
    offsets = np.frombuffer(ends, dtype=np.int64)
    n = offsets.size
    if at.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    at = np.where(at < 0, at + n, at)
    if at.min() < 0 or at.max() >= n:
        raise IndexError("token index out of range")
    stops = offsets[at]
    return np.where(at > 0, offsets[np.maximum(at - 1, 0)], 0), stops


def _gather_spans(data, starts: np.ndarray, stops: np.ndarray) -> tuple[bytes, np.ndarray]:
    """The bytes of ``data`` at the (start, stop) offsets, one span after another, and
    where each one ends in them."""
    lengths = stops - starts
    out_ends = np.cumsum(lengths)
    # byte k of the gathered bytes comes from starts[t] + (k - out_start[t])
    source = np.repeat(starts - (out_ends - lengths), lengths)
    source += np.arange(source.size, dtype=np.int64)
    return np.frombuffer(data, dtype=np.uint8)[source].tobytes(), out_ends


def gather_tokens_python(data, ends, positions) -> tuple[bytes, np.ndarray]:
    """``gather_tokens`` in NumPy: a byte index array, O(the tokens' bytes)."""
    return _gather_spans(data, *_token_spans(ends, positions))


def gather_tokens(data, ends, positions) -> tuple[bytes, np.ndarray]:
    """The bytes of the store's tokens at ``positions``, one after another, and where each
    one ends in them (int64)."""
    if _speedups is None:
        return gather_tokens_python(data, ends, positions)
    positions = np.ascontiguousarray(positions, dtype=np.int64).reshape(-1)
    out_ends = np.empty(positions.size, dtype=np.int64)
    return _speedups.gather_tokens(data, ends, positions, out_ends), out_ends


def equal_tokens_python(data, ends, positions, other_data, other_ends, other_positions
                        ) -> np.ndarray:
    """``equal_tokens`` in NumPy: lengths compared, then the bytes of those alike."""
    starts, stops = _token_spans(ends, positions)
    other_starts, other_stops = _token_spans(other_ends, other_positions)
    lengths = stops - starts
    same = lengths == other_stops - other_starts
    check = np.flatnonzero(same & (lengths > 0))
    if check.size:
        mine, cut = _gather_spans(data, starts[check], stops[check])
        theirs, _ = _gather_spans(other_data, other_starts[check], other_stops[check])
        differ = np.frombuffer(mine, np.uint8) != np.frombuffer(theirs, np.uint8)
        # Every checked token has bytes, so each run below starts inside the region.
        same[check[np.add.reduceat(differ, cut - lengths[check]) > 0]] = False
    return same


def equal_tokens(data, ends, positions, other_data, other_ends, other_positions
                 ) -> np.ndarray:
    """Whether each token at ``positions`` of one store has the bytes of the token at
    ``other_positions`` of the other (bool ndarray)."""
    if _speedups is None:
        return equal_tokens_python(data, ends, positions, other_data, other_ends,
                                   other_positions)
    positions = np.ascontiguousarray(positions, dtype=np.int64).reshape(-1)
    other_positions = np.ascontiguousarray(other_positions, dtype=np.int64).reshape(-1)
    if positions.size != other_positions.size:
        raise ValueError(f"{positions.size} positions against {other_positions.size}")
    out = np.empty(positions.size, dtype=np.uint8)
    _speedups.equal_tokens(data, ends, positions, other_data, other_ends, other_positions,
                           out)
    return out.view(bool)


def pack_tokens_python(tokens: list[str]) -> tuple[bytes, np.ndarray]:
    """``pack_tokens`` in Python: one join, one encode, the lengths in bytes counted with
    NumPy where a token is not ASCII (``token_bytes.byte_lengths``)."""
    joined = "".join(tokens)  # TypeError for anything but str
    data = joined.encode(*ENCODING)
    lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
    if len(data) != len(joined):
        lengths = byte_lengths(data, lengths)
    return data, np.cumsum(lengths)


def pack_tokens(tokens: list[str]) -> tuple[bytes, np.ndarray]:
    """The UTF-8 bytes ("surrogatepass") of ``tokens``, one after another, and where each
    ends in them (int64): what a TokenStore holds."""
    if _speedups is None:
        return pack_tokens_python(tokens)
    ends = np.empty(len(tokens), dtype=np.int64)
    return _speedups.pack_tokens(tokens, ends), ends


def json_items_python(data, ends, start: int, stop: int) -> bytes:
    """``json_items`` with NumPy and ``json.dumps`` (``token_bytes.region_json_items``, else
    the tokens decoded and dumped)."""
    import json

    if stop <= start:
        return b""
    region, cut = region_of(data, ends, start, stop)
    items = region_json_items(region, cut)
    return (items if items is not None
            else json.dumps(split_region(region, cut))[1:-1].encode("ascii"))


def json_items(data, ends, start: int, stop: int) -> bytes:
    """Tokens ``start`` .. ``stop - 1`` of a store as the items of a JSON list (joined by
    ", "): the bytes ``json.dumps`` writes for them (ASCII, escaped as it escapes)."""
    if _speedups is not None:
        items = _speedups.json_items(data, ends, start, stop)
        if items is not None:
            return items
    return json_items_python(data, ends, start, stop)


def read_json_items(data) -> tuple[bytearray, np.ndarray] | None:
    """The strings of ``data``, a JSON list as ``json_items`` writes it (``[`` + items +
    ``]``), as UTF-8 one after another and where each ends (what ``TokenStore.from_utf8``
    takes), decoded in C as ``json.loads`` decodes them; None where the C module was not
    built or the bytes have another shape: ``store`` then reads them with NumPy, or
    ``json.loads``."""
    if _speedups is None:
        return None
    # Each item takes at least 4 bytes ('""' and the ', ' after it; the last one the "]"),
    # so there are at most (len + 2) // 4: room without a pass over the bytes to count
    # them, which would hold the GIL while spaCy is imported beside the load
    # (docs/design/startup.md#the-load-beside-spacys-import). Pages of it never written
    # are never touched.
    ends = np.empty((len(data) + 2) // 4 + 1, dtype=np.int64)
    read = _speedups.read_json_items(data, ends)
    if read is None:
        return None
    text, n_items = read
    return text, ends[:n_items].copy()


# -- evidence selection (``evidence.strongest``) ------------------------------------


def strongest_positions(C, sides: tuple[tuple[int, int | None], ...],
                        limited: np.ndarray | None = None,
                        min_strength: float = 0.0) -> np.ndarray | None:
    """Positions in ``C.data`` of each row's strongest entries, row by row, strongest
    first, in C: each row keeps its best entries as it is read (a list of at most ``k`` a
    side), where NumPy (``evidence.RankedEvidence``) sorts them all. None where the C
    loops do not run: ``evidence.strongest_positions``, which says what is kept and
    splits the places, then ranks with NumPy.

    sides (tuple of (k, cap)): one (k, cap) for the entries of both signs together, or
        two, the spam (positive) side's and the ham side's; k >= 1 places, at most cap
        of them ``limited`` columns (None: no cap).
    """
    if _speedups is None:
        return None

    def side(k_side: int, cap: int | None) -> tuple[int, int]:
        return k_side, -1 if limited is None or cap is None else cap

    sides = tuple(side(*s) for s in sides)
    marks = (np.zeros(0, np.uint8) if limited is None
             else np.ascontiguousarray(limited, dtype=bool).view(np.uint8))
    out = np.empty(C.data.size, dtype=np.int64)
    written = _speedups.strongest_positions(
        np.ascontiguousarray(C.data, dtype=np.float64),
        np.ascontiguousarray(C.indices, dtype=np.int64),
        np.ascontiguousarray(C.indptr, dtype=np.int64), marks, sides, float(min_strength), out)
    return out[:written]


def hash_index() -> HashIndex | None:
    """A new ``HashIndex`` where the C module was built, else None (the vocabulary then
    keeps its index in sorted arrays)."""
    return HashIndex() if _speedups is not None else None


# A line that may begin a field ``normalise_message`` drops: one of the names or prefixes
# after any bytes ``bytes.strip`` would take off the name; the first line, or one after
# a line end. Where no line of the header section matches, nothing is dropped and the
# field-by-field pass is skipped: a message with no empty line after its fields
# (Enron-Spam's) had its whole body walked line by line. A search from each line end
# with one pattern (MULTILINE "^") is slower: the regex engine then tries every position.
@lru_cache(maxsize=8)
def _may_drop(fields: tuple[bytes, ...], prefixes: tuple[bytes, ...]
              ) -> tuple[re.Pattern, re.Pattern]:
    name = (rb"[ \t\r\x0b\x0c]*(?i:"
            + b"|".join(re.escape(n) for n in sorted(set(fields) | set(prefixes))) + rb")")
    return re.compile(name), re.compile(rb"\n" + name)


def normalise_fields_python(text: bytes, fields: tuple[bytes, ...],
                            prefixes: tuple[bytes, ...]) -> bytes:
    """The field-by-field pass of ``normalise_message_python`` over LF-ended ``text``
    (no leading "From " line), without its shortcut."""
    head, sep, body = text.partition(b"\n\n")
    kept: list[bytes] = []
    dropping = False
    for line in head.split(b"\n"):
        if line[:1] in (b" ", b"\t"):  # a continuation line goes with its field
            if not dropping:
                kept.append(line)
            continue
        if b":" in line:
            name = line.split(b":", 1)[0].strip().lower()
            dropping = name in fields or name.startswith(prefixes)
        else:
            dropping = False
        if not dropping:
            kept.append(line)
    return (b"\n".join(kept) + sep + body).rstrip(b"\n") + b"\n"


def normalise_message_python(raw: bytes, fields: tuple[bytes, ...],
                             prefixes: tuple[bytes, ...]) -> bytes:
    """``normalise_message`` in Python."""
    text = raw.replace(b"\r\n", b"\n")
    if text.startswith(b"From "):
        text = text.partition(b"\n")[2]
    if text.startswith(b"\n"):  # no header section at all (e.g. a TSV text)
        return text.rstrip(b"\n") + b"\n"
    end = text.find(b"\n\n")
    end = len(text) if end < 0 else end
    may_drop_first, may_drop = _may_drop(fields, prefixes)
    if may_drop_first.match(text, 0, end) is None and may_drop.search(text, 0, end) is None:
        return text.rstrip(b"\n") + b"\n"  # no field to drop: what the pass gives
    return normalise_fields_python(text, fields, prefixes)


def normalise_message(raw: bytes, fields: tuple[bytes, ...], prefixes: tuple[bytes, ...]
                      ) -> bytes:
    """``raw`` without a leading mbox "From " line, with CRLF as LF, without the header
    fields named in ``fields`` or whose name starts with one of ``prefixes`` (lower-case
    ASCII; a name is what precedes a line's first ':', stripped and lower-cased as
    bytes), with their continuation lines, and with its line ends at the end made one
    (``textnb.models.ledger.normalise``). In C the header section is walked once with memchr,
    where Python splits it into lines and each field's name into a new bytes: work the
    calling process does while the workers count
    (docs/design/parsing-speed.md#the-ledgers-normalisation)."""
    if _speedups is None:
        return normalise_message_python(raw, fields, prefixes)
    return _speedups.normalise_message(raw, fields, prefixes)


def plain_fields_python(raw: bytes, fields: re.Pattern, field: re.Pattern
                        ) -> tuple[int, list[tuple[str, str]]] | None:
    """``plain_fields`` in Python: ``fields`` (``parse._PLAIN_FIELDS``) matched at the start
    of ``raw``, then ``field`` (``parse._PLAIN_FIELD``) found in what it matched, decoded as
    the standard library's parser decodes (a byte >= 0x80 as a surrogate escape)."""
    match = fields.match(raw)
    if match is None:
        return None
    header = raw[:match.end()].decode("ascii", "surrogateescape")
    return match.end(), [(name, value.rstrip("\r\n")) for name, value in field.findall(header)]


def plain_fields(raw: bytes, fields: re.Pattern, field: re.Pattern
                 ) -> tuple[int, list[tuple[str, str]]] | None:
    """The header section of a message whose fields have the common shape
    (``parse._plain_message``): where it ends, and each field's name and value (the value
    from its first line's text after leading blanks, with its continuation lines, less
    the last line end); None when its first line is no such field.

    In C the section is read once, a line at a time, where the two patterns each walk
    it (SpamAssassin's single-part messages carry 1,817 bytes of header on average;
    docs/design/parsing-speed.md#the-lean-parse-of-a-plain-message).
    tests/test_speedups.py holds the two equal on generated header sections and on
    every message of the public corpora; tests/test_mail.py holds ``_plain_message`` to
    the standard library's parser."""
    if _speedups is None:
        return plain_fields_python(raw, fields, field)
    return _speedups.plain_fields(raw)


def find_hostnames(text: str, pattern: re.Pattern) -> list[str]:
    """``pattern.findall(text)``, where ``pattern`` is ``tokenize._HOSTNAME_LOWER`` and
    ``text`` lower-cased: in C for ASCII text. The pattern's labels each end at a ".",
    so its backtracking only gives up whole labels, which the C loop does in order
    (tests/test_speedups.py holds the two equal on generated text and on every ASCII
    header value of SpamAssassin and Enron-Spam; a value with more than 128 labels in a
    row goes to the pattern). Received fields were a fifth of tokenising
    SpamAssassin's training split (26,014 of them, 155 characters on average), most of
    it these two patterns (docs/design/tokenizer-speed.md#header-values)."""
    if _speedups is not None:
        found = _speedups.find_hostnames(text)
        if found is not None:
            return found
    return pattern.findall(text)


def find_ipv4(text: str, pattern: re.Pattern) -> list[tuple[str, str, str, str]]:
    """``pattern.findall(text)``, where ``pattern`` is ``tokenize._IPV4``: in C for ASCII
    text (as ``find_hostnames``)."""
    if _speedups is not None:
        found = _speedups.find_ipv4(text)
        if found is not None:
            return found
    return pattern.findall(text)
