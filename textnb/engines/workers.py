"""An ordered map over worker processes, with at most a few tasks in flight.

``Workers(jobs, state, task).map(items)`` yields ``task(state, item)`` for each
item, in item order. With ``jobs == 1``, or when the items turn out to be only
one, everything runs in this process: no pool, nothing pickled. Otherwise
``jobs`` worker processes start at the second item, forked where the platform
allows it, so they inherit ``state`` (a filter with spaCy already loaded: a fork
costs milliseconds, a spaCy load about a second). Where fork is not available
they are spawned and get a portable copy of the state, made by the caller's
``portable`` (``engines.local``: a filter's model file bytes, or its configuration).
This module knows nothing of filters: it imports no other textnb module.

At most ``IN_FLIGHT_PER_JOB * jobs`` items are handed out before the first
result is taken back, so memory stays flat however long the input, and the
items may be produced lazily by code that depends on earlier items (the ledger
plan of batch k+1 depends on batch k's).
"""

from __future__ import annotations

import gc
import multiprocessing
import multiprocessing.pool
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from itertools import chain
from typing import Any

__all__ = ["BATCH_GC_THRESHOLD", "QuietPool", "Workers", "available_cores", "collecting_less",
           "start_pool"]

# Items handed out per worker before the oldest result is taken back. Results are taken
# in order, so a worker that finishes its items while another is still on an older one
# waits for it; with 2 (one item to work on, one waiting) a worker sat idle at the end of
# a train, when the last batches are small (``spamfilter.learning_batches``), and with 4 it
# did not (docs/design/counting-and-scoring.md#the-pool-and-its-batches). Each costs a
# batch's raw bytes.
IN_FLIGHT_PER_JOB = 4

_task: tuple[Callable, Any] | None = None  # per worker process: (task, state)


def available_cores() -> int:
    """The cores this process may run on (the default number of jobs)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class QuietPool(multiprocessing.pool.Pool):
    """``multiprocessing.pool.Pool`` whose worker handler does not wake while results
    arrive.

    The stock pool's worker handler (the thread that replaces a worker that exits)
    waits on the workers' sentinels, on its change notifier and on the results pipe.
    While a result is in that pipe and the result handler has not read all of it, the
    pipe stays readable, so the worker handler loops: it wakes, polls every worker
    (a ``waitpid`` each), waits, and wakes again at once, taking the GIL from the
    threads doing the work: thousands of times for a map of a few large results, where
    this pool's wakes once. Workers that send back a batch's counts (a few MB) are such
    a map (docs/design/counting-and-scoring.md#the-pool-and-its-batches). The model
    files are the same.

    It still wakes for all it acts on: a worker's exit (the workers' sentinels), and
    ``close``, ``terminate`` and the cache of pending tasks emptied (the change
    notifier, which each of those writes to). Should a Python release drop the
    ``_get_sentinels`` hook, this is the stock pool again (tests/test_engines.py
    checks the hook is there).
    """

    def _get_sentinels(self):
        return [self._change_notifier._reader]


def start_pool(context, processes: int, initializer: Callable, initargs: tuple):
    """A ``QuietPool(processes, initializer, initargs)`` in ``context``, whose workers'
    collectors run less often (``BATCH_GC_THRESHOLD``); a forked pool's workers start
    with the objects they inherit out of the garbage collector's sight (``gc.freeze``).

    A forked worker shares the calling process's memory until it writes to a page. A
    collection writes into the header of every object it traverses (a count it keeps
    there for the pass), so in a worker the collector's passes copied the inherited
    pages that hold objects: spaCy's and whatever else the calling process held. Frozen
    before the fork, those objects are never traversed there, which lowers the workers'
    memory and speeds a ``classify`` that forks with the model loaded
    (docs/design/memory.md#the-workers-memory). The calling process takes its objects
    back at once (``gc.unfreeze``) and keeps collecting them.

    A program that froze objects itself (a pre-forking server does) keeps its collector
    as it was: ``gc.unfreeze`` would take back its objects too, so nothing is frozen
    here then."""
    initargs = (initializer, *initargs)
    if context.get_start_method() != "fork" or gc.get_freeze_count():
        return QuietPool(processes, _start_collecting_less, initargs, context=context)
    gc.freeze()
    try:
        return QuietPool(processes, _start_collecting_less, initargs, context=context)
    finally:
        gc.unfreeze()


# A worker's collector, and the calling process's while it learns or scores batches
# (``collecting_less``), runs its youngest generation after this many more container
# objects are allocated than freed (CPython's default: 700). Batch work parses and
# tokenises message after message, and most of what that allocates is freed with its message, while
# what stays (the tokenizer's cache entries) is young at every pass, so the passes at the
# default threshold are work with little to free: at 50,000 they take a fraction of that CPU,
# with the same peak memory (docs/design/counting-and-scoring.md#the-pool-and-its-batches).
# Cyclic garbage, which only the collector frees, is rare in this work.
BATCH_GC_THRESHOLD = 50_000


def _start_collecting_less(initializer: Callable, *initargs) -> None:
    gc.set_threshold(BATCH_GC_THRESHOLD, *gc.get_threshold()[1:])
    initializer(*initargs)


@contextmanager
def collecting_less() -> Iterator[None]:
    """Inside the block, this process's collector runs its youngest generation every
    ``BATCH_GC_THRESHOLD`` net container allocations, as a worker's does; the thresholds
    it had are back after the block."""
    before = gc.get_threshold()
    gc.set_threshold(BATCH_GC_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _start_worker(task: Callable, state: Any, restore: Callable[[Any], Any] | None) -> None:
    global _task
    _task = (task, state if restore is None else restore(state))


def _run(item: Any) -> Any:
    task, state = _task
    return task(state, item)


class Workers:
    """Run ``task(state, item)`` over items in ``jobs`` processes, results in order.

    jobs (int): worker processes (1: this process alone).
    state: what every task gets (forked: shared as it is at the second item).
    task (callable): a module-level function (spawned workers import it by name).
    portable (callable | None): for spawned workers: ``portable(state) -> (restore, data)``,
        picklable ``data`` and a module-level ``restore`` that rebuilds the state from it
        in the worker; None: the state is pickled as it is.
    """

    def __init__(self, jobs: int, state: Any, task: Callable[[Any, Any], Any],
                 portable: Callable[[Any], tuple[Callable[[Any], Any], Any]] | None = None):
        if jobs < 1:
            raise ValueError(f"jobs={jobs}: give at least 1 process")
        self.jobs, self.state, self.task, self.portable = jobs, state, task, portable
        self.started = 0  # pools started (tests check that small inputs start none)

    def map(self, items: Iterable[Any]) -> Iterator[Any]:
        items = iter(items)
        first = next(items, None)
        if first is None:
            return
        second = next(items, None) if self.jobs > 1 else None
        if second is None:  # one process: here, in order
            yield self.task(self.state, first)
            for item in items:
                yield self.task(self.state, item)
            return
        pool = self._pool()
        pending: deque = deque()
        try:
            for item in chain([first, second], items):
                pending.append(pool.apply_async(_run, (item,)))
                if len(pending) >= IN_FLIGHT_PER_JOB * self.jobs:
                    yield pending.popleft().get()
            while pending:
                yield pending.popleft().get()
        except BaseException:  # an error, Ctrl-C, or the consumer stopped early
            pool.terminate()
            raise
        else:
            pool.close()
        finally:
            pool.join()

    def _pool(self):
        self.started += 1
        restore = None
        if "fork" in multiprocessing.get_all_start_methods():
            context, state = multiprocessing.get_context("fork"), self.state
        else:
            context, state = multiprocessing.get_context(), self.state
            if self.portable is not None:
                restore, state = self.portable(state)
        return start_pool(context, self.jobs, _start_worker, (self.task, state, restore))
