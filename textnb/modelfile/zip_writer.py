"""The threaded ZIP member writer: a model file's members deflated, hashed and written on a
second thread while the calling one makes their bytes, and NumPy arrays written as views."""

from __future__ import annotations

import hashlib
import io
import threading
import zipfile
from collections.abc import Callable

import numpy as np

# ISA-L's level 1 (python-isal, where installed: _deflater), which writes the same
# format several times faster than zlib's level 1, and smaller
# (docs/design/counting-and-scoring.md#saving).
ISAL_LEVEL = 1


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


class MemberWriter(io.RawIOBase):
    """The members of ``zf`` made on this thread, and deflated, hashed and written on a
    second one: ``add(name, write)`` calls ``write(self)``, whose bytes go, in order, to a
    new member, and ``checksums`` maps each member to its SHA-256 once the block ends.

    Making the bytes (the vocabulary's JSON in C, ``speedups.json_items``), ISA-L's
    deflate and hashlib's SHA-256 all release the GIL, so the two threads run on two
    cores, which the training's workers have left by then
    (docs/design/counting-and-scoring.md#saving); the members are the same bytes.
    At most ``_PIPED_CHUNKS`` chunks wait between the threads (an array's are views of
    it, ``write_npy``), and an error of the writing thread (a full disk) is raised on
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

    def __enter__(self) -> MemberWriter:
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

    def add(self, name: str, write: Callable[[MemberWriter], object]) -> None:
        self._put(name)
        write(self)
        self._put(_END_OF_MEMBER)

    def write(self, data) -> int:
        # Bytes, and views of arrays nothing writes to while they are saved (write_npy),
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


# Chunks waiting between ``MemberWriter``'s two threads.
_PIPED_CHUNKS = 4
_END_OF_MEMBER = object()


# Bytes of an array in a view passed to the saving thread (``write_npy``).
_NPY_PIECE = 1 << 20


def write_npy(out, array: np.ndarray) -> None:
    """``np.save(out, array)``'s bytes (tests/test_store.py), the data written as views of
    at most ``_NPY_PIECE`` bytes of the array itself, a row at a time when only its rows
    are contiguous (the counts' buffer has spare columns): np.save copies 16 MB at a
    time, and with the saving thread (``MemberWriter``) a few such copies would wait at
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
