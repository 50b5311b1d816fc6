"""Retrain and forget: update a model file with labelled mail through its ledger.

Plain functions that return data and print nothing; ``textnb.cli.retrain`` and
``textnb.cli.forget`` wrap them. What an update does to the counts and the ledger
(learn, relabel, forget; the regimes) is ``textnb.modelfile.lifecycle.Lifecycle``'s:
``fit``, ``learn_messages`` and ``forget_messages`` here are its acts
as functions of a filter (the Python API, as ``textnb train`` and the benchmarks use it).

Files: the model is loaded, updated and written back while holding the model's
lock (``textnb.modelfile.lock``), so two retrains at once run one after the other and
neither loses its update. The update is written as one count patch appended to the
model's journal (``textnb.modelfile.journal``, ``textnb.modelfile.count_patch``: writes
proportional to the change), or, when the journal has grown past 5 % of the file
(``count_patch.COMPACT_FRACTION``), by rewriting it atomically (``store.atomic_write``: temp file, fsync, rename); ``kill -9`` at any moment leaves
the model as before the run or as after it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..config import FilterConfig
from ..errors import SourceError
from ..mail.sources import (RawMessage, iter_index, iter_labelled, iter_messages, iter_tsv,
                            plan_labelled, read_planned)
from ..spamfilter import SpamFilter
from . import count_patch, store
from .lifecycle import (DEFAULT_MARGIN, REGIMES, LearnReport, LedgerMismatchError, Lifecycle,
                        check_regime)
from .lock import model_lock, remove_stale_temp_files

__all__ = ["REGIMES", "DEFAULT_MARGIN", "LearnReport", "LedgerMismatchError", "fit",
           "learn_messages", "forget_messages", "retrain", "forget"]


def fit(spam_filter: SpamFilter, messages: Iterable[RawMessage],
        progress: Callable[[int], None] | None = None) -> LearnReport:
    """Train from scratch through the ledger (``textnb train``): ``Lifecycle.train``."""
    return Lifecycle(spam_filter).train(messages, progress)


def learn_messages(spam_filter: SpamFilter, messages: Iterable[RawMessage], regime: str = "all",
                   margin: float = DEFAULT_MARGIN, progress: Callable[[int], None] | None = None,
                   on_score: Callable[[RawMessage, float | None], None] | None = None
                   ) -> LearnReport:
    """Update a filter's counts and ledger with labelled messages, in order:
    ``Lifecycle.learn`` (regime, margin, on_score as there). RETURNS (LearnReport)."""
    return Lifecycle(spam_filter).learn(messages, regime, margin, progress, on_score)


def forget_messages(spam_filter: SpamFilter, messages: Iterable[RawMessage],
                    progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Remove messages' counts and ledger entries: ``Lifecycle.forget``."""
    return Lifecycle(spam_filter).forget(messages, progress)


# -- model files ------------------------------------------------------------------


def _load_or_new(model_path: Path, create: bool):
    """The filter, the journal's state (None for a new model) and a snapshot to diff."""
    if create and not model_path.exists():
        return SpamFilter(FilterConfig()), None, None
    spam_filter, state = store.load_for_update(model_path)
    return spam_filter, state, count_patch.Snapshot.of(spam_filter)


def _summary(spam_filter: SpamFilter, model_path: Path, seconds: float, written: bool,
             how: str | None = None) -> dict[str, Any]:
    # how: 'journal' (a patch appended to MODEL.journal) or 'rewritten' (store.commit)
    return {"model": str(model_path), "written": written, "write": how,
            "seconds": round(seconds, 3),
            "messages": dict(spam_filter.n_learned),
            "ledger": spam_filter.ledger.summary(spam_filter.n_learned),
            "vocabulary_size": len(spam_filter.vocabulary)}


def retrain(model_path: str | Path, spam: Sequence[str] = (), ham: Sequence[str] = (),
            index: Sequence[str] = (), tsv: Sequence[str] = (), regime: str = "all",
            margin: float = DEFAULT_MARGIN, progress: Callable[[int], None] | None = None,
            lock_timeout: float | None = None, create: bool = True, engine=None
            ) -> dict[str, Any]:
    """Add labelled messages to the model at ``model_path`` (locked, atomic).

    spam, ham, index, tsv (Sequence[str]): sources as for ``textnb train``.
    regime, margin: which new messages are learned (module docstring).
    lock_timeout (float | None): seconds to wait for another update of the same
        model; None waits until it is done.
    create (bool): start a new model with the default settings when none exists.
    engine (textnb.engines engine | None): where the messages are read, parsed and
        counted (None: this process, ``learn_messages``); its ``run_info()`` joins the result.
    RETURNS (dict): the LearnReport's fields, ``created``, ``written`` (False when
        nothing changed: the file is not touched), the model's messages per class,
        its ledger summary, ``seconds``.
    """
    check_regime(regime, margin)
    model_path = Path(model_path)
    if not (spam or ham or index or tsv):
        raise SourceError("no messages to retrain on; pass --spam SRC and/or --ham SRC, "
                          "--maildir DIR, or --index FILE")
    if engine is not None:
        engine.check(regime)
    ordered = None
    if regime != "all" and spam and ham:
        # Scored in order, so learned in order: the piles' messages as they arrived
        # (``textnb.mail.arrival``; None for an mbox pile: then as given).
        from ..mail.arrival import arrival_order

        ordered = arrival_order(plan_labelled(spam, ham, index, tsv))
    if engine is None:
        messages = (read_planned(ordered) if ordered is not None  # checks every path now
                    else iter_labelled(spam=spam, ham=ham, index=index, tsv=tsv))
    else:
        files = (ordered if ordered is not None  # checks every path now
                 else engine.plan_labelled(spam, ham, index, tsv))
    with model_lock(model_path, timeout=lock_timeout):
        start = time.perf_counter()
        remove_stale_temp_files(model_path)
        if engine is None or engine.name == "local":  # this machine tokenises: spaCy too
            from ..text.tokenize import import_spacy_modules
            from .load_in_background import beside

            spam_filter, state, before = beside(lambda: _load_or_new(model_path, create),
                                                import_spacy_modules)
        else:
            spam_filter, state, before = _load_or_new(model_path, create)
        if engine is None:
            report = learn_messages(spam_filter, messages, regime, margin, progress)
        elif spam_filter.ledger.pruned_at:
            # The engines move relabelled messages' whole token lists; after a prune only
            # the tokens the model still holds may move (Lifecycle.held_tokens), as
            # learn_messages does.
            engine = None
            messages = (read_planned(ordered) if ordered is not None
                        else iter_labelled(spam=spam, ham=ham, index=index, tsv=tsv))
            report = learn_messages(spam_filter, messages, regime, margin, progress)
        else:
            report = engine.learn(spam_filter, files, regime, margin, progress)
        how = store.commit(spam_filter, model_path, before, state) if report.changed else None
        seconds = time.perf_counter() - start
    return {**asdict(report), "created": state is None and report.changed,
            **_summary(spam_filter, model_path, seconds, report.changed, how),
            **(engine.run_info() if engine is not None else {})}


def forget(model_path: str | Path, sources: Sequence[str] = (), index: Sequence[str] = (),
           tsv: Sequence[str] = (), progress: Callable[[int], None] | None = None,
           lock_timeout: float | None = None) -> dict[str, Any]:
    """Remove messages from the model at ``model_path`` (locked, atomic).

    RETURNS (dict): ``forgotten`` per class, ``not_found``, ``read``, ``written``, the
        model's messages per class, its ledger summary, ``seconds``.
    """
    model_path = Path(model_path)
    if not (sources or index or tsv):
        raise SourceError("no messages to forget; pass the files, folders or mboxes that "
                          "hold them (or --index FILE)")
    iterators = ([iter_messages(s) for s in sources] + [iter_index(p) for p in index]
                 + [iter_tsv(p) for p in tsv])
    messages = (m for it in iterators for m in it)
    with model_lock(model_path, timeout=lock_timeout):
        start = time.perf_counter()
        remove_stale_temp_files(model_path)
        spam_filter, state = store.load_for_update(model_path)
        before = count_patch.Snapshot.of(spam_filter)
        result = forget_messages(spam_filter, messages, progress)
        written = any(result["forgotten"].values())
        how = store.commit(spam_filter, model_path, before, state) if written else None
        seconds = time.perf_counter() - start
    return {**result, **_summary(spam_filter, model_path, seconds, written, how)}
