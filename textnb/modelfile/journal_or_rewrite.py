"""The journal-or-rewrite policy: an update made durable by appending its patch to the
model's journal, or by rewriting the whole file (``save``), and the journal trimmed to
what the file holds."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import write_error
from ..spamfilter import SpamFilter
from . import count_patch
from .atomic import atomic_write, touch
from .journal import Journal, Record, apply_records
from .model_bytes import journal_seq_of, write_model


@dataclass
class JournalState:
    """What loading a model found (``load_for_update``, ``load_at``): ``seq``, the number
    of the last journal record the loaded model holds; ``file_seq``, the file's own
    (None: an earlier textnb's file); ``records`` applied from the journals; the
    journal's ``size`` and the file's (``base_size``) in bytes."""

    seq: int = 0
    file_seq: int | None = 0
    records: int = 0
    size: int = 0
    base_size: int = 0
    # Patches past a gap in the numbers (the file was replaced by an older copy): they
    # were skipped, so an update appended past them would be skipped too; it rewrites.
    skipped: int = 0

    @property
    def legacy(self) -> bool:
        return self.file_seq is None


def journal(path: str | Path) -> Journal:
    """The journal of the model file at ``path`` (numbered on from the file's)."""
    return Journal(path, file_seq=lambda: journal_seq_of(path))


def save(spam_filter: SpamFilter, path: str | Path, journal_seq: int | None = None) -> Path:
    """Write the model atomically (temp file, fsync, rename, fsync the folder), then drop
    from its journal the records the file holds (``textnb.modelfile.journal``).

    journal_seq (int | None): the last journal record the filter holds (the ``seq`` of the
        state it was loaded with, plus what it applied since); None for a model that
        replaces whatever the file and its journal held (``textnb train``, ``import``):
        every record in the journal now is void. Records appended while the file is
        written are numbered past it and stay."""
    path = Path(path)
    if journal_seq is None:
        journal_seq = journal(path).last_seq()
    write_holding(path, lambda fh: write_model(spam_filter, fh, journal_seq), journal_seq)
    return path


def write_holding(path: str | Path, data, journal_seq: int) -> None:
    """Replace the model file by ``data`` (bytes, or a function writing them to a file:
    ``atomic_write``), a file holding the journal through record ``journal_seq``; then
    drop those records from the journal, and an earlier textnb's ``MODEL.delta``."""
    path = Path(path)
    atomic_write(path, data)
    journal_file = journal(path)
    try:
        journal_file.trim(journal_seq)
        count_patch.legacy_delta_path(path).unlink(missing_ok=True)
    except OSError as exc:  # the file holds them: loading skips them by their numbers
        raise write_error(journal_file.path, exc) from exc


def commit(spam_filter: SpamFilter, model_path: str | Path, before=None, state=None,
           rewrite: bool = False) -> str:
    """Make an update durable (call it holding the model's lock): append its patch to
    the journal, or rewrite the file when there is no file yet, ``rewrite`` is asked
    for, the file is an earlier textnb's, the vocabulary shrank, the journal would
    outgrow ``count_patch.COMPACT_FRACTION`` of the file, or the resident scorer
    appended records since the model was loaded (the patch was computed without them:
    they are applied and the file rewritten with them).

    before (count_patch.Snapshot | None), state (JournalState | None): the model as
        loaded (``load_for_update``) and what loading found; ``state`` is updated.
    RETURNS (str): 'journal' or 'rewritten'."""
    model_path = Path(model_path)
    if not rewrite and before is not None and state is not None and not state.legacy \
            and state.base_size and not state.skipped:
        try:
            payload = count_patch.encode(count_patch.diff(before, spam_filter))
        except ValueError:  # pruned: columns went
            payload = None
        if payload is not None and (state.size + len(payload) + 100
                                    <= count_patch.COMPACT_FRACTION * state.base_size):
            journal_file = journal(model_path)
            newer: list[Record] = []

            def stop_on_newer(records):
                newer.extend(records)
                raise _JournalMoved

            try:
                state.seq = journal_file.append(Record("PATCH", None, payload), state.seq,
                                                catch_up=stop_on_newer)
            except _JournalMoved:
                state.records += apply_records(spam_filter, newer, state.seq,
                                               str(journal_file.path))
                state.seq = max(state.seq, *(r.seq for r in newer))
            except OSError as exc:
                raise write_error(journal_file.path, exc) from exc
            else:
                state.records += 1
                state.size = journal_file.size()
                touch(model_path)
                return "journal"
    save(spam_filter, model_path, None if state is None else state.seq)
    return "rewritten"


class _JournalMoved(Exception):
    """The journal holds records the model being committed was computed without."""
