"""The loaders: a model file's bytes read, its members inflated within their declared
sizes and checked, and its journal applied (``load``, ``load_while``, ``load_for_update``,
``load_at``, ``loads``)."""

from __future__ import annotations

import hashlib
import io
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import __version__
from ..errors import ModelFormatError
from ..features.vectorize import Vocabulary
from ..models.ledger import Ledger
from ..spamfilter import SpamFilter
from . import count_patch
from .checks import INFLATION_ALLOWANCE, MAX_INFLATION, check_model, loads_json, model_config
from .journal import Replay, pending, split_at_first_message
from .journal_or_rewrite import JournalState, journal
from .model_bytes import ARRAYS, FORMAT_NAME, FORMAT_VERSION, META, journal_seq_in
from .owned_files import read_regular
from .saved_defaults import with_saved_defaults
from .token_codec import read_json_list


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
    file_seq = journal_seq_in(meta)
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
            if META not in zf.namelist():
                raise ModelFormatError(f"'{name}' is a ZIP archive but not a textnb model file "
                                       f"(it has no {META}); check the --model path")
            declared = sum(info.file_size for info in zf.infolist())
            if declared > MAX_INFLATION * len(data) + INFLATION_ALLOWANCE:
                raise ModelFormatError(
                    damaged + f" (its {len(data):,} bytes declare {declared:,} bytes of "
                    f"members, more than {MAX_INFLATION} times their size: a zip bomb, or "
                    "damage)")
            inflate = _inflater()
            meta = loads_json(_member_bytes(zf, data, META, inflate), META)
            if not isinstance(meta, dict):
                raise ModelFormatError(damaged + f" ({META} is not a JSON object)")
            _check_format(meta, name)
            if not isinstance(meta.get("sha256"), dict):
                raise ModelFormatError(damaged + f" ({META} lists no checksums)")
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
        tokens = Vocabulary.of_store(read_json_list(members["vocabulary.json"]))
        arrays = {a: _npy(members[f"{a}.npy"]) for a in ARRAYS}
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
        raise ModelFormatError(f"'{name}' is not a textnb model file (its {META} names "
                               f"format {meta.get('format')!r}); check the --model path")
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        newer = isinstance(version, int) and version > FORMAT_VERSION
        fix = ("upgrade textnb (pip install -U textnb)" if newer
               else "train it again with this version")
        raise ModelFormatError(
            f"model '{name}' has format version {version}, this textnb "
            f"({__version__}) reads version {FORMAT_VERSION}; {fix}")
