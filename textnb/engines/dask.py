"""The Dask engine: the engine calls on a Dask cluster (``textnb.distributed`` does the work).

Dask is an optional extra, imported only when a cluster is connected to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from .. import distributed
from ..pipeline import SpamFilter
from ..sources import SourceFile
from .local import ScoredBatch

__all__ = ["DaskEngine"]


class DaskEngine:
    """Count and score on a Dask cluster.

    scheduler (str | Client | None): see ``textnb.distributed.connect``.
    n_partitions (int | None): default: ``distributed``'s, from the cluster's threads.
    """

    name = "dask"

    def __init__(self, scheduler=None, n_partitions: int | None = None):
        self.scheduler, self.n_partitions = scheduler, n_partitions
        self._run: dict = {}

    def check(self, regime: str = "all") -> None:
        distributed.check_regime(regime)

    def plan_labelled(self, spam=(), ham=(), index=(), tsv=()) -> list[SourceFile]:
        return distributed.labelled_files(spam, ham, index, tsv)

    def plan_unlabelled(self, sources=(), index=(), tsv=()) -> list[SourceFile]:
        return distributed.unlabelled_files(sources, index, tsv)

    def run_info(self) -> dict:
        return {"engine": self.name, **self._run}

    def learn(self, spam_filter: SpamFilter, files: Sequence[SourceFile], regime: str = "all",
              margin: float | None = None, progress: Callable[[int], None] | None = None):
        self.check(regime)
        with distributed.connect(self.scheduler) as client:
            report, self._run = distributed.learn_files(client, spam_filter, list(files),
                                                        self.n_partitions, progress)
        return report

    def score(self, spam_filter: SpamFilter, files: Sequence[SourceFile]
              ) -> Iterator[ScoredBatch]:
        with distributed.connect(self.scheduler) as client:
            for sources, labels, scores in distributed.score_files(client, spam_filter, files,
                                                                   self.n_partitions):
                yield ScoredBatch(sources, labels, scores)
