"""The model's journal: every update the model file does not hold yet, in order.

Rewriting the whole model file takes far longer than the update itself, so an update
is made durable by appending one record to ``MODEL.journal`` beside ``MODEL`` (one
``write``, then fsync, before the update is reported done). Two kinds of writer
append to it:

- ``textnb retrain``, ``textnb forget`` (and ``tune --write``) append a ``PATCH``: the
  change to the counts and the ledger (``textnb.modelfile.count_patch``), so that
  loading needs no tokenising;
- the resident scorer (``textnb serve``: ``textnb-client --learn``, the review page)
  appends ``LEARN`` and ``FORGET`` records: the message itself, raw, with its label.
  Each sets the state of one message (learned as spam, as ham, or absent), so applying
  one to a model that holds it already changes nothing.

Every record has a sequence number, 1, 2, 3 ... over the model's life, and the model
file says which records it holds: ``journal_seq`` in its ``textnb-model.json``, the
number of the last one. Loading a model (``store.load``) reads the file, then applies
the journal's records numbered after it, in order (``apply_records``): so the model
is the file *and* its journal (copy both, or run ``textnb compact`` first).

Whoever writes the file (``store.save``: train, a retrain's rewrite, compact, merge,
import; the scorer every ``--flush-seconds``) records the number of the last record
its model holds, renames the new file into place, and then drops those records from
the journal (``Journal.trim``). ``kill -9`` between the two leaves records the file
holds already; their numbers say so, and loading skips them. Records appended while
the file was being written are numbered past it and stay. That is why one journal
serves both writers: the number, not the file's checksum, ties a record to the files
it applies to (docs/model-file.md#the-journal).

Writers hold the journal's own lock (an exclusive ``flock`` on the journal file,
taken again when the file was replaced meanwhile) for one append or one trim only,
so a scorer's learn never waits for a long retrain, which holds the *model's* lock
(``textnb.modelfile.lock``) for the whole run. A retrain computed its patch against
the model as it loaded it; if the scorer appended records meanwhile, the patch no
longer continues the journal, and the retrain applies those records and rewrites the
file instead (``store.commit``).

Format (no pickle, nothing that runs code), records framed by
``textnb.modelfile.journal_frames``::

    TNBJ2 <seq> <PATCH|LEARN|FORGET> <spam|ham|-> <length> <sha256 hex>\\n<payload>\\n

Reading stops at the first record cut short, failing its checksum, or numbered out of
order: a crash mid-append leaves such a record, and its update was never reported
done; the next append cuts it off. ``TNBJ1`` records (an earlier textnb's scorer: the
same without a number) apply to a file of that textnb only, which holds no
``journal_seq``; its other journal, ``MODEL.delta``, is read by
``count_patch.read_legacy_delta``.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from . import count_patch

from .journal_frames import MAX_DIGITS, frame, frames_of
from .owned_files import allowed_mode, open_owned, read_owned, still_named

__all__ = ["Journal", "Record", "Replay", "apply_records", "journal_path", "pending",
           "split_at_first_message"]

log = logging.getLogger("textnb.modelfile.journal")

MAGIC = b"TNBJ2"
LEGACY_MAGIC = b"TNBJ1"
KINDS = ("PATCH", "LEARN", "FORGET")


def journal_path(model_path: str | os.PathLike) -> Path:
    model_path = Path(model_path)
    return model_path.with_name(model_path.name + ".journal")


@dataclass(frozen=True)
class Record:
    """One update: kind 'PATCH' (payload: a count patch), 'LEARN' (label 'spam'/'ham';
    payload: the raw message) or 'FORGET'; ``seq`` its number once in the journal
    (None for an earlier textnb's record)."""

    kind: str
    label: str | None
    payload: bytes
    seq: int | None = None
    patch: dict | None = field(default=None, compare=False, repr=False)  # PATCH, decoded

    def encode(self, seq: int) -> bytes:
        return frame(MAGIC, [str(seq).encode(), self.kind.encode(),
                             (self.label or "-").encode()], self.payload)


def parse(data: bytes, start: int = 0, last: int | None = None
          ) -> tuple[list[Record], int]:
    """The complete records of ``data`` from ``start`` (numbered past ``last``) and the
    offset just past the last of them. A patch that does not decode (cut short, past
    its bound on inflating, not JSON: ``count_patch.decode``) ends them, as a record
    cut short does."""
    records, end, _ = parse_with_offsets(data, last, start)
    return records, end


def parse_with_offsets(data: bytes, last: int | None = None, start: int = 0
                       ) -> tuple[list[Record], int, int]:
    """``parse``, and where the last record starts."""
    records, at, begins = [], start, start
    for magic, fields, payload, end in frames_of(data, {MAGIC: 3, LEGACY_MAGIC: 2}, start):
        seq = None
        if magic == MAGIC:
            number, *fields = fields
            if (not number.isdigit() or len(number) > MAX_DIGITS
                    or (last is not None and int(number) <= last)):
                break  # numbered out of order: not a record this module wrote
            seq = last = int(number)
        kind, label = (f.decode("ascii", "replace") for f in fields)
        label = None if label == "-" else label
        if kind not in KINDS or label not in (None, "spam", "ham"):
            break
        patch = None
        if kind == "PATCH":
            try:
                patch = count_patch.decode(payload)
            except ValueError:
                break
        records.append(Record(kind, label, payload, seq, patch))
        begins, at = at, end
    return records, at, begins


def pending(records: Sequence[Record], after: int | None) -> list[Record]:
    """The records a model file holding the journal through ``after`` lacks (``after``
    None: a file of an earlier textnb, which holds none of them)."""
    if after is None:
        return list(records)
    return [r for r in records if r.seq is not None and r.seq > after]


class Journal:
    """``MODEL.journal``: read, appended to and trimmed under its own lock.

    model_path (path): the model file.
    file_seq (Callable[[], int | None] | None): the ``journal_seq`` of the model file as
        it is now (``store.journal_seq_of``); numbers continue from it when the journal
        is empty. None: from 0.
    """

    def __init__(self, model_path: str | os.PathLike,
                 file_seq: Callable[[], int | None] | None = None):
        self.model_path = Path(model_path)
        self.path = journal_path(self.model_path)
        self._file_seq = file_seq
        # How far this object has read the file (its own appends included), so that an
        # append reads only what is new: (device, inode, where the last record read
        # starts, where it ends, its number). An inode number is reused once a trim
        # removed the file, so the record is read again to check it is still there.
        self._cursor: tuple[int, int, int, int, int] | None = None

    def size(self) -> int:
        try:
            return os.stat(self.path).st_size
        except FileNotFoundError:
            return 0

    def read(self) -> list[Record]:
        """Every complete record, in order (no lock: an append is one write, so a reader
        sees it whole, cut short, or not at all)."""
        try:
            data = read_owned(self.path, self.model_path)
        except FileNotFoundError:
            return []
        records, end = parse(data)
        if end < len(data):
            log.warning("journal %s: the %d bytes from offset %d are not a complete, intact "
                        "record numbered in order (an append cut short by a crash, or "
                        "damage); ignored, and cut off by the next append",
                        self.path, len(data) - end, end)
        return records

    def last_seq(self) -> int:
        """The number the next record would follow (the journal's last, else the file's)."""
        numbers = [r.seq for r in self.read() if r.seq is not None]
        return numbers[-1] if numbers else (self._file_seq and self._file_seq()) or 0

    @contextmanager
    def _locked(self, create: bool) -> Iterator[int | None]:
        """Hold the journal file's ``flock``; YIELDS its descriptor (None when there is no
        journal and ``create`` is False). A writer that waited while the file was trimmed
        or removed holds a lock on a file no longer there: it takes the new one's."""
        while True:
            try:
                fd = open_owned(self.path, self.model_path,
                                os.O_RDWR | (os.O_CREAT if create else 0))
            except FileNotFoundError:
                if create:
                    raise
                yield None
                return
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if still_named(fd, self.path):
                    yield fd
                    return
            finally:
                os.close(fd)  # and the lock with it

    def _scan(self, fd: int) -> tuple[list[Record], int, int, int]:
        """What this object has not read yet: (those records, the offset past them, the
        file's size, the last number in the file so far)."""
        st = os.fstat(fd)
        start, last, last_start = 0, None, 0
        if self._still_there(fd, st):
            _, _, last_start, start, last = self._cursor
        data = os.pread(fd, st.st_size - start, start) if st.st_size > start else b""
        records, end, first_of_last = parse_with_offsets(data, last)
        numbered = [r for r in records if r.seq is not None]
        if records:
            last_start = start + first_of_last
        last = numbered[-1].seq if numbered else last
        self._cursor = (st.st_dev, st.st_ino, last_start, start + end, last or 0)
        return records, start + end, st.st_size, last or 0

    def _still_there(self, fd: int, st: os.stat_result) -> bool:
        """The cursor's last record is where the cursor says, in this file."""
        cursor = self._cursor
        if cursor is None or cursor[:2] != (st.st_dev, st.st_ino) or st.st_size < cursor[3]:
            return False
        _, _, begin, end, last = cursor
        records, at = parse(os.pread(fd, end - begin, begin))
        return at == end - begin and len(records) == 1 and records[0].seq == last

    def append(self, record: Record, known: int | None = None,
               catch_up: Callable[[list[Record]], None] | None = None) -> int:
        """Append ``record`` and fsync it; RETURNS its number.

        known (int | None): the last number the writer's model holds; the record is
            numbered past it and past every record in the journal.
        catch_up (callable | None): given first, still under the lock, the records
            numbered past ``known`` that the writer has not seen (appended by another
            process), so that it applies them before its own; it may raise to append
            nothing.
        A failed write (a full disk) is cut off again and raised (OSError): the journal
        says what it said.
        """
        created = not self.path.exists()
        with self._locked(create=True) as fd:
            records, end, size, last = self._scan(fd)
            if end < size:  # a record cut short by a crash: never reported done
                os.ftruncate(fd, end)
            if not last:
                last = (self._file_seq and self._file_seq()) or 0
            newer = [r for r in records if r.seq is not None and r.seq > (known or 0)]
            if catch_up is not None and newer:
                catch_up(newer)
            seq = max(last, known or 0) + 1
            data = record.encode(seq)
            try:
                written = os.pwrite(fd, data, end)  # one write: a kill cannot split it
                if written != len(data):
                    raise OSError(errno.ENOSPC, f"short write to the journal {self.path} "
                                                "(disk full?)")
                os.fsync(fd)
            except OSError:
                try:
                    os.ftruncate(fd, end)
                    if created and end == 0:  # leave no empty journal behind
                        os.unlink(self.path)
                except OSError:
                    pass
                self._cursor = None
                raise
            st = os.fstat(fd)
            self._cursor = (st.st_dev, st.st_ino, end, end + len(data), seq)
        if created:
            _fsync_folder(self.path.parent)  # the new file's name is durable too
        return seq

    def trim(self, through: int) -> None:
        """Drop the records numbered up to ``through`` (a model file now holds them) and
        an earlier textnb's; remove the journal when none is left. Atomic: the journal
        is replaced by a new file (written, fsync'd, renamed) under the lock."""
        with self._locked(create=False) as fd:
            if fd is None:
                return
            size = os.fstat(fd).st_size
            records, end = parse(os.pread(fd, size, 0))
            keep = [r for r in records if r.seq is not None and r.seq > through]
            self._cursor = None
            if not keep:
                os.unlink(self.path)
            elif len(keep) < len(records) or end < size:
                _replace(self.path, b"".join(r.encode(r.seq) for r in keep),
                         allowed_mode(self.model_path))
            else:
                return
        _fsync_folder(self.path.parent)


def apply_records(spam_filter, records: Sequence[Record], after: int | None,
                  name: str = "the journal") -> int:
    """Apply ``pending(records, after)`` to a filter loaded from a model file holding the
    journal through ``after``, in order; RETURNS how many were applied (``Replay``)."""
    replay = Replay(spam_filter, after, name)
    replay.apply(pending(records, after))
    replay.finish()
    return replay.applied


class Replay:
    """Applies a journal's pending records to a filter loaded from a model file holding
    the journal through ``after``, in order, in one call of ``apply`` or several.

    Runs of patches are applied together (``count_patch.apply``: one pass over the
    counts). A patch applies only where it continues the file: the first record past
    ``after`` is numbered ``after + 1`` and each next one follows. Past a gap (the file
    was replaced by an older copy, or is an earlier textnb's) the patches were made for
    another file and are skipped with a warning (``skipped`` counts them: whoever
    updates such a model rewrites the file rather than append a patch past the gap,
    ``store.commit``); message records set one message's state, so they apply to any
    file. A patch that does not fit raises ValueError; a message record that cannot be
    applied is logged and skipped (it failed the same way when it was sent).

    Loading splits the work (``store.load_while``): the patches up to the first message
    record on the loading thread, the rest on the caller's, because a message record
    tokenises, and spaCy must not be imported on two threads at once.
    """

    def __init__(self, spam_filter, after: int | None, name: str = "the journal"):
        self.spam_filter = spam_filter
        self.name = name
        self.expected = after  # the number the next patch must follow; None past a gap
        self.applied = 0
        self.skipped = 0

    def apply(self, records: Sequence[Record]) -> None:
        from .lifecycle import Lifecycle

        run: list[Record] = []
        for record in records:
            continues = self.expected is not None and record.seq == self.expected + 1
            self.expected = record.seq if continues else None
            if record.kind == "PATCH":
                if continues:
                    run.append(record)
                else:
                    self.skipped += 1
                continue
            self._apply_patches(run)
            try:
                Lifecycle(self.spam_filter).update(record.kind, record.payload, record.label)
                self.applied += 1
            except Exception as exc:  # noqa: BLE001 - it failed the same way when it was sent
                log.error("%s: a %s record cannot be applied (%s); skipped", self.name,
                          record.kind, exc)
        self._apply_patches(run)

    def _apply_patches(self, run: list[Record]) -> None:
        if run:
            count_patch.apply(self.spam_filter, [r.patch for r in run])
            self.applied += len(run)
            run.clear()

    def finish(self) -> None:
        """Warn once of the patches skipped."""
        if self.skipped:
            log.warning("%s: %d count patch(es) made for another model file (not numbered "
                        "on from its journal_seq) skipped; the next update rewrites the "
                        "model file", self.name, self.skipped)


def split_at_first_message(records: Sequence[Record]) -> tuple[list[Record], list[Record]]:
    """``records`` cut before the first LEARN or FORGET: (the patches before it, the rest)."""
    for i, record in enumerate(records):
        if record.kind != "PATCH":
            return list(records[:i]), list(records[i:])
    return list(records), []


def _replace(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)  # a killed trim's; O_EXCL then refuses anything put there
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass
