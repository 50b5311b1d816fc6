"""Parse and tokenise in several processes for ``SpamFilter.parallel(jobs)``; everything
else stays in one.

This is the library path for code that calls ``SpamFilter.fit`` or ``log_odds`` itself.
The commands and the CLI (``--jobs N``) use ``textnb.engines.local`` instead, where the
workers also count and score, and only counts or log-odds come back, so the calling
process is left far less to do (docs/design/counting-and-scoring.md#the-librarys-parallel-path).

A batch of raw messages is cut into ``jobs`` contiguous slices: the calling
process tokenises the first itself and ``jobs - 1`` worker processes the others,
and the token lists come back in message order. Workers return token lists, not
counts, so the vocabulary, the counts and the ledger are built by one process in
one order: a model trained with ``--jobs 4`` is the model trained with
``--jobs 1``, array for array (tests/test_speed_invariance.py).

Why token lists and not per-worker count matrices merged by the parent: the
ledger needs each message's token hash, and a batch's tokens pickle compactly
(pickle writes each distinct string object once, and the tokenizer's caches hand
out one object per distinct token). Only one batch is ever in flight, so memory
stays flat however long the mailbox.

The first batch is tokenised by the calling process alone, and only then are
the workers started: forked where the platform allows it, they start in
milliseconds with spaCy loaded and the tokenizer's caches as warm as the parent's.
Each process pays once for every distinct word it meets, so workers started cold
would repeat the parent's warm-up (12-20% more CPU for two processes than one on
SpamAssassin's training messages; started warm, none). An input of one batch never
starts them.
Where fork is not available they are spawned and build their own tokenizer from
the (picklable) configuration.

The calling process also does everything else (reading, the ledger, counting)
while the workers wait, so two processes are not twice as fast
(docs/design/counting-and-scoring.md#the-librarys-parallel-path).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from typing import Self

from ..config import TokenizerConfig
from ..mail.parse import MailLimits, parse_message
from ..text.tokenize import EmailTokenizer
from .workers import start_pool

__all__ = ["TokenWorkers"]

# The worker process's tokenizer and limits (set by _start_worker; one per process).
_worker: tuple[EmailTokenizer, MailLimits] | None = None


def _start_worker(tokenizer: EmailTokenizer | TokenizerConfig, limits: MailLimits) -> None:
    """Forked: the parent's tokenizer itself, caches and all. Spawned: a new one."""
    global _worker
    if isinstance(tokenizer, TokenizerConfig):
        tokenizer = EmailTokenizer(tokenizer)
    _worker = (tokenizer, limits)


def _token_lists(raws: list[bytes]) -> list[list[str]]:
    tokenizer, limits = _worker
    return [tokenizer(parse_message(raw, limits)) for raw in raws]


class TokenWorkers:
    """``jobs - 1`` worker processes that, with the calling process, tokenise batches.

    tokenizer (callable): the calling filter's tokenizer when asked (at the second batch:
        ``SpamFilter.fit`` replaces it after the workers are set up), and limits
        (MailLimits): the filter's, so a worker's tokens are the ones the filter makes.
    jobs (int): processes tokenising in all, the calling one included (>= 2).
    """

    def __init__(self, tokenizer: Callable[[], EmailTokenizer], limits: MailLimits, jobs: int):
        if jobs < 2:
            raise ValueError(f"jobs={jobs}: worker processes are for jobs >= 2")
        self.jobs = jobs
        self._tokenizer, self._limits = tokenizer, limits
        self._pool = None  # started by the second batch
        self._warm = False  # whether the calling process has tokenised the first batch

    def _start(self) -> None:
        if "fork" in multiprocessing.get_all_start_methods():
            context, state = multiprocessing.get_context("fork"), self._tokenizer()
        else:
            context, state = multiprocessing.get_context(), self._tokenizer().cfg
        self._pool = start_pool(context, self.jobs - 1, _start_worker, (state, self._limits))

    def token_lists(self, raws: Sequence[bytes], tokens: Callable[[bytes], list[str]]
                    ) -> list[list[str]]:
        """The token lists of ``raws`` in order; ``tokens`` tokenises the calling process's share."""
        raws = list(raws)
        if not self._warm or len(raws) < 2:
            self._warm = True  # the first batch warms the caches the workers will inherit
            return [tokens(raw) for raw in raws]
        if self._pool is None:
            self._start()
        size = -(-len(raws) // self.jobs)  # ceiling: the calling process takes the first slice
        slices = [raws[i:i + size] for i in range(size, len(raws), size)]
        pending = self._pool.map_async(_token_lists, slices, chunksize=1)
        out = [tokens(raw) for raw in raws[:size]]
        for part in pending.get():
            out.extend(part)
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool.join()

    def terminate(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        # On an error (or Ctrl-C) the workers may be mid-batch: stop them instead of waiting.
        if exc_type is None:
            self.close()
        else:
            self.terminate()
