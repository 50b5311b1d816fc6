"""The local engine: worker processes on this machine (``--jobs N``, default every core).

The calling process reads the input (``textnb.mail.sources``: plan, then read), cuts it
into batches (``spamfilter.learning_batches``: ``BATCH_SIZE`` messages, the last ones
smaller) and, per batch, normalises each message and takes its ledger digest (in C,
``speedups.normalise_message``: a small part of the work, since the calling process
shares two cores with the workers), decides from the ledger what to learn
(``textnb.modelfile.lifecycle.Lifecycle.sort``, as ``Lifecycle.learn`` decides batch by
batch), and hands the messages to learn to a worker. The worker parses, tokenises and
counts them (``counting.count_work``) and sends back counts and tokens hashes, never
token lists. The calling process adds the counts in batch order and completes the
ledger (``Lifecycle.enter``).

Scoring: the worker gets a batch's raw bytes and sends back their log-odds.

Identity: whatever ``jobs``, the same batches are planned the same way and their
counts added in the same order, so the model file and the scores are those of
one process, byte for byte (tests/test_speed_invariance.py).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice

import numpy as np

from .. import spamfilter
from ..labels import LABEL_CODES
from ..mail.sources import RawMessage, SourceFile, plan_labelled, plan_unlabelled, read_planned
from ..modelfile.lifecycle import DEFAULT_MARGIN, LearnReport, Lifecycle
from ..models.ledger import normalise
from ..spamfilter import SpamFilter
from .counting import Counted, Work, count_into, count_work
from .workers import Workers, available_cores, collecting_less

__all__ = ["LocalEngine", "ScoredBatch"]


@dataclass
class ScoredBatch:
    """Log-odds of consecutive messages: ``sources``, ``labels`` (None when unlabelled),
    and with ``score(..., count_learned=True)`` how many of them the model learned."""

    sources: list[str]
    labels: list[str | None]
    log_odds: np.ndarray
    learned: int = 0


# Messages a worker process scores at a time (one process: ``spamfilter.BATCH_SIZE``). Scoring
# merges nothing, so smaller batches cost little and leave less of a tail, when one worker has the
# last batch and the other none. Training stays at ``spamfilter.BATCH_SIZE``: its batches are
# merged in this process, and smaller ones gained nothing there
# (docs/design/counting-and-scoring.md#the-pool-and-its-batches).
SCORE_BATCH = 128


def _batches(messages: Iterable[RawMessage], size: int | None = None
             ) -> Iterator[list[RawMessage]]:
    iterator = iter(messages)
    while batch := list(islice(iterator, size or spamfilter.BATCH_SIZE)):
        yield batch


def _score_task(spam_filter: SpamFilter, raws: list[bytes]) -> np.ndarray:
    return spam_filter.log_odds(raws)


def _tokens_task(spam_filter: SpamFilter, raws: list[bytes]) -> list[list[str]]:
    """The tokens of each message as the ledger reads it (its normalised bytes)."""
    return [spam_filter.tokens(normalise(raw)) for raw in raws]


def _raw_tokens_task(spam_filter: SpamFilter, raws: list[bytes]) -> list[list[str]]:
    """The tokens of each message's bytes as given (``textnb tune``'s matrix)."""
    return [spam_filter.tokens(raw) for raw in raws]


def _portable(spam_filter: SpamFilter):
    """What a spawned worker gets (``Workers``' ``portable``): a fitted filter's model
    file bytes, or an unfitted one's settings."""
    if hasattr(spam_filter.model, "class_count_"):
        from ..modelfile.store import dumps

        return _from_model_bytes, dumps(spam_filter)
    return SpamFilter, spam_filter.config


def _from_model_bytes(data: bytes) -> SpamFilter:
    from ..modelfile.store import loads

    return loads(data)


@dataclass
class _Planned:
    """One batch, planned: the work for a worker and what to record when it is done."""

    work: Work
    n_read: int
    added: list[bytes] = field(default_factory=list)  # digests awaiting their tokens hash


class _Planner:
    """A batch's work for a worker, decided by ``Lifecycle.sort`` from digests alone (no
    tokens), as ``Lifecycle.learn`` decides it batch by batch.

    The ledger is updated at once (labels), so the next batch is planned against it;
    an added message's tokens hash is filled in when its worker answers.
    """

    def __init__(self, lifecycle: Lifecycle, report: LearnReport):
        self.lifecycle, self.ledger, self.report = lifecycle, lifecycle.spam_filter.ledger, report
        self.pending: set[bytes] = set()  # added, tokens hash not known yet

    def plan(self, batch: Sequence[RawMessage]) -> _Planned:
        ledger, report = self.ledger, self.report
        adds, moves = self.lifecycle.sort(batch, report)
        work = Work([], [], [], [], [])
        for seen, old in [(s, None) for s in adds] + moves:
            work.norms.append(seen.norm)
            work.labels.append(LABEL_CODES[seen.label])
            work.sources.append(seen.source)
            work.old.append(-1 if old is None else LABEL_CODES[old])
            work.old_hash.append(None if old is None or seen.digest in self.pending
                                 else ledger.tokens_hash(seen.digest))
        for seen in adds:
            self.lifecycle.enter(seen.digest, seen.label, 0)  # its hash when the worker answers
            self.pending.add(seen.digest)
            report.learned[seen.label] += 1
        for seen, _ in moves:
            self.lifecycle.enter(seen.digest, seen.label)
            report.moved[seen.label] += 1
        return _Planned(work, len(batch), [seen.digest for seen in adds])

    def finish(self, planned: _Planned, hashes: list[int]) -> None:
        for d, h in zip(planned.added, hashes):  # the adds come first in the work
            self.lifecycle.enter(d, self.ledger.label(d), h)
            self.pending.discard(d)


class LocalEngine:
    """Parse, tokenise, count and score in ``jobs`` processes on this machine.

    jobs (int | None): worker processes; None: every core this process may use.
    """

    name = "local"

    def __init__(self, jobs: int | None = None):
        self.jobs = available_cores() if jobs is None else int(jobs)
        if self.jobs < 1:
            raise ValueError(f"jobs={jobs}: give at least 1 process")
        self.last_workers: Workers | None = None  # the last run's (tests: pools started)

    def check(self, regime: str = "all") -> None:
        """Every regime runs here (those that score as they learn, in one process)."""

    def plan_labelled(self, spam=(), ham=(), index=(), tsv=()) -> list[SourceFile]:
        return plan_labelled(spam, ham, index, tsv)

    def plan_unlabelled(self, sources=(), index=(), tsv=()) -> list[SourceFile]:
        return plan_unlabelled(sources, index, tsv)

    def run_info(self) -> dict:
        return {"engine": self.name, "jobs": self.jobs}

    def learn(self, spam_filter: SpamFilter, files: Sequence[SourceFile], regime: str = "all",
              margin: float | None = None, progress: Callable[[int], None] | None = None):
        """Add the planned labelled files to ``spam_filter``'s counts and ledger.

        RETURNS (lifecycle.LearnReport). Regimes other than 'all' score each message with
        the model all earlier ones made, so this process scores and learns them one at a
        time, while the workers tokenise the messages ahead of it, in order
        (``_thick_ahead``).
        """
        messages = read_planned(files)
        margin = DEFAULT_MARGIN if margin is None else margin
        lifecycle = Lifecycle(spam_filter)
        if regime != "all":
            if self.jobs == 1:
                return lifecycle.learn(messages, regime, margin, progress)
            return self._thick_ahead(lifecycle, messages, regime, margin, progress)
        report = LearnReport(regime=regime, margin=margin)
        planner = _Planner(lifecycle, report)
        planned: deque[_Planned] = deque()

        def works() -> Iterator[Work]:
            for batch in spamfilter.learning_batches(messages):
                planned.append(planner.plan(batch))
                yield planned[-1].work

        if self.jobs == 1:  # one process: each batch counted here, then added to the model
            with collecting_less():
                for work in works():
                    batch = planned.popleft()
                    planner.finish(batch, count_into(spam_filter, work, spam_filter))
                    if progress:
                        progress(batch.n_read)
            return report
        spam_filter.tokenizer.spacy  # loaded once, before the workers fork
        self.last_workers = workers = Workers(self.jobs, spam_filter, count_work, _portable)
        with collecting_less():
            for counted in workers.map(works()):
                done: Counted = counted
                batch = planned.popleft()
                done.plus.add_to(spam_filter)  # additions first: counts never dip below 0
                done.minus.add_to(spam_filter, weight=-1.0)
                planner.finish(batch, done.hashes)
                if progress:
                    progress(batch.n_read)
        return report

    def _thick_ahead(self, lifecycle: Lifecycle, messages: Iterable[RawMessage], regime: str,
                     margin: float, progress: Callable[[int], None] | None):
        """``lifecycle.learn`` one message at a time, each message's tokens made ahead by
        the workers. Tokenising is most of a message's cost and does not depend on the
        model; scoring and learning do, and stay here, in order, so the model is the one
        process's whatever ``jobs`` (tests/test_train_regime.py)."""
        ahead: dict[int, list[str]] = {}

        def in_order() -> Iterator[RawMessage]:
            for message, tokens in self.tokenised(lifecycle.spam_filter, messages,
                                                  normalised=True):
                ahead[id(message)] = tokens
                yield message
                ahead.pop(id(message), None)

        with collecting_less():
            return lifecycle.learn(in_order(), regime, margin, progress,
                                   tokens_for=lambda message: ahead.get(id(message)))

    def tokenised(self, spam_filter: SpamFilter, messages: Iterable[RawMessage],
                  normalised: bool = False) -> Iterator[tuple[RawMessage, list[str]]]:
        """Each message with its tokens, in order, the tokens made by the workers.

        normalised (bool): tokens of the bytes the ledger reads (``normalise``), as
            training learns them; False: of the bytes as given, as ``tune``'s matrix has
            them.
        """
        batches: deque[list[RawMessage]] = deque()

        def raws() -> Iterator[list[bytes]]:
            for batch in _batches(messages, SCORE_BATCH):
                batches.append(batch)
                yield [m.raw for m in batch]

        if self.jobs > 1:
            spam_filter.tokenizer.spacy  # loaded once, before the workers fork
        self.last_workers = workers = Workers(
            self.jobs, spam_filter, _tokens_task if normalised else _raw_tokens_task, _portable)
        for token_lists in workers.map(raws()):
            yield from zip(batches.popleft(), token_lists)

    def score(self, spam_filter: SpamFilter, files: Sequence[SourceFile],
              count_learned: bool = False) -> Iterator[ScoredBatch]:
        """Log-odds of the planned files' messages, batch by batch, in order; with
        ``count_learned``, how many of each batch the model's ledger holds."""
        pending: deque[list[RawMessage]] = deque()

        def raws() -> Iterator[list[bytes]]:
            size = min(SCORE_BATCH, spamfilter.BATCH_SIZE) if self.jobs > 1 else None
            for batch in _batches(read_planned(files), size):
                pending.append(batch)
                yield [m.raw for m in batch]

        if self.jobs > 1:
            spam_filter.tokenizer.spacy
        self.last_workers = workers = Workers(self.jobs, spam_filter, _score_task, _portable)
        with collecting_less():
            for scores in workers.map(raws()):
                batch = pending.popleft()
                learned = (spam_filter.ledger.holding(m.raw for m in batch) if count_learned
                           else 0)
                yield ScoredBatch([m.source for m in batch], [m.label for m in batch], scores,
                                  learned)
