"""The commands as plain functions: they take paths and options, return data, print nothing.

``textnb.cli`` wraps each in a typer command; other code and tests call these directly.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .config import FilterConfig
from .errors import SourceError
from .pipeline import ScoredMessage, SpamFilter
from .sources import RawMessage, iter_index, iter_labelled, iter_messages, iter_tsv
from . import store


def labelled_messages(spam: Sequence[str] = (), ham: Sequence[str] = (),
                      index: Sequence[str] = (), tsv: Sequence[str] = ()) -> Iterator[RawMessage]:
    """Every labelled message from the given sources, lazily."""
    if not (spam or ham or index or tsv):
        raise SourceError("no training messages given; pass --spam SRC and --ham SRC, "
                          "or --index FILE (lines 'spam PATH' / 'ham PATH')")
    return iter_labelled(spam=spam, ham=ham, index=index, tsv=tsv)


def unlabelled_messages(sources: Sequence[str] = (), index: Sequence[str] = (),
                        tsv: Sequence[str] = ()) -> Iterator[RawMessage]:
    """Messages to score: plain sources, index files (labels kept for evaluation), TSV files."""
    if not (sources or index or tsv):
        sources = ["-"]
    for src in sources:
        yield from iter_messages(src)
    for path in index:
        yield from iter_index(path)
    for path in tsv:
        yield from iter_tsv(path)


def train(model_path: Path, config: FilterConfig, spam: Sequence[str] = (),
          ham: Sequence[str] = (), index: Sequence[str] = (), tsv: Sequence[str] = (),
          progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Train a new model from scratch and save it atomically. Returns a summary."""
    start = time.perf_counter()
    spam_filter = SpamFilter(config)
    spam_filter.fit(labelled_messages(spam, ham, index, tsv), progress=progress)
    elapsed = time.perf_counter() - start
    store.save(spam_filter, model_path)
    summary = spam_filter.summary()
    summary.update(model=str(model_path), seconds=round(elapsed, 3),
                   size_bytes=Path(model_path).stat().st_size)
    return summary


def classify(model_path: Path, sources: Sequence[str] = (), index: Sequence[str] = (),
             tsv: Sequence[str] = (), cost_ratio: float | None = None) -> Iterator[ScoredMessage]:
    """Score and decide each message, lazily."""
    spam_filter = store.load(model_path)
    yield from spam_filter.classify(unlabelled_messages(sources, index, tsv), cost_ratio)


def info(model_path: Path) -> dict[str, Any]:
    """What a model was trained on, its settings and its size."""
    spam_filter = store.load(model_path)
    summary = spam_filter.summary()
    summary.update(model=str(model_path), size_bytes=Path(model_path).stat().st_size,
                   format_version=store.FORMAT_VERSION)
    return summary


def explain(model_path: Path, source: str, k: int = 15, cost_ratio: float | None = None):
    """Explanations of every message in a source."""
    spam_filter = store.load(model_path)
    for message in iter_messages(source):
        yield spam_filter.explain(message, k=k, cost_ratio=cost_ratio)


def evaluate(model_path: Path, index: Sequence[str] = (), spam: Sequence[str] = (),
             ham: Sequence[str] = (), tsv: Sequence[str] = (), cost_ratio: float | None = None
             ) -> dict[str, Any]:
    """The field's metrics on held-out labelled messages."""
    from .metrics import summary as metric_summary

    spam_filter = store.load(model_path)
    is_spam: list[bool] = []

    def raws():  # streams the messages; only their labels and scores are kept
        for message in labelled_messages(spam, ham, index, tsv):
            is_spam.append(message.label == "spam")
            yield message.raw

    scores = spam_filter.log_odds(raws())
    y = np.array(is_spam, dtype=bool)
    threshold = spam_filter.cost_model(cost_ratio).log_threshold
    result = metric_summary(y, scores, threshold)
    result.update(n_messages=len(y), n_spam=int(y.sum()), n_ham=int((~y).sum()),
                  threshold=threshold)
    return result
