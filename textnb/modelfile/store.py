"""Save and load a trained filter as one self-describing file. No pickle.

The file is a ZIP archive (readable with any unzip tool) holding:

- ``textnb-model.json``: format name and version, textnb version, the config,
  training statistics, the learned threshold, the SHA-256 of every other member, and
  ``journal_seq``: the number of the last record of the model's journal the file holds
  (``textnb.modelfile.journal``; a file without it is an earlier textnb's, which holds
  none of the journal's numbered records);
- ``vocabulary.json``: the tokens, in column order;
- ``class_count.npy``, ``feature_count.npy``, ``doc_freq.npy``: the counts
  (NumPy's format, loaded with ``allow_pickle=False``, so loading runs no code);
- ``ledger_digest.npy``, ``ledger_label.npy``, ``ledger_tokens.npy``: the ledger of
  learned messages (``textnb.models.ledger``), present when it has entries. They are
  optional members of format 1: a file without them loads with an empty ledger,
  and an older textnb reading a file with them checks and ignores them.
- ``ledger_serial.npy``, ``ledger_born.npy``, ``ledger_last.npy``, ``ledger_state.npy``:
  each learned message's serial, each column's history and the ledger's counters
  (``Ledger``'s docstring), which keep ``forget`` exact under a size bound
  (``textnb.modelfile.prune``); optional as well (a file without them was never pruned).
- ``ledger_hash_version.npy``: which definition made each entry's tokens hash (1 or 2,
  ``textnb.models.ledger``); optional (a file without it holds version 1 alone). An older
  textnb reads version-2 hashes as version 1, so it refuses to relabel or forget
  those messages (its check fails) rather than subtract the wrong counts.

Writes are atomic: the archive goes to a temporary file beside the target,
is fsync'd, and is renamed over the target; a crash leaves the old file or the
new one, never half of either. A truncated or bit-flipped file fails its ZIP
CRC or the SHA-256 check and is reported as damaged.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import struct
import tempfile
import threading
import time
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import __version__
from .._c import speedups
from ..errors import ModelFormatError, write_error
from ..features.token_store import TokenStore
from ..features.vectorize import Vocabulary
from ..models.ledger import Ledger
from ..spamfilter import SpamFilter
from . import count_patch
from .checks import (INFLATION_ALLOWANCE, MAX_INFLATION, check_model, loads_json,
                     model_config)
from .journal import Journal, Record, Replay, apply_records, pending, split_at_first_message
from .owned_files import read_regular

FORMAT_NAME = "textnb-model"
FORMAT_VERSION = 1
_META = "textnb-model.json"
# zlib level 1, not 6: about a third of the CPU for a file a fifth larger; every train
# and retrain writes the whole file, so the time is paid often
# (docs/design/counting-and-scoring.md#saving).
ZLIB_LEVEL = 1
# ISA-L's level 1 (python-isal, where installed: _deflater), which writes the same
# format several times faster than zlib's level 1, and smaller
# (docs/design/counting-and-scoring.md#saving).
ISAL_LEVEL = 1
_ARRAYS = ("class_count", "feature_count", "doc_freq")
# ``journal_seq_of`` reads only the description, and none larger than this (one with a
# calibration map is a few kB).
MAX_META_BYTES = 1 << 20


def default_model_path() -> Path:
    """$TEXTNB_MODEL, else $XDG_DATA_HOME/textnb/model.tnb (~/.local/share/textnb/model.tnb)."""
    if os.environ.get("TEXTNB_MODEL"):
        return Path(os.environ["TEXTNB_MODEL"]).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "textnb" / "model.tnb"


class _Hashing(io.RawIOBase):
    """A write-only file that passes bytes on to ``out`` and keeps their SHA-256."""

    def __init__(self, out) -> None:
        self.out, self.sha256 = out, hashlib.sha256()

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.sha256.update(data)
        self.out.write(data)
        return len(data)


class _MemberWriter(io.RawIOBase):
    """The members of ``zf`` made on this thread, and deflated, hashed and written on a
    second one: ``add(name, write)`` calls ``write(self)``, whose bytes go, in order, to a
    new member, and ``checksums`` maps each member to its SHA-256 once the block ends.

    Making the bytes (the vocabulary's JSON in C, ``speedups.json_items``), ISA-L's
    deflate and hashlib's SHA-256 all release the GIL, so the two threads run on two
    cores, which the training's workers have left by then
    (docs/design/counting-and-scoring.md#saving); the members are the same bytes.
    At most ``_PIPED_CHUNKS`` chunks wait between the threads (an array's are views of
    it, ``_write_npy``), and an error of the writing thread (a full disk) is raised on
    this one, at its next write or at the end of the block.
    """

    def __init__(self, zf: zipfile.ZipFile) -> None:
        import queue  # here: the commands that only load a model (filter) never save one

        self.zf, self.checksums = zf, {}
        self._chunks: queue.Queue = queue.Queue(_PIPED_CHUNKS)
        self._error: BaseException | None = None
        self._out = self._hashing = self._name = None
        self._thread: threading.Thread | None = threading.Thread(
            target=self._write_members, name="textnb-save", daemon=True)

    def __enter__(self) -> _MemberWriter:
        try:
            self._thread.start()
        except RuntimeError:
            # No thread to be had (a pids limit such as systemd's TasksMax, reached while
            # a daemon saves at SIGTERM): the same bytes, deflated on this thread.
            self._thread = None
        return self

    def __exit__(self, *exc_info) -> None:
        if self._thread is None:
            self._close_open_member()
        else:
            self._chunks.put(None)  # the writer drains the queue whatever happened to it
            self._thread.join()
        if self._error is not None and exc_info[0] is None:
            raise self._error

    def writable(self) -> bool:
        return True

    def add(self, name: str, write: Callable[[_MemberWriter], object]) -> None:
        self._put(name)
        write(self)
        self._put(_END_OF_MEMBER)

    def write(self, data) -> int:
        # Bytes, and views of arrays nothing writes to while they are saved (_write_npy),
        # are passed on as they are; anything else is copied, since its owner may reuse it.
        self._put(data if isinstance(data, (bytes, memoryview)) else bytes(data))
        return len(data)

    def _put(self, item) -> None:
        if self._error is not None:
            raise self._error
        if self._thread is None:
            self._write_one(item)
            if self._error is not None:
                raise self._error
        else:
            self._chunks.put(item)

    def _write_members(self) -> None:
        while (item := self._chunks.get()) is not None:
            if self._error is None:  # else drained, not written: the caller raises it
                self._write_one(item)
        self._close_open_member()

    def _write_one(self, item) -> None:
        """A member's name (it starts), a piece of its bytes, or its end."""
        try:
            if isinstance(item, str):
                self._name, self._out = item, self.zf.open(item, "w", force_zip64=True)
                _deflate_with(self._out, _deflater())
                self._hashing = _Hashing(self._out)
            elif item is _END_OF_MEMBER:
                self._out.close()
                self.checksums[self._name] = self._hashing.sha256.hexdigest()
            else:
                self._hashing.write(item)
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            self._error = exc

    def _close_open_member(self) -> None:
        out = self._out
        if out is not None and not out.closed:
            # Failed, here or on the calling thread: the archive cannot close (nor the
            # error reach the caller as it is) with a member open. Closing may fail
            # again (the disk is still full); the first error is the one raised.
            try:
                out.close()
            except BaseException:  # noqa: BLE001
                pass


# Chunks waiting between ``_MemberWriter``'s two threads.
_PIPED_CHUNKS = 4
_END_OF_MEMBER = object()


# Bytes of an array in a view passed to the saving thread (``_write_npy``).
_NPY_PIECE = 1 << 20


def _write_npy(out, array: np.ndarray) -> None:
    """``np.save(out, array)``'s bytes (tests/test_store.py), the data written as views of
    at most ``_NPY_PIECE`` bytes of the array itself, a row at a time when only its rows
    are contiguous (the counts' buffer has spare columns): np.save copies 16 MB at a
    time, and with the saving thread (``_MemberWriter``) a few such copies would wait at
    once, raising the calling process's peak (docs/design/memory.md#the-workers-memory).
    Other layouts go to np.save."""
    from numpy.lib import format as npy

    if array.flags.c_contiguous:
        rows = [array]
    elif array.ndim == 2 and array.strides[1] == array.itemsize and array.strides[0] >= 0:
        rows = list(array)
    else:
        np.save(out, array, allow_pickle=False)
        return
    npy.write_array_header_1_0(out, npy.header_data_from_array_1_0(array))
    for row in rows if array.size else ():
        data = memoryview(row).cast("B")
        for start in range(0, len(data), _NPY_PIECE):
            out.write(data[start:start + _NPY_PIECE])


def _write_json_list(fh, tokens: TokenStore) -> None:
    """``json.dumps(list(tokens))``'s bytes (ASCII), written a chunk of tokens at a time
    (``TokenStore.json_items``): the JSON text of five million tokens (~100 MB) never
    exists at once (``write_model``)."""
    fh.write(b"[")
    for i, piece in enumerate(tokens.json_items()):
        fh.write(b", " + piece if i else piece)
    fh.write(b"]")


def _read_json_list(data: bytes) -> TokenStore:
    """``TokenStore(json.loads(data))`` for the bytes ``_write_json_list`` writes, without
    a str a token: the writer's shape, ``["a", "b", ...]`` in ASCII (json.dumps escapes
    everything else), is cut at its quotes with NumPy, and only the tokens that hold an
    escape (a backslash) are decoded by ``json.loads``. Bytes of any other shape (other
    spacing, raw UTF-8: still JSON) go through ``json.loads`` whole.

    One scratch array serves every byte-wide test: each new 10 MB array costs
    its page faults in a process that has just started.
    """
    # In C, where it was built (speedups.read_json_items): about half the time of the
    # NumPy cut (docs/design/startup.md#the-load-beside-spacys-import).
    read = speedups.read_json_items(data)
    if read is not None:
        return TokenStore.from_utf8(*read)
    a = np.frombuffer(data, dtype=np.uint8)
    scratch = np.empty(a.size, dtype=bool)
    cut = _json_strings(data, a, scratch)
    if cut is None:
        return TokenStore(loads_json(data, "vocabulary.json"))
    opens, closes = cut  # each string's opening and closing quote
    backslashes = np.flatnonzero(np.equal(a, 0x5C, out=scratch))
    keep = scratch  # the strings' bytes: not the brackets, quotes, ", "
    keep.fill(True)
    keep[[0, -1]] = False
    for at in (opens, closes, closes[:-1] + 1, closes[:-1] + 2):
        keep[at] = False
    text = a[keep]
    lengths = closes - opens - 1
    owner = np.searchsorted(closes, backslashes)  # the string of each backslash
    escaped = owner[np.flatnonzero(np.diff(owner, prepend=-1))].tolist()
    if escaped:  # each such token's escaped text in ``text`` replaced by its UTF-8 bytes
        first, last = opens[escaped].tolist(), (closes[escaped] + 1).tolist()
        decoded = json.loads(b"[" + b", ".join(map(data.__getitem__, map(slice, first, last)))
                             + b"]")
        ends = np.cumsum(lengths)
        starts, stops = (ends - lengths)[escaped].tolist(), ends[escaped].tolist()
        utf8 = [token.encode("utf-8", "surrogatepass") for token in decoded]  # TokenStore's
        spliced, done, view = bytearray(), 0, memoryview(text)
        for start, stop, token in zip(starts, stops, utf8):
            spliced += view[done:start]
            spliced += token
            done = stop
        spliced += view[done:]
        text = spliced
        lengths[escaped] = list(map(len, utf8))
    return TokenStore.from_utf8(text, np.cumsum(lengths))


def _json_strings(data: bytes, a: np.ndarray, scratch: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray] | None:
    """Where each string of ``data`` (``a``: its bytes as uint8; ``scratch``: a bool array
    as long) opens and closes (its quotes' offsets), when ``data`` is exactly
    ``["...", "...", ...]`` in ASCII without control characters; else None.

    A quote is a string's own (not an escaped one) when an even run of backslashes, or
    none, comes before it."""
    if len(data) < 4 or not (data.startswith(b'["') and data.endswith(b'"]')
                             and data.isascii()):
        return None
    if np.less(a, 0x20, out=scratch).any():  # JSON strings hold no raw control characters
        return None
    quotes = np.flatnonzero(np.equal(a, 0x22, out=scratch))
    after = np.flatnonzero(a[quotes - 1] == 0x5C)  # quotes after a backslash (not the first)
    if after.size:
        odd = a[quotes[after] - 2] != 0x5C  # a run of one backslash: an escaped quote
        for k in np.flatnonzero(~odd).tolist():  # longer runs (rare): count them
            end = start = int(quotes[after[k]]) - 1
            while data[start] == 0x5C:
                start -= 1
            odd[k] = (end - start) % 2 == 1
        own = np.ones(quotes.size, dtype=bool)
        own[after[odd]] = False
        quotes = quotes[own]
    if quotes.size % 2:
        return None
    opens, closes = quotes[0::2], quotes[1::2]
    gaps = closes[:-1]
    if not (opens[0] == 1 and closes[-1] == len(data) - 2 and (opens[1:] - gaps == 3).all()
            and (a[gaps + 1] == 0x2C).all() and (a[gaps + 2] == 0x20).all()):
        return None
    return opens, closes


def description(spam_filter: SpamFilter, format_name: str = FORMAT_NAME,
                format_version: int = FORMAT_VERSION) -> dict:
    """What a model file says about its model besides the arrays (textnb's PMML Extension
    says the same under its own format name and version)."""
    return {
        "format": format_name,
        "format_version": format_version,
        "textnb_version": __version__,
        "config": spam_filter.config.to_dict(),
        "n_learned": spam_filter.n_learned,
        "threshold": spam_filter.threshold,
        "calibration": spam_filter.calibration,
    }


def _deflater():
    """A deflate compressor for a member, ISA-L's (python-isal) when installed, else None
    (zipfile's own zlib one is kept).

    Every ``train`` and ``retrain`` writes the whole model after its last message is
    counted, on one core, and with zlib deflating is most of that save
    (docs/design/counting-and-scoring.md#saving). ISA-L deflates in assembler written for
    it, three to nine times zlib's speed at level 1 on a model's members, and its raw
    deflate stream is what zipfile writes and any unzip reads (tests/test_store.py)."""
    try:
        from isal import isal_zlib
    except ImportError:  # not installed here (textnb requires it where wheels exist)
        return None
    return isal_zlib.compressobj(ISAL_LEVEL, isal_zlib.DEFLATED, -15)


def _deflate_with(member_file, compressor) -> None:
    """Have zipfile's member writer (``ZipFile.open(name, "w")``) deflate with
    ``compressor``. It calls ``_compressor.compress`` on each write and ``flush`` at close,
    as it does zlib's; a zipfile that no longer has that attribute keeps its own
    (tests/test_store.py notices)."""
    if compressor is not None and getattr(member_file, "_compressor", None) is not None:
        member_file._compressor = compressor


def write_model(spam_filter: SpamFilter, fh, journal_seq: int = 0) -> None:
    """Write the model file's bytes to ``fh`` (a binary file), one member at a time;
    ``journal_seq``: the last journal record the filter holds (``save``).

    Each member is encoded straight into the archive, its SHA-256 taken on the way, and
    the description with the checksums goes last: no member's bytes are ever held
    whole. Holding them all (as bytes, then compressed) had been the peak of a
    training run's memory: 70 bytes a token on top of the model itself
    (docs/design/memory.md#the-save-streams-spacys-vocabulary-is-bounded).
    """
    model = spam_filter.model
    if not hasattr(model, "class_count_"):
        from ..errors import NotFittedError
        raise NotFittedError("the filter is not trained; nothing to save")
    arrays = {"class_count": model.class_count_, "feature_count": model.feature_count_,
              "doc_freq": spam_filter.doc_freq_}
    if len(spam_filter.ledger) or spam_filter.ledger.next_serial:
        arrays.update(spam_filter.ledger.to_arrays(len(spam_filter.vocabulary.tokens_)))
    # model.numeric_model (textnb.models.numeric)
    if getattr(spam_filter, "numeric", None) is not None:
        arrays.update({f"numeric_{name}": array
                       for name, array in spam_filter.numeric.to_arrays().items()})
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED,
                         compresslevel=ZLIB_LEVEL) as zf:
        with _MemberWriter(zf) as members:
            members.add("vocabulary.json",
                        lambda out: _write_json_list(out, spam_filter.vocabulary.tokens_))
            for name, array in arrays.items():
                members.add(f"{name}.npy", lambda out, a=array: _write_npy(out, a))
        meta = {**description(spam_filter), "sha256": members.checksums,
                "journal_seq": int(journal_seq)}
        # A ZipInfo of its own: writestr(name) would stamp the member with the clock, and
        # the same model saved twice must be the same bytes (as the members, 1980-01-01).
        zf.writestr(zipfile.ZipInfo(_META), json.dumps(meta, indent=2, sort_keys=True),
                    compress_type=zipfile.ZIP_DEFLATED, compresslevel=ZLIB_LEVEL)


def dumps(spam_filter: SpamFilter, journal_seq: int = 0) -> bytes:
    """The model file's bytes."""
    buffer = io.BytesIO()
    write_model(spam_filter, buffer, journal_seq)
    return buffer.getvalue()


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
                _touch(model_path)
                return "journal"
    save(spam_filter, model_path, None if state is None else state.seq)
    return "rewritten"


class _JournalMoved(Exception):
    """The journal holds records the model being committed was computed without."""


def _touch(model_path: Path) -> None:
    """Advance the model file's mtime (strictly, even within one clock tick) after an
    append: whoever watches the file for changes (``textnb serve`` reloads on a new
    inode, size or mtime) then loads the journal's new record too."""
    st = os.stat(model_path)
    os.utime(model_path, ns=(st.st_atime_ns, max(time.time_ns(), st.st_mtime_ns + 1000)))


def atomic_write(path: Path, data) -> None:
    """Replace ``path`` by ``data`` or leave it as it was: WriteError names ``path`` and the
    fix when the folder is read-only or the disk full, and no temporary file remains.

    data (bytes | Callable[[BinaryIO], None]): the bytes, or a function that writes them
    to the file it is given (``save``: the model, member by member)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise write_error(path, exc) from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            if callable(data):
                data(fh)
            else:
                fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise write_error(path, exc) from exc
        raise
    try:  # make the rename itself durable
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass


# Settings added after model files were first written, with the value every older file
# was scored with: a file that lacks the key keeps scoring as it did when it was saved,
# whatever the built-in default has become since.
_SAVED_BEFORE_THE_KEY_EXISTED = {("model", "evidence"): "strongest",
                                  ("model", "header_places"): 0,
                                  ("model", "header_discriminators"): 0,
                                  ("model", "min_strength"): 0.0,
                                  ("model", "combine"): "sum",
                                  ("model", "clues_per_header_field"): 0,
                                  ("model", "tile_word_pairs"): False,
                                  ("mail", "html_renderer"): "stdlib"}


def with_saved_defaults(config: dict) -> dict:
    """A saved config (nested dicts) with the value it was scored with filled in for every
    key added since (model files and text dumps both read their settings through it)."""
    config = {name: dict(section) if isinstance(section, dict) else section
              for name, section in config.items()}
    for (section, key), value in _SAVED_BEFORE_THE_KEY_EXISTED.items():
        if section not in config:  # saved before the section existed ([mail])
            config[section] = {}
        if isinstance(config.get(section), dict):
            config[section].setdefault(key, value)
    return config


def load(path: str | Path) -> SpamFilter:
    """Read a model file and apply its journal (``MODEL.journal``, textnb.modelfile.journal);
    ModelFormatError names the problem and the fix.

    The vocabulary's token -> column index is built when first needed, not here
    (``Vocabulary.columns``): scoring one message (``textnb filter``) finds its few
    columns without it. A repeated token in the vocabulary then raises ValueError
    when the index is built; ``load_for_update`` reports it at once, as damage.
    """
    return _read(path, index=False)[0]


def load_while(path: str | Path, work: Callable[[], object], index: bool = False
               ) -> SpamFilter:
    """``load(path)`` on a second thread while ``work()`` runs on this one
    (``textnb.modelfile.load_in_background``: the scoring commands import spaCy meanwhile).

    index (bool): also build the vocabulary's token -> column index there (as
        ``load_for_update`` does), for a caller that will score batches: its hashing
        and sorting then overlap ``work``, and worker processes forked later inherit
        the index instead of each building its own."""
    from .load_in_background import beside

    return _finish_read(beside(lambda: _start_read(path, index), work))[0]


def load_for_update(path: str | Path):
    """``load``, and what loading found (``JournalState``), which ``commit`` appends
    after; the vocabulary's index is built and checked.
    RETURNS (SpamFilter, JournalState)."""
    return _read(path, index=True)


def load_at(path: str | Path):
    """``load``, and what loading found (``JournalState``: the resident scorer numbers
    its own records on from its ``seq``). RETURNS (SpamFilter, JournalState)."""
    return _read(path, index=False)


def journal_seq_of(path: str | Path) -> int | None:
    """The ``journal_seq`` the model file at ``path`` records now (None: no file, an
    earlier textnb's, or one that cannot be read: the load reports why)."""
    try:
        with zipfile.ZipFile(path) as zf:
            info = zf.getinfo(_META)
            if info.file_size > MAX_META_BYTES:
                return None
            meta = loads_json(zf.read(info), _META)
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, zlib.error, RuntimeError,
            NotImplementedError, EOFError):
        return None
    return _journal_seq(meta) if isinstance(meta, dict) else None


def _journal_seq(meta: dict) -> int | None:
    """The description's ``journal_seq`` (None: absent, an earlier textnb's file)."""
    seq = meta.get("journal_seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0 else None


def _read(path: str | Path, index: bool):
    return _finish_read(_start_read(path, index))


@dataclass
class _Reading:
    """A model file read, with the journal records still to apply on the caller's thread."""

    path: Path
    spam_filter: SpamFilter
    state: JournalState
    replay: Replay
    rest: list
    named: str


def _start_read(path: str | Path, index: bool) -> _Reading:
    """Read the model file and its journal, and apply the journal's patches up to its first
    message record (``Replay``: message records tokenise, which imports spaCy, so
    ``load_while`` leaves them to ``_finish_read`` on the caller's thread)."""
    path = Path(path)
    if not path.exists():
        raise ModelFormatError(
            f"no model at '{path}'; train one first with 'textnb train --model {path} "
            "--spam SRC --ham SRC' (or pass --model)")
    try:
        data = read_regular(path)
    except OSError as exc:
        raise ModelFormatError(f"cannot read model '{path}': {(exc.strerror or str(exc)).lower()}; "
                               "give --model the path of a readable model file") from None
    spam_filter, meta = _loads(data, str(path), index)
    file_seq = _journal_seq(meta)
    state = JournalState(seq=file_seq or 0, file_seq=file_seq, base_size=len(data))
    journal_file = journal(path)
    legacy_patches = count_patch.read_legacy_delta(path, data) if state.legacy else []
    named = f"the journal{'s' if legacy_patches else ''} '{journal_file.path}'" + (
        f" and '{count_patch.legacy_delta_path(path)}'" if legacy_patches else "")
    replay = Replay(spam_filter, file_seq, named)
    with _journal_errors(path, named):
        count_patch.apply(spam_filter, legacy_patches)  # an earlier textnb's, made for it
        state.records += len(legacy_patches)
        records = journal_file.read()
        state.seq = max([state.seq] + [r.seq for r in records if r.seq is not None])
        state.size = journal_file.size()
        patches, rest = split_at_first_message(pending(records, file_seq))
        replay.apply(patches)
    return _Reading(path, spam_filter, state, replay, rest, named)


def _finish_read(reading: _Reading) -> tuple[SpamFilter, JournalState]:
    """Apply the rest of the journal (``_start_read``) and check the result."""
    spam_filter, state, replay = reading.spam_filter, reading.state, reading.replay
    with _journal_errors(reading.path, reading.named):
        replay.apply(reading.rest)
    replay.finish()
    state.records += replay.applied
    state.skipped = replay.skipped
    if state.records:  # the journal's patches hold to the same rules as the file
        check_model(spam_filter, f"model file '{reading.path}' with {reading.named}")
    return spam_filter, state


@contextmanager
def _journal_errors(path: Path, named: str) -> Iterator[None]:
    """ModelFormatError for a journal that does not fit its model or cannot be read."""
    try:
        yield
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise ModelFormatError(
            f"{named} has records that do not fit model '{path}' "
            f"({exc}); move the journal away to use the model as last rewritten (its "
            "records' messages then need 'textnb retrain' again)") from None
    except OSError as exc:
        raise ModelFormatError(f"cannot read {named}: "
                               f"{(exc.strerror or str(exc)).lower()}") from None


def loads(data: bytes, name: str = "<bytes>", index: bool = True) -> SpamFilter:
    """The filter a model file's bytes hold (``index``: build and check the vocabulary's
    token -> column index now; else on first need, as ``load`` does)."""
    return _loads(data, name, index)[0]


def _loads(data: bytes, name: str, index: bool) -> tuple[SpamFilter, dict]:
    """``loads``, and the file's description (``textnb-model.json``)."""
    damaged = (f"model file '{name}' is damaged (truncated or corrupted); restore it from a "
               "backup or train it again")
    if not data.startswith(b"PK\x03\x04"):  # every model file starts as a ZIP archive
        raise ModelFormatError(
            f"model file '{name}' is damaged or not a model file ("
            + ("it is empty" if not data else "it is not a ZIP archive")
            + "); check the --model path, restore it from a backup or train it again")
    source = f"model file '{name}'"
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            if _META not in zf.namelist():
                raise ModelFormatError(f"'{name}' is a ZIP archive but not a textnb model file "
                                       f"(it has no {_META}); check the --model path")
            declared = sum(info.file_size for info in zf.infolist())
            if declared > MAX_INFLATION * len(data) + INFLATION_ALLOWANCE:
                raise ModelFormatError(
                    damaged + f" (its {len(data):,} bytes declare {declared:,} bytes of "
                    f"members, more than {MAX_INFLATION} times their size: a zip bomb, or "
                    "damage)")
            inflate = _inflater()
            meta = loads_json(_member_bytes(zf, data, _META, inflate), _META)
            if not isinstance(meta, dict):
                raise ModelFormatError(damaged + f" ({_META} is not a JSON object)")
            _check_format(meta, name)
            if not isinstance(meta.get("sha256"), dict):
                raise ModelFormatError(damaged + f" ({_META} lists no checksums)")
            members = {n: _member_bytes(zf, data, n, inflate) for n in meta["sha256"]}
    except ModelFormatError:
        raise
    # A flipped bit in a ZIP header can surface as any of these: NotImplementedError
    # ("zip file version 8.4") was seen in tests/test_store.py's bit-flip test, and
    # zipfile raises RuntimeError when a flip sets a member's "encrypted" flag.
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, KeyError, ValueError,
            EOFError, OSError, NotImplementedError, RuntimeError):
        raise ModelFormatError(damaged) from None
    for member, digest in meta["sha256"].items():
        if hashlib.sha256(members[member]).hexdigest() != digest:
            raise ModelFormatError(damaged + f" (checksum mismatch in {member})")
    try:
        n_learned = {str(k): int(v) for k, v in meta.get("n_learned", {}).items()}
        config = model_config(with_saved_defaults(meta["config"]), source)
        # Taken over, not copied again (``Vocabulary(tokens)`` would copy the store).
        tokens = Vocabulary.of_store(_read_json_list(members["vocabulary.json"]))
        arrays = {a: _npy(members[f"{a}.npy"]) for a in _ARRAYS}
        ledger = None
        if "ledger_digest.npy" in members:
            ledger = Ledger.from_arrays(
                *(_npy(members[f"ledger_{a}.npy"]) if f"ledger_{a}.npy" in members else None
                  for a in ("digest", "label", "tokens", "serial", "born", "last", "state",
                            "hash_version")))
            if ledger.born.shape[0] > len(tokens):
                raise ValueError(f"the ledger's column history has {ledger.born.shape[0]} "
                                 f"columns, the vocabulary {len(tokens)}")
        numeric = {n[len("numeric_"):-len(".npy")]: _npy(data)
                   for n, data in members.items() if n.startswith("numeric_")}
        if numeric:
            from ..models.numeric import from_arrays

            numeric = from_arrays(config.model.numeric_model, numeric)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ModelFormatError(damaged + f" ({exc})") from None
    try:
        spam_filter = SpamFilter.from_counts(
            config, tokens, arrays["class_count"], arrays["feature_count"], arrays["doc_freq"],
            n_learned=n_learned, ledger=ledger, threshold=meta.get("threshold"),
            calibration=meta.get("calibration"), numeric=numeric or None, adopt=True)
        if index:
            spam_filter.vocabulary.check()  # a repeated token raises ValueError
    except ValueError as exc:  # shapes that disagree with the vocabulary, a repeated token
        raise ModelFormatError(damaged + f" ({exc})") from None
    return check_model(spam_filter, source), meta


def _npy(data: bytes) -> np.ndarray:
    """The array of an ``.npy`` member's bytes, a new array of its own (writable: a
    model learns in place), copied once out of them: ``np.load`` of a BytesIO copies
    twice (a read, then into the array). ValueError for an array of objects (never
    unpickled, as ``allow_pickle=False``) or bytes that do not hold the array."""
    from numpy.lib import format as npy

    stream = io.BytesIO(data)
    version = npy.read_magic(stream)
    header = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
    shape, fortran_order, dtype = header(stream)
    if dtype.hasobject:
        raise ValueError("Object arrays cannot be loaded when allow_pickle=False")  # np.load's
    count = int(np.prod(shape, dtype=np.int64))
    flat = np.frombuffer(data, dtype=dtype, count=count, offset=stream.tell())
    array = flat.reshape(shape[::-1]).T if fortran_order else flat.reshape(shape)
    return array.copy(order="K")


def _inflater():
    """``(inflate, crc32)`` of ISA-L (python-isal) where installed, else of zlib;
    ``inflate(raw, wbits, size)`` stops one byte past ``size`` (``_bounded``).

    ``ZipFile.read`` reads through a file object, in pieces, copying each, with the CRC
    taken on the side; inflating each member's bytes where they lie in the file, in one
    call, takes half its time with zlib and a third with ISA-L
    (docs/design/startup.md#the-load-beside-spacys-import)."""
    try:
        from isal import isal_zlib
    except ImportError:
        return _bounded(zlib), zlib.crc32
    return _bounded(isal_zlib), isal_zlib.crc32


def _bounded(module) -> Callable[[memoryview, int, int], bytes]:
    """``module.decompress(raw, wbits, size)`` (zlib's or ISA-L's) that stops at ``size
    + 1`` bytes of output whatever the stream holds, so a member whose bytes inflate
    past its declared size costs no more memory than the size it declared (its length
    check then fails). ISA-L's bounded inflate is as quick as its one-call one; zlib's
    grows its output in blocks and is slower, which is paid only where ISA-L is not
    installed (docs/design/startup.md#the-load-beside-spacys-import)."""
    def inflate(raw: memoryview, wbits: int, size: int) -> bytes:
        return module.decompressobj(wbits).decompress(raw, size + 1)

    return inflate


_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature; file name and extra field lengths


def _member_bytes(zf: zipfile.ZipFile, data: bytes, name: str, inflate) -> bytes:
    """Member ``name`` of the archive ``zf`` reads from ``data``, inflated in one call
    (``inflate``: ``_inflater()``, bounded by the member's declared size) from where it
    lies, its size and CRC-32 checked as zipfile checks them; zipfile.BadZipFile when
    they do not hold, and for a member neither stored nor deflated, or encrypted (no
    textnb writes one, and zipfile's bzip2 and LZMA readers inflate without a bound)."""
    decompress, crc32 = inflate
    info = zf.getinfo(name)
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) or info.flag_bits & 1:
        raise zipfile.BadZipFile(f"member {name!r} is encrypted or compressed with method "
                                 f"{info.compress_type}, which textnb never writes")
    at = info.header_offset
    if at < 0 or at + _LOCAL_HEADER.size > len(data):
        raise zipfile.BadZipFile(f"member {name!r} lies outside the file")
    signature, name_length, extra_length = _LOCAL_HEADER.unpack_from(data, at)
    start = at + _LOCAL_HEADER.size + name_length + extra_length
    if signature != b"PK\x03\x04" or start + info.compress_size > len(data):
        raise zipfile.BadZipFile(f"member {name!r} has no local header, or is cut short")
    raw = memoryview(data)[start:start + info.compress_size]
    try:
        member = (bytes(raw) if info.compress_type == zipfile.ZIP_STORED
                  else decompress(raw, -15, info.file_size))
    except Exception as exc:  # zlib.error, or ISA-L's own error class (not zlib's)
        raise zipfile.BadZipFile(f"member {name!r} does not inflate: {exc}") from None
    if len(member) != info.file_size or crc32(member) != info.CRC:
        raise zipfile.BadZipFile(f"member {name!r} is not the bytes its archive lists")
    return member


def _check_format(meta: dict, name: str) -> None:
    if meta.get("format") != FORMAT_NAME:
        raise ModelFormatError(f"'{name}' is not a textnb model file (its {_META} names "
                               f"format {meta.get('format')!r}); check the --model path")
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        newer = isinstance(version, int) and version > FORMAT_VERSION
        fix = ("upgrade textnb (pip install -U textnb)" if newer
               else "train it again with this version")
        raise ModelFormatError(
            f"model '{name}' has format version {version}, this textnb "
            f"({__version__}) reads version {FORMAT_VERSION}; {fix}")
