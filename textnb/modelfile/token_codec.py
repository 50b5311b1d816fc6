"""The vocabulary's codec: its tokens as the JSON list ``vocabulary.json`` holds, written a
chunk at a time and read back without a str a token."""

from __future__ import annotations

import json

import numpy as np

from .._c import speedups
from ..features.token_store import TokenStore
from .checks import loads_json


def write_json_list(fh, tokens: TokenStore) -> None:
    """``json.dumps(list(tokens))``'s bytes (ASCII), written a chunk of tokens at a time
    (``TokenStore.json_items``): the JSON text of five million tokens (~100 MB) never
    exists at once (``write_model``)."""
    fh.write(b"[")
    for i, piece in enumerate(tokens.json_items()):
        fh.write(b", " + piece if i else piece)
    fh.write(b"]")


def read_json_list(data: bytes) -> TokenStore:
    """``TokenStore(json.loads(data))`` for the bytes ``write_json_list`` writes, without
    a str a token: the writer's shape, ``["a", "b", ...]`` in ASCII (json.dumps escapes
    everything else), is cut at its quotes with NumPy, and only the tokens that hold an
    escape (a backslash) are decoded by ``json.loads``. Bytes of any other shape (other
    spacing, raw UTF-8: still JSON) go through ``json.loads`` whole.

    One scratch array serves every byte-wide test: each new 10 MB array costs
    its page faults in a process that has just started.
    """
    # In C, where it was built (speedups.read_json_items): about half the time of the
    # NumPy cut (docs/design/startup.md#the-load-beside-spacys-import).
    read = speedups.read_json_items(data)
    if read is not None:
        return TokenStore.from_utf8(*read)
    a = np.frombuffer(data, dtype=np.uint8)
    scratch = np.empty(a.size, dtype=bool)
    cut = _json_strings(data, a, scratch)
    if cut is None:
        return TokenStore(loads_json(data, "vocabulary.json"))
    opens, closes = cut  # each string's opening and closing quote
    backslashes = np.flatnonzero(np.equal(a, 0x5C, out=scratch))
    keep = scratch  # the strings' bytes: not the brackets, quotes, ", "
    keep.fill(True)
    keep[[0, -1]] = False
    for at in (opens, closes, closes[:-1] + 1, closes[:-1] + 2):
        keep[at] = False
    text = a[keep]
    lengths = closes - opens - 1
    owner = np.searchsorted(closes, backslashes)  # the string of each backslash
    escaped = owner[np.flatnonzero(np.diff(owner, prepend=-1))].tolist()
    if escaped:  # each such token's escaped text in ``text`` replaced by its UTF-8 bytes
        first, last = opens[escaped].tolist(), (closes[escaped] + 1).tolist()
        decoded = json.loads(b"[" + b", ".join(map(data.__getitem__, map(slice, first, last)))
                             + b"]")
        ends = np.cumsum(lengths)
        starts, stops = (ends - lengths)[escaped].tolist(), ends[escaped].tolist()
        utf8 = [token.encode("utf-8", "surrogatepass") for token in decoded]  # TokenStore's
        spliced, done, view = bytearray(), 0, memoryview(text)
        for start, stop, token in zip(starts, stops, utf8):
            spliced += view[done:start]
            spliced += token
            done = stop
        spliced += view[done:]
        text = spliced
        lengths[escaped] = list(map(len, utf8))
    return TokenStore.from_utf8(text, np.cumsum(lengths))


def _json_strings(data: bytes, a: np.ndarray, scratch: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray] | None:
    """Where each string of ``data`` (``a``: its bytes as uint8; ``scratch``: a bool array
    as long) opens and closes (its quotes' offsets), when ``data`` is exactly
    ``["...", "...", ...]`` in ASCII without control characters; else None.

    A quote is a string's own (not an escaped one) when an even run of backslashes, or
    none, comes before it."""
    if len(data) < 4 or not (data.startswith(b'["') and data.endswith(b'"]')
                             and data.isascii()):
        return None
    if np.less(a, 0x20, out=scratch).any():  # JSON strings hold no raw control characters
        return None
    quotes = np.flatnonzero(np.equal(a, 0x22, out=scratch))
    after = np.flatnonzero(a[quotes - 1] == 0x5C)  # quotes after a backslash (not the first)
    if after.size:
        odd = a[quotes[after] - 2] != 0x5C  # a run of one backslash: an escaped quote
        for k in np.flatnonzero(~odd).tolist():  # longer runs (rare): count them
            end = start = int(quotes[after[k]]) - 1
            while data[start] == 0x5C:
                start -= 1
            odd[k] = (end - start) % 2 == 1
        own = np.ones(quotes.size, dtype=bool)
        own[after[odd]] = False
        quotes = quotes[own]
    if quotes.size % 2:
        return None
    opens, closes = quotes[0::2], quotes[1::2]
    gaps = closes[:-1]
    if not (opens[0] == 1 and closes[-1] == len(data) - 2 and (opens[1:] - gaps == 3).all()
            and (a[gaps + 1] == 0x2C).all() and (a[gaps + 2] == 0x20).all()):
        return None
    return opens, closes
