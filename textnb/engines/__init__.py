"""Where the work runs: the engines behind ``textnb.commands``.

Every engine offers the same calls, so a third one is one module:

- ``plan_labelled(spam, ham, index, tsv)`` / ``plan_unlabelled(sources, index, tsv)``:
  the input as a list of ``sources.SourceFile`` (directories listed, index files
  read, no message read);
- ``learn(spam_filter, files, regime, margin, progress) -> lifecycle.LearnReport``: count
  the files' messages into the filter's sufficient statistics and ledger (workers
  parse, tokenise and count; only counts come back, see ``counting``);
- ``score(spam_filter, files, count_learned) -> Iterator[ScoredBatch]``: log-odds in
  message order (and, when asked, how many of the messages the model's ledger holds);
- ``check(regime)`` (refuse what it cannot do, before any work) and ``run_info()``.

Engines: ``local`` (``LocalEngine(jobs)``: processes on this machine, every core by
default) and ``dask`` (``DaskEngine(scheduler, n_partitions)``: a Dask cluster,
``textnb.engines.dask``). Results do not depend on the engine or on how many
processes run it.

``LocalEngine`` and ``ScoredBatch`` are imported on first use (PEP 562, as in
``textnb/__init__.py``): ``textnb.engines.parallel_tokenize`` uses this package's process pool
(``workers``, which imports no other textnb module) from inside ``SpamFilter``, and
importing the pool must not import the engines, which import the filter.
"""

from __future__ import annotations

from .workers import available_cores

__all__ = ["ENGINES", "LocalEngine", "ScoredBatch", "available_cores", "make_engine"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .local import LocalEngine, ScoredBatch

ENGINES = ("local", "dask")


def make_engine(name: str = "local", jobs: int | None = None, scheduler=None,
                n_partitions: int | None = None):
    """The engine called ``name``.

    jobs (int | None): local only: worker processes (None: every core).
    scheduler, n_partitions: dask only (see ``textnb.engines.dask.connect``).
    RAISES ValueError for an unknown engine or an option the engine does not take.
    """
    if name == "local":
        if scheduler is not None or n_partitions is not None:
            raise ValueError("a scheduler and partitions go with the dask engine")
        from .local import LocalEngine

        return LocalEngine(jobs)
    if name == "dask":
        if jobs is not None:
            raise ValueError("jobs go with the local engine (a Dask cluster has its own "
                             "workers)")
        from .dask import DaskEngine

        return DaskEngine(scheduler, n_partitions)
    raise ValueError(f"'{name}' is not an engine; use {' or '.join(ENGINES)}")


def __getattr__(name: str):
    if name in ("LocalEngine", "ScoredBatch"):
        from . import local

        return getattr(local, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
