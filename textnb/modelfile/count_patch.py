"""Count patches: what a ``textnb retrain`` or ``textnb forget`` run changed, as data.

Rewriting the whole model file is most of the time of a run of a few messages (the
table is in docs/retraining.md#speed, from bench/retrain_time.py). So a run appends
its update to the model's journal (``textnb.modelfile.journal``) as a *patch*: the
changed columns' count deltas, the new tokens in column order, the class counts, and
the ledger's entries set or removed with its column history (``diff``). Loading
applies the patches after the file, in order (``apply``): the model is exactly the one
the runs left in memory, bit for bit (tests/test_delta.py). When the journal would
outgrow ``COMPACT_FRACTION`` of the model file, the run rewrites the file whole instead
(atomically: ``store.save``); ``textnb compact`` does that on demand.

A patch is zlib-compressed JSON (no pickle, nothing that runs code), inflated within
the model file's bound (``decode``). An earlier textnb kept its patches in a journal of
their own, ``MODEL.delta``, whose header named the model file they applied to by its
SHA-256; ``read_legacy_delta`` reads it for a file of that textnb, once: the next write
folds it in and removes it.
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..models.ledger import LABELS
from .checks import INFLATION_ALLOWANCE, MAX_INFLATION, loads_json
from .journal_frames import frames

__all__ = ["COMPACT_FRACTION", "Snapshot", "apply", "decode", "diff", "encode",
           "legacy_delta_path", "read_legacy_delta"]

# Rewrite the model file once the journal would exceed this fraction of it. Replaying
# costs more per byte than loading the file, so a long journal slows every load, while
# each rewrite costs more than a load: at 5 % a load pays at most about 40 % more and
# one-message runs rewrite the file about once in 100 (docs/retraining.md#speed).
COMPACT_FRACTION = 0.05


# -- a patch between two states of one filter -------------------------------------------


@dataclass
class Snapshot:
    """What a patch is computed against: copies of the counts, ledger and history."""

    n_columns: int
    class_count: np.ndarray
    feature_count: np.ndarray
    doc_freq: np.ndarray
    entries: dict
    born: np.ndarray
    last: np.ndarray

    @classmethod
    def of(cls, spam_filter) -> "Snapshot":
        model, ledger = spam_filter.model, spam_filter.ledger
        fitted = hasattr(model, "class_count_")
        return cls(len(spam_filter.vocabulary),
                   model.class_count_.copy() if fitted else np.zeros(2),
                   model.feature_count_.copy() if fitted else np.zeros((2, 0)),
                   spam_filter.doc_freq_.copy(), dict(ledger.entries()),
                   ledger.born.copy(), ledger.last.copy())


def diff(before: Snapshot, spam_filter) -> dict:
    """The patch that turns the ``before`` state into ``spam_filter``'s (JSON-able).

    Only learning and forgetting are patches: the vocabulary must have grown at the end
    (a prune removes columns and needs a rewrite: ValueError)."""
    tokens = spam_filter.vocabulary.tokens_
    n0, n1 = before.n_columns, len(tokens)
    if n1 < n0 or before.feature_count.shape[1] != n0:
        raise ValueError("the vocabulary shrank: a pruned model is rewritten, not patched")
    c = spam_filter.counts()
    fc, df = c["feature_count"], c["doc_freq"]
    changed = np.flatnonzero((fc[:, :n0] != before.feature_count).any(axis=0)
                             | (df[:n0] != before.doc_freq))
    columns = np.concatenate([changed, np.arange(n0, n1)])
    old_fc = np.zeros((2, len(columns)))
    old_fc[:, :len(changed)] = before.feature_count[:, changed]
    old_df = np.zeros(len(columns))
    old_df[:len(changed)] = before.doc_freq[changed]
    ledger = spam_filter.ledger
    b0 = before.born.shape[0]
    k = ledger.born.shape[0]
    moved = np.flatnonzero((ledger.born[:b0] != before.born) | (ledger.last[:b0] != before.last))
    history = np.concatenate([moved, np.arange(b0, k)])
    after = ledger.entries()
    return {
        "n_columns": n0,
        "n_columns_after": n1,
        "tokens": tokens.take(columns),
        "class_count": (c["class_count"] - before.class_count).tolist(),
        "feature_count": (fc[:, columns] - old_fc).tolist(),
        "doc_freq": (df[columns] - old_df).tolist(),
        "n_learned": dict(spam_filter.n_learned),
        "removed": [d.hex() for d in before.entries if d not in after],
        "set": [[d.hex(), *e] for d, e in after.items() if before.entries.get(d) != e],
        "history": [history.tolist(), ledger.born[history].tolist(),
                    ledger.last[history].tolist()],
        "state": [ledger.next_serial, ledger.pruned_at],
    }


def apply(spam_filter, patches: list[dict]) -> None:
    """Apply :func:`diff` patches, in order, to the filter the first was computed from
    (ValueError when the filter is not in the state a patch starts from).

    The count deltas of all the patches are summed per token first (``np.bincount``) and
    added in one step, so replaying many small records costs one pass over the counts:
    the sums are of whole numbers, exact in any order, and new tokens keep their order
    of first sight.
    """
    if not patches:
        return
    n = len(spam_filter.vocabulary)
    ledger = spam_filter.ledger
    tokens: list[str] = []
    class_count = np.zeros(2)
    for patch in patches:
        if patch["n_columns"] != n:
            raise ValueError(f"a patch starts from {patch['n_columns']} columns, the model "
                             f"has {n} at that point")
        n = patch["n_columns_after"]
        tokens.extend(patch["tokens"])
        class_count += patch["class_count"]
        for digest in patch["removed"]:
            ledger.remove(bytes.fromhex(digest))
        for digest, code, tokens_hash, serial in patch["set"]:
            ledger.record(bytes.fromhex(digest), LABELS[code], tokens_hash, serial)
    fc = np.concatenate([np.asarray(p["feature_count"], dtype=np.float64).reshape(2, -1)
                         for p in patches], axis=1)
    df = np.concatenate([np.asarray(p["doc_freq"], dtype=np.float64) for p in patches])
    position = {t: i for i, t in enumerate(dict.fromkeys(tokens))}  # first sight
    at = np.fromiter(map(position.__getitem__, tokens), np.int64, count=len(tokens))
    k = len(position)
    spam_filter.add_counts(list(position), class_count,
                           np.vstack([np.bincount(at, fc[0], k), np.bincount(at, fc[1], k)]),
                           np.bincount(at, df, k))
    if len(spam_filter.vocabulary) != n:
        raise ValueError(f"the patches end at {n} columns, the model has "
                         f"{len(spam_filter.vocabulary)}")
    spam_filter.n_learned = {k: int(v) for k, v in patches[-1]["n_learned"].items()}
    history = [p["history"] for p in patches]
    top = max((max(h[0]) + 1 for h in history if h[0]), default=0)
    ledger.cover(top)
    for columns, born, last in history:  # in order: a later patch wins
        ledger.born[columns], ledger.last[columns] = born, last
    ledger.next_serial, ledger.pruned_at = (int(v) for v in patches[-1]["state"])


# -- encoding ---------------------------------------------------------------------------


def encode(patch: dict) -> bytes:
    """A patch as a journal record's payload."""
    return zlib.compress(json.dumps(patch, separators=(",", ":")).encode(), 6)


def decode(payload: bytes) -> dict:
    """The patch of a payload; ValueError when it is cut short, inflates past its bound
    or is not JSON (a crafted or damaged record)."""
    try:
        return loads_json(_inflated(payload), "a journal record")
    except zlib.error as exc:
        raise ValueError(str(exc)) from None


def _inflated(payload: bytes) -> bytes:
    """A record's payload inflated, within the model file's bound on inflating
    (``MAX_INFLATION`` times its size, plus ``INFLATION_ALLOWANCE``: textnb.modelfile.checks);
    zlib.error when it is cut short or would inflate past that (a crafted record)."""
    inflater = zlib.decompressobj()
    data = inflater.decompress(payload, MAX_INFLATION * len(payload) + INFLATION_ALLOWANCE)
    if not inflater.eof:
        raise zlib.error("the record is cut short or inflates past its bound")
    return data


# -- an earlier textnb's journal of patches --------------------------------------------

LEGACY_MAGIC = b"TNBD1"


def legacy_delta_path(model_path: str | os.PathLike) -> Path:
    model_path = Path(model_path)
    return model_path.with_name(model_path.name + ".delta")


def read_legacy_delta(model_path: str | os.PathLike, data: bytes) -> list[dict]:
    """The patches an earlier textnb's ``MODEL.delta`` holds for the model file whose bytes
    are ``data`` (none when it names another file: it was folded into this one); reading
    stops at the first record cut short or failing its checksum."""
    try:
        journal = legacy_delta_path(model_path).read_bytes()
    except FileNotFoundError:
        return []
    header = LEGACY_MAGIC + b" base " + hashlib.sha256(data).hexdigest().encode() + b"\n"
    if not journal.startswith(header):
        return []
    patches = []
    for _, payload, _ in frames(journal, LEGACY_MAGIC, 0, len(header)):
        try:
            patches.append(decode(payload))
        except ValueError:
            break
    return patches
