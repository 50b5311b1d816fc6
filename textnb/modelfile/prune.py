"""A bound on a model's size: drop the rare tokens that have not been seen for a while.

A model keeps every token it ever learned. Most are seen once: after 22,588 messages
(SpamAssassin, then Enron 1-3) 61 % of the 1.32 million tokens are in one learned
message only, and the file grows by about 4 MB per 10,000 messages with word pairs
(bench/model_growth.py; the table is in docs/model-file.md#a-bound-on-size).
:func:`prune` drops every token held by at most ``max_df`` learned messages unless
one of the last ``keep_last`` learned messages holds it (a token that just arrived
has had no time to recur), as SpamAssassin's token expiry and bogofilter's
``bogoutil -a`` do by age and count.

It is lossy on purpose, and what it loses is recorded: the ledger keeps, per column,
the serial from which the column counts (``textnb.models.ledger.Ledger``), so ``forget`` and
relabelling afterwards remove or move exactly the counts the model still holds for a
message, and report the messages some of whose tokens were dropped
(``textnb.modelfile.lifecycle.Lifecycle.held_tokens``). A dropped token that comes back
in new mail starts a new column that counts from then on.

Off by default: its accuracy cost is measured in docs/model-file.md#a-bound-on-size
(``PRUNE_MAX_DF`` and ``PRUNE_KEEP_LAST`` are the bound measured there, what
``textnb compact --prune`` applies).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..spamfilter import SpamFilter

__all__ = ["PRUNE_MAX_DF", "PRUNE_KEEP_LAST", "PruneReport", "compact", "prune"]

# docs/model-file.md#a-bound-on-size, chronological split and online (bench/model_growth.py):
# df <= 1 outside the last 2,000 learned messages keeps 58 % (SpamAssassin) and 48 %
# (Enron) of the tokens and 58-62 % of the file, for (1-AUC)% +0.005 to +0.012 (off by
# default for that); df <= 2 costs more accuracy for a little more saving; without the
# window Enron's chronological (1-AUC)% goes from 0.154 to 0.197.
PRUNE_MAX_DF = 1
PRUNE_KEEP_LAST = 2000


@dataclass
class PruneReport:
    """What a prune dropped: tokens before and after; ``window_start``, the serial from
    which learned messages protect their tokens; ``older_messages``, ledger messages
    learned before it (the only ones that can have lost tokens)."""

    tokens_before: int
    tokens_after: int
    max_df: int
    keep_last: int
    window_start: int
    older_messages: int

    @property
    def dropped(self) -> int:
        return self.tokens_before - self.tokens_after


def prune(spam_filter: SpamFilter, max_df: int = PRUNE_MAX_DF,
          keep_last: int = PRUNE_KEEP_LAST) -> tuple[SpamFilter, PruneReport]:
    """The filter without the tokens held by at most ``max_df`` learned messages, bar
    those the last ``keep_last`` learned messages hold; with the report.

    A model without a learning history (no ledger serials: trained by
    ``SpamFilter.fit``) counts every token as just seen, so nothing is dropped.
    RETURNS (SpamFilter, PruneReport): a new filter; ``spam_filter`` is left as it was.
    """
    if max_df < 0 or keep_last < 0:
        raise ValueError(f"max_df ({max_df}) and keep_last ({keep_last}) must be >= 0")
    counts = spam_filter.counts()
    ledger = spam_filter.ledger
    n = len(counts["tokens"])
    ledger.cover(n)
    window_start = ledger.next_serial - keep_last
    keep = (counts["doc_freq"] > max_df) | (ledger.last[:n] >= window_start)
    older = sum(1 for d in ledger if ledger.serial(d) < window_start)
    report = PruneReport(n, int(keep.sum()), max_df, keep_last, max(window_start, 0), older)
    new_ledger = _copy_ledger(ledger)
    new_ledger.keep_columns(keep)
    pruned = SpamFilter.from_counts(
        spam_filter.config, [t for t, k in zip(counts["tokens"], keep.tolist()) if k],
        counts["class_count"], counts["feature_count"][:, keep], counts["doc_freq"][keep],
        n_learned=dict(spam_filter.n_learned), ledger=new_ledger,
        threshold=spam_filter.threshold, calibration=spam_filter.calibration,
        numeric=getattr(spam_filter, "numeric", None))
    return pruned, report


def _copy_ledger(ledger):
    from ..models.ledger import Ledger

    state = np.array([ledger.next_serial, ledger.pruned_at], np.int64)
    arrays = ledger.to_arrays()
    return Ledger.from_arrays(arrays["ledger_digest"], arrays["ledger_label"],
                              arrays["ledger_tokens"], arrays["ledger_serial"],
                              ledger.born.copy(), ledger.last.copy(), state,
                              arrays["ledger_hash_version"])


def compact(model_path, prune_tokens: bool = False, max_df: int = PRUNE_MAX_DF,
            keep_last: int = PRUNE_KEEP_LAST, lock_timeout: float | None = None) -> dict:
    """``textnb compact``: fold the model's journal (``MODEL.journal``) into the file and,
    with ``prune_tokens``, apply the size bound; locked, written atomically.

    RETURNS (dict): ``journal_records`` folded, ``file_bytes_before`` (file and
        journal) and ``file_bytes_after``, the prune's ``tokens_before``/``tokens_after``
        (equal without a prune), ``seconds``.
    """
    import time
    from pathlib import Path

    from . import store
    from .lock import model_lock, remove_stale_temp_files

    model_path = Path(model_path)
    with model_lock(model_path, timeout=lock_timeout):
        start = time.perf_counter()
        remove_stale_temp_files(model_path)
        spam_filter, state = store.load_for_update(model_path)
        before = model_path.stat().st_size + state.size
        n = len(spam_filter.vocabulary)
        report = None
        if prune_tokens:
            spam_filter, report = prune(spam_filter, max_df, keep_last)
        store.commit(spam_filter, model_path, None, state, rewrite=True)
        return {"model": str(model_path), "journal_records": state.records,
                "file_bytes_before": before, "file_bytes_after": model_path.stat().st_size,
                "tokens_before": n, "tokens_after": len(spam_filter.vocabulary),
                "pruned": report is not None, "max_df": max_df if report else None,
                "keep_last": keep_last if report else None,
                "older_messages": report.older_messages if report else None,
                "seconds": round(time.perf_counter() - start, 3)}
