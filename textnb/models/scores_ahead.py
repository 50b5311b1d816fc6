"""Exact scores of the items ahead, for a pass that scores each item and sometimes learns it.

The thick and error regimes (``textnb.modelfile.lifecycle``) and cross-validation's
thick fits (``textnb.evaluation.cross_validation.fit_rows_in_order``) score every
message with the model of the messages learned before it, and learn one in several.
Scoring one message alone costs mostly the call, the same few hundred NumPy steps
whatever its length; a block of messages shares them
(docs/performance.md#scoring-ahead-in-a-thick-pass). So the next messages are scored
together under the model as it stands and those scores are read until the model
changes; then the rest are scored again. Every score read is the one the model of
the moment gives, so a pass learns exactly what one scored message at a time would
(tests/test_scores_ahead.py, tests/test_train_regime.py).

How many to score at once is a bet on when the model next changes: too few and the
call's cost is paid often, too many and scores are thrown away. With a share ``p`` of
scored items changing the model, runs between changes are about geometric, and a
block of ``b`` costs ``CALL_ROWS + b`` rows' worth for ``(1 - (1 - p)^b) / p`` scores
read on average; the block taken is the one of least cost per score read, ``p`` a
running share of the last ``RATE_WINDOW`` or so items.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache

__all__ = ["CALL_ROWS", "MAX_BLOCK", "ScoresAhead", "block_size"]

# What one scoring call costs apart from its rows, in rows: about 4 on SpamAssassin (740 us
# a message scored alone, 159 us in blocks of 64: ``python -m bench.scoring_ahead``) and
# about 5 on trec07p-early's first 15,084 messages (719 against 123 us); the pass takes
# within 5% of its best anywhere from 2.5 to 10 (docs/performance.md#scoring-ahead-in-a-thick-pass).
CALL_ROWS = 5.0
# A block of 64 already shares the call's cost to a tenth of a row's; more only
# risks throwing more scores away (and holds more messages in memory).
MAX_BLOCK = 64
# How many items the share of changes is averaged over: short enough to follow a
# pass from its first messages (an empty model learns every one) to a mature model's
# one in ten or fewer.
RATE_WINDOW = 32


# The share of changes is rounded to this many steps, so that one table of blocks serves.
RATE_STEPS = 1024


@lru_cache(maxsize=None)
def _best_block(rate_steps: int) -> int:
    p = rate_steps / RATE_STEPS
    if p >= 1.0:
        return 1
    if p <= 0.0:  # nothing changes the model: every block is read to its end
        return MAX_BLOCK
    cost = [(CALL_ROWS + b) * p / (1.0 - (1.0 - p) ** b) for b in range(1, MAX_BLOCK + 1)]
    return 1 + min(range(MAX_BLOCK), key=cost.__getitem__)


def block_size(change_rate: float) -> int:
    """The block of least expected cost per score read when a share ``change_rate`` of
    scored items changes the model (module docstring); 1 when every one does."""
    return _best_block(min(RATE_STEPS, max(0, math.ceil(change_rate * RATE_STEPS))))


class ScoresAhead:
    """Scores of items by position, made a block at a time and kept until the model changes.

    score_span (callable): ``score_span(start, stop)`` returns the scores of the items at
        positions ``start`` up to ``stop`` under the model as it stands now, fewer when
        the items run out first (at least the one at ``start``).
    """

    def __init__(self, score_span: Callable[[int, int], Sequence[float | None]]):
        self._score_span = score_span
        self._start = 0
        self._scores: list[float | None] = []
        self._asked = -1
        self.change_rate = 1.0  # an empty model learns its first messages
        self.calls = 0

    def at(self, position: int) -> float | None:
        """The score of the item at ``position`` under the model as it stands."""
        offset = position - self._start
        if not 0 <= offset < len(self._scores):
            self._scores = list(self._score_span(position,
                                                 position + block_size(self.change_rate)))
            self._start, offset = position, 0
            self.calls += 1
        self._asked = position
        return self._scores[offset]

    def done(self, position: int, changed: bool) -> None:
        """The item at ``position`` is handled; ``changed``: it changed the model (learned
        or moved), so the scores kept for the items after it are stale."""
        if self._asked == position:
            self.change_rate += (float(changed) - self.change_rate) / RATE_WINDOW
        if changed:
            self._scores = []
