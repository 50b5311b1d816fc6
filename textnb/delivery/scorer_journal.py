"""Learning through the resident scorer: a journal, so that an acknowledged update survives.

Writing the whole model file takes far longer than learning one message in memory
or appending it to a file with an fsync (docs/learning.md#the-scorers-journal), so the
scorer does not rewrite the model per request. Each update is, in this order:

1. appended to the model's journal (``MODEL.journal`` beside ``MODEL``) and fsync'd;
2. applied to the model in memory by the model's lifecycle
   (``textnb.modelfile.lifecycle.Lifecycle.update``), through the ledger exactly as
   ``textnb retrain`` and ``textnb forget`` apply it (new messages learned, repeats
   skipped, relabelled ones moved, forgotten ones removed);
3. acknowledged to the client.

The model file is rewritten (``store.atomic_write``: temp file, fsync, rename) at most
``flush_seconds`` after the first update it does not hold, and at shutdown (SIGTERM);
then the journal drops the records the new file holds. A scorer that starts finds the
journal and applies it to the file it loads before it serves.

What an acknowledgement means, then: the update is durable (in the journal) and
every later verdict of this scorer includes it; the model *file* holds it within
``flush_seconds`` plus one write, or after the next start of ``textnb serve`` if the
scorer was killed first. ``kill -9`` at any moment leaves the old file or the new one
(the rename is atomic) and a journal whose complete records are exactly the
acknowledged updates the file may lack, plus at most one whose client got no reply
for each client that was learning at that moment (the scorer's workers learn in turn).
Replaying is safe when the file already holds some of the records (a kill between
the rename and the journal's trim): each record sets the state of one message
(learned as spam, as ham, or absent), so applying it again changes nothing.

A record: ``TNBJ1 <LEARN|FORGET> <spam|ham|-> <length> <sha256 hex>\\n<length bytes>\\n``
(the framing ``MODEL.delta`` uses too: textnb.modelfile.journal_frames). A record cut short
by a crash, or whose checksum fails, ends the replay there (its client was never
answered). Why this journal holds messages and not count patches as ``MODEL.delta``
does: docs/model-file.md#the-journals.
"""

from __future__ import annotations

import copy
import logging
import os
import threading
import types
from dataclasses import dataclass
from pathlib import Path

from ..modelfile import store
from ..modelfile.journal_frames import frame, frames

__all__ = ["Journal", "Record", "journal_path", "snapshot_bytes"]

log = logging.getLogger("textnb.delivery.scorer_journal")

MAGIC = b"TNBJ1"


def journal_path(model_path: str | os.PathLike) -> Path:
    model_path = Path(model_path)
    return model_path.with_name(model_path.name + ".journal")


@dataclass(frozen=True)
class Record:
    """One acknowledged update: kind 'LEARN' or 'FORGET', label 'spam'/'ham' (LEARN)."""

    kind: str
    label: str | None
    raw: bytes

    def encode(self) -> bytes:
        return frame(MAGIC, [self.kind.encode(), (self.label or "-").encode()], self.raw)


class Journal:
    """The append-only file of updates the model file may not hold yet.

    path (Path): the journal file; created (mode 0600: it holds mail) on first append.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._fd: int | None = None
        self._lock = threading.Lock()

    def size(self) -> int:
        try:
            return os.stat(self.path).st_size
        except FileNotFoundError:
            return 0

    def append(self, record: Record) -> int:
        """Write the record and fsync it; RETURNS the journal's size after it."""
        data = record.encode()
        with self._lock:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            written = os.write(self._fd, data)  # one write: a kill cannot split it
            if written != len(data):  # a full disk: cut the partial record off again
                size = os.fstat(self._fd).st_size
                os.ftruncate(self._fd, size - written)
                raise OSError(28, f"short write to the journal {self.path} (disk full?)")
            os.fsync(self._fd)
            return os.fstat(self._fd).st_size

    def read(self, start: int = 0) -> list[tuple[Record, int]]:
        """The complete records from ``start``, each with the offset just past it."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        out, at = [], start
        for (kind, label), raw, end in frames(data, MAGIC, 2, start):
            out.append((Record(kind.decode(), None if label == b"-" else label.decode(), raw),
                        end))
            at = end
        if at < len(data):
            log.warning("journal %s: %d bytes after offset %d are not a complete record (an "
                        "update cut short by a crash, never acknowledged); ignored",
                        self.path, len(data) - at, at)
        return out

    def drop_through(self, offset: int) -> None:
        """Keep only the bytes after ``offset`` (records the model file does not hold)."""
        with self._lock:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                return
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            if offset >= len(data):
                self.path.unlink()
                return
            store.atomic_write(self.path, data[offset:])
            os.chmod(self.path, 0o600)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def snapshot_bytes(spam_filter):
    """A callable that returns the model file's bytes as the filter is *now*.

    Copies what ``store.dumps`` reads (counts, vocabulary, ledger: a few milliseconds
    for a SpamAssassin-sized model) so that the slow compression can run outside the
    lock while learning goes on.
    """
    model = spam_filter.model
    ledger = spam_filter.ledger.copy()  # entries and column history: learning goes on
    frozen = types.SimpleNamespace(
        model=types.SimpleNamespace(class_count_=model.class_count_.copy(),
                                    feature_count_=model.feature_count_.copy()),
        vocabulary=types.SimpleNamespace(tokens_=spam_filter.vocabulary.tokens_.copy()),
        doc_freq_=spam_filter.doc_freq_.copy(), ledger=ledger,
        numeric=copy.deepcopy(getattr(spam_filter, "numeric", None)),
        config=spam_filter.config, n_learned=dict(spam_filter.n_learned),
        threshold=spam_filter.threshold, calibration=copy.deepcopy(spam_filter.calibration))
    return lambda: store.dumps(frozen)
