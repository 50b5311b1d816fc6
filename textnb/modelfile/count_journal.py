"""Writes proportional to the change: a journal of count updates beside the model file.

Rewriting the whole model file is most of the time of a ``textnb retrain`` or ``textnb
forget`` run of a few messages (the table is in docs/retraining.md#speed, from
bench/retrain_time.py). So each run appends one *record* to ``MODEL.delta`` beside
``MODEL``: what it changed, as a patch of the counts
(the changed columns' count deltas, the new tokens in column order, the class
counts) and of the ledger (entries set or removed, the column history). Loading a
model (``store.load``) reads the file, then applies the records made for it, in
order: the model is exactly the one the runs left in memory, bit for bit
(tests/test_delta.py). When the journal outgrows ``COMPACT_FRACTION`` of the model
file, the run rewrites the file whole instead (atomically: ``store.save``) and removes
the journal; ``textnb compact`` does that on demand.

Format (no pickle, nothing that runs code): a header line naming the model file the
records apply to, ``TNBD1 base <SHA-256 of the file's bytes>``, then records, each
``TNBD1 <length> <SHA-256 of the payload>\\n<payload>\\n`` where the payload is
zlib-compressed JSON. After an append the model file's mtime is advanced, so that a
resident scorer watching the file reloads it, journal included, before it serves or
writes again. (The resident scorer's journal, textnb.delivery.scorer_journal, frames its
records the same way, textnb.modelfile.journal_frames; it holds raw messages to learn,
this one holds their effect, so loading needs no tokenising; docs/model-file.md#the-journals.)

Crash safety. A record is appended with one ``write`` and fsync'd while the model's
lock is held, before the run reports success. A crash mid-append leaves a record cut
short or failing its checksum: loading stops before it (that run never reported
success) and the next run cuts it off before appending. A rewrite (``store.save``,
whoever calls it: retrain, ``train``, ``merge``, ``import``, ``compact``) renames the
new file into place and then removes the journal; a crash in between leaves a journal
whose header names the old file, which loading ignores (the new file already holds its
records, or replaced them on purpose). The resident scorer writes through
``store.atomic_write`` after loading file and journal, so its file likewise holds the
records, and the journal it leaves names a file that is gone.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import write_error
from ..models.ledger import LABELS
from .checks import INFLATION_ALLOWANCE, MAX_INFLATION, loads_json
from .journal_frames import frame, frames

__all__ = ["COMPACT_FRACTION", "Journal", "JournalState", "Snapshot", "apply", "diff",
           "journal_path", "replay"]

MAGIC = b"TNBD1"
# Rewrite the model file once the journal would exceed this fraction of it. Replaying
# costs more per byte than loading the file, so a long journal slows every load, while
# each rewrite costs more than a load: at 5 % a load pays at most about 40 % more and
# one-message runs rewrite the file about once in 100 (docs/retraining.md#speed).
COMPACT_FRACTION = 0.05


def journal_path(model_path: str | os.PathLike) -> Path:
    model_path = Path(model_path)
    return model_path.with_name(model_path.name + ".delta")


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


# -- the journal file --------------------------------------------------------------------


@dataclass
class JournalState:
    """What loading found: the model file's SHA-256, the journal's records that apply to
    it and the offset just past the last of them (``valid_end``), and its total size."""

    base_sha256: str
    base_size: int = 0
    records: int = 0
    valid_end: int = 0
    size: int = 0


class Journal:
    """``MODEL.delta``: the patches the model file does not hold yet."""

    def __init__(self, model_path: str | os.PathLike):
        self.path = journal_path(model_path)

    def read(self, base_sha256: str) -> tuple[list[dict], JournalState]:
        """The complete patches made for the model file with this SHA-256, in order.
        A journal made for another file (stale) gives none; reading stops at the first
        record cut short or failing its checksum (a run that never reported success), or
        inflating past the model file's bound (``_inflated``)."""
        state = JournalState(base_sha256)
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return [], state
        state.size = len(data)
        header = MAGIC + b" base " + base_sha256.encode() + b"\n"
        if not data.startswith(header):
            return [], state
        patches, at = [], len(header)
        for _, payload, end in frames(data, MAGIC, 0, at):
            try:
                patches.append(loads_json(_inflated(payload), "a journal record"))
            except (zlib.error, ValueError):
                break
            at = end
        state.records, state.valid_end = len(patches), at
        return patches, state

    @staticmethod
    def encode(patch: dict) -> bytes:
        return zlib.compress(json.dumps(patch, separators=(",", ":")).encode(), 6)

    def append(self, state: JournalState, payload: bytes) -> int:
        """Append one encoded patch (after cutting off anything past ``state.valid_end``:
        a stale journal or a record cut short) and fsync it. RETURNS the journal's size.
        A failed write (a full disk) is cut off again and raised as a WriteError naming
        the journal; the model is then as it was."""
        header = MAGIC + b" base " + state.base_sha256.encode() + b"\n"
        fresh = state.valid_end == 0
        keep = 0 if fresh else state.valid_end
        data = (header if fresh else b"") + frame(MAGIC, [], payload)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            with os.fdopen(fd, "r+b") as fh:
                try:
                    fh.truncate(keep)
                    fh.seek(keep)
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                except OSError:
                    fh.truncate(keep)  # no partial record: the journal says what it said
                    raise
                size = keep + len(data)
        except OSError as exc:
            if fresh:
                self.path.unlink(missing_ok=True)
            raise write_error(self.path, exc) from exc
        if fresh:  # make the new file's name durable
            _fsync_folder(self.path.parent)
        state.valid_end, state.size, state.records = size, size, state.records + 1
        return size

    def remove(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            return
        _fsync_folder(self.path.parent)


def _inflated(payload: bytes) -> bytes:
    """A record's payload inflated, within the model file's bound on inflating
    (``MAX_INFLATION`` times its size, plus ``INFLATION_ALLOWANCE``: textnb.modelfile.checks);
    zlib.error when it is cut short or would inflate past that (a crafted record)."""
    inflater = zlib.decompressobj()
    data = inflater.decompress(payload, MAX_INFLATION * len(payload) + INFLATION_ALLOWANCE)
    if not inflater.eof:
        raise zlib.error("the record is cut short or inflates past its bound")
    return data


def _touch(model_path: Path) -> None:
    """Advance the model file's mtime (strictly, even within one clock tick): whoever
    watches the file for changes (``textnb serve`` reloads on a new inode, size or mtime,
    and checks again before it writes its own updates) then loads the journal too."""
    st = os.stat(model_path)
    os.utime(model_path, ns=(st.st_atime_ns, max(time.time_ns(), st.st_mtime_ns + 1000)))


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def replay(spam_filter, model_path: str | os.PathLike, data: bytes) -> JournalState:
    """Apply the journal's patches for the model file whose bytes are ``data``."""
    patches, state = Journal(model_path).read(hashlib.sha256(data).hexdigest())
    state.base_size = len(data)
    apply(spam_filter, patches)
    return state


def append_update(spam_filter, model_path: str | os.PathLike, before: Snapshot | None,
                  state: JournalState | None) -> bool:
    """Append the update since ``before`` to the journal, if it can go there (call it
    holding the model's lock). RETURNS (bool): False, and nothing written, when there is
    no file yet, the vocabulary shrank, or the journal would outgrow ``COMPACT_FRACTION``
    of the file: the caller rewrites the file instead (``store.commit``)."""
    if before is None or state is None or not state.base_size:
        return False
    journal = Journal(model_path)
    try:
        payload = journal.encode(diff(before, spam_filter))
    except ValueError:  # pruned: columns went
        return False
    if state.valid_end + len(payload) + 100 > COMPACT_FRACTION * state.base_size:
        return False
    journal.append(state, payload)
    _touch(Path(model_path))
    return True
