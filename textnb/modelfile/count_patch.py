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

__all__ = ["COMPACT_FRACTION", "Snapshot", "apply", "check", "decode", "diff", "encode",
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
    learned = dict(spam_filter.n_learned)
    for patch in patches:
        check(patch, n, learned)
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


def check(patch, n_columns: int, learned: dict[str, int]) -> None:
    """ValueError unless ``patch`` is one :func:`diff` can make for a filter of ``n_columns``
    columns that has learned ``learned`` messages per class (updated to the patch's).

    A patch is read from a file that may be damaged or crafted, and its numbers decide what
    loading allocates: every list must be as long as the columns it changes, every column
    it names must exist once it is applied (a column named in the ledger's history of
    250,000,000 would otherwise allocate gigabytes from a few bytes), and the messages it
    says were learned must be the ones its class counts add (``n_learned`` is reported by
    ``textnb info`` and the training-health warnings).
    """
    def need(ok: bool, what: str) -> None:
        if not ok:
            raise ValueError(f"a journal patch {what}")

    need(isinstance(patch, dict) and _KEYS <= patch.keys(), "lacks a field")
    start, end = patch["n_columns"], patch["n_columns_after"]
    need(_whole(start) and start == n_columns,
         f"starts from {start!r} columns, the model has {n_columns} at that point")
    tokens = patch["tokens"]
    need(isinstance(tokens, list) and all(isinstance(t, str) for t in tokens),
         "has tokens that are not strings")
    need(_whole(end) and start <= end <= start + len(tokens),
         f"ends at {end!r} columns from {start} with {len(tokens)} tokens")
    fc, df = patch["feature_count"], patch["doc_freq"]
    need(isinstance(fc, list) and len(fc) == 2
         and all(isinstance(row, list) and len(row) == len(tokens) for row in fc),
         "has feature counts that do not match its tokens")
    need(isinstance(df, list) and len(df) == len(tokens),
         "has message counts that do not match its tokens")
    need(all(_number(x) for x in (*fc[0], *fc[1], *df)), "has a count that is not a number")
    cc = patch["class_count"]
    need(isinstance(cc, list) and len(cc) == 2 and all(_number(x) and x == int(x) for x in cc),
         "has class counts that are not two whole numbers")
    said = patch["n_learned"]
    need(isinstance(said, dict) and set(said) == set(LABELS)
         and all(_whole(v) for v in said.values()), "has no message count per class")
    for code, label in enumerate(LABELS):
        learned[label] = learned.get(label, 0) + int(cc[code])
        need(said[label] == learned[label],
             f"says {said[label]} {label} messages were learned where its class counts make "
             f"{learned[label]}")
    history = patch["history"]
    need(isinstance(history, list) and len(history) == 3
         and all(isinstance(h, list) and len(h) == len(history[0]) for h in history)
         and all(_whole(c) and c < end for c in history[0])
         and all(_whole(v) for v in (*history[1], *history[2])),
         f"names ledger columns that do not exist (the model has {end} after it)")
    need(isinstance(patch["removed"], list) and isinstance(patch["set"], list)
         and all(isinstance(e, list) and len(e) == 4 for e in patch["set"]),
         "has ledger entries of the wrong shape")
    state = patch["state"]
    need(isinstance(state, list) and len(state) == 2 and all(_whole(v) for v in state),
         "has a ledger state that is not two whole numbers")


_KEYS = {"n_columns", "n_columns_after", "tokens", "class_count", "feature_count", "doc_freq",
         "n_learned", "removed", "set", "history", "state"}


def _whole(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 2**53


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and abs(x) <= 2**53


# -- encoding ---------------------------------------------------------------------------


def encode(patch: dict | list) -> bytes:
    """A patch (or any JSON value: the shared store's records too) as a record's payload."""
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
