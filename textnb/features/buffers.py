"""Arrays that grow along their last axis with room to spare.

The vocabulary only grows, and so do the arrays with a column per token (the model's
counts and mask, document frequencies, the ledger's column history). Copying a whole
array every batch that adds tokens is O(vocabulary) per batch and, at five million
tokens, tens of MB held twice; doubling the room when it runs out makes growth
amortised O(1) per column.
"""

from __future__ import annotations

import numpy as np

__all__ = ["with_room"]


def with_room(buffer: np.ndarray, used: int, n: int, fill=0) -> np.ndarray:
    """``buffer`` itself when its last axis holds ``n`` entries; otherwise a new array of
    the same dtype with room for max(n, twice as many), the first ``used`` entries of
    that axis copied and the rest ``fill``."""
    room = buffer.shape[-1]
    if n <= room:
        return buffer
    shape = buffer.shape[:-1] + (max(n, 2 * room),)
    # np.zeros takes its pages zeroed from the system as they are first touched (calloc);
    # np.full writes every byte now, the spare room too, which a growing buffer may
    # never reach.
    grown = (np.zeros(shape, dtype=buffer.dtype) if fill == 0
             else np.full(shape, fill, dtype=buffer.dtype))
    grown[..., :used] = buffer[..., :used]
    return grown
