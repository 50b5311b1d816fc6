"""Two start-up steps at once: a model load beside spaCy's import.

A command that scores or learns first loads its model and imports spaCy (0.2-0.3 s
each on Enron 1-3's model). ``beside`` runs the load on a second thread. The load
spends most of its time in C that releases the GIL (inflating, SHA-256, hashing the
vocabulary); the import is Python and holds it. Side by side, the load mostly uses the
second core: loading the Enron model and importing spaCy took 0.35-0.57 s wall against
0.49-0.98 one after the other (two runs of 5 rounds interleaved), for 0.1-0.2 s more
CPU in all, as the threads hand the GIL back and forth (docs/benchmarks.md, stop 27).

``beside_in_child`` runs the load in a forked child process instead, where nothing
shares its GIL. Timed inside the load thread, loading Enron's model with its index took
0.23 s alone and 0.38-0.47 beside the import: each return from a GIL-free call waits
for the importing thread to let go, and the Python parts (NumPy's header parsing, the
filter's assembly) run in turns with the import. In a child the load takes what it
takes alone, and the parent takes its result over from shared memory (0.015-0.035 s):
the import and the load with the index, 0.385 -> 0.324 s on Enron's model, 0.353 ->
0.337 on SpamAssassin's (medians of 7, interleaved; ``store.load_while`` says when the
child is worth it; docs/benchmarks.md, stop 33).

What comes back is JSON-able facts and NumPy arrays of numbers, never a pickle: the
child writes them into an anonymous memory file (``memfd_create``: no name in any file
system, so only this process and its child hold it) and the parent maps that file
copy-on-write, so the arrays are not copied again and stay writable.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import threading
from collections.abc import Callable
from typing import TypeVar

import numpy as np

__all__ = ["beside", "beside_in_child", "can_fork_child"]

T = TypeVar("T")


def beside(task: Callable[[], T], work: Callable[[], object]) -> T:
    """``task()`` on a second thread while ``work()`` runs on this one; RETURNS what
    ``task`` returns. An error of either is raised here once both are done (``work``'s
    first), so no thread outlives the call."""
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["value"] = task()
        except BaseException as exc:  # noqa: BLE001 - raised in the calling thread below
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="textnb-load", daemon=True)
    thread.start()
    try:
        work()
    finally:
        thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


# -- a forked child ---------------------------------------------------------------

Arrays = tuple[dict, dict[str, np.ndarray]]  # JSON-able facts, and named arrays of numbers

_ALIGN = 64        # each array starts at a multiple of this (a cache line)
_HEAD = struct.Struct("<Q")  # the JSON header's length, before it
_DONE = b"1"       # the child's last write: the memory file is complete


def can_fork_child() -> bool:
    """Whether ``beside_in_child`` can fork here: a platform with ``fork`` and memory
    files (Linux), and no other thread in this process (a fork copies only the calling
    thread, so a lock another thread holds would stay held in the child)."""
    return (hasattr(os, "fork") and hasattr(os, "memfd_create")
            and threading.active_count() == 1)


def beside_in_child(task: Callable[[], Arrays], work: Callable[[], object]) -> Arrays:
    """``task()`` in a forked child process while ``work()`` runs here; RETURNS what
    ``task`` returned, its arrays mapped from the child's memory file.

    ``task`` must return ``(facts, arrays)``: a JSON-able dict and a dict of NumPy
    arrays of numbers. If the child does not deliver (``task`` raised, the child was
    killed, the fork failed), ``task`` runs again here once ``work`` is done, so its
    error is raised here with its own traceback. An error of ``work`` is raised at once:
    the child is killed and reaped first, so no process outlives the call.
    """
    try:
        memory = os.memfd_create("textnb-beside", os.MFD_CLOEXEC)
    except OSError:
        return beside(task, work)
    try:
        try:
            ready, done = os.pipe()
        except OSError:  # out of descriptors: the thread needs none
            return beside(task, work)
        try:
            pid = os.fork()
        except OSError:
            os.close(ready)
            os.close(done)
            return beside(task, work)
        if pid == 0:  # the child: never returns
            _deliver(task, memory, done)
        os.close(done)
        try:
            work()
            delivered = os.read(ready, 1) == _DONE
        except BaseException:
            _end(pid, kill=True)
            raise
        finally:
            os.close(ready)
        _end(pid)
        if delivered:
            result = _mapped(memory)
            if result is not None:
                return result
    finally:
        os.close(memory)
    return task()


def _deliver(task: Callable[[], Arrays], memory: int, done: int) -> None:
    """The child's whole life: ``task()``, written to ``memory``, then one byte on
    ``done``. Leaves by ``os._exit``: none of the parent's exit handlers run here, and
    its unflushed output is not written twice."""
    status = 1
    try:
        facts, arrays = task()
        _write(memory, facts, arrays)
        os.write(done, _DONE)
        status = 0
    except BaseException:  # noqa: BLE001 - the parent runs the task again, and raises
        pass
    finally:
        os._exit(status)


def _write(memory: int, facts: dict, arrays: dict[str, np.ndarray]) -> None:
    """The memory file's layout: the header's length, the JSON header (``facts``, and
    each array's name, dtype, shape and offset), then each array's bytes at its offset."""
    arrays = {name: np.ascontiguousarray(a) for name, a in arrays.items()}
    if any(a.dtype.hasobject for a in arrays.values()):
        raise TypeError("only arrays of numbers cross to the parent")
    layout, offset = [], 0
    for name, a in arrays.items():
        layout.append([name, a.dtype.str, list(a.shape), offset])
        offset = -(-(offset + a.nbytes) // _ALIGN) * _ALIGN
    header = json.dumps({"facts": facts, "arrays": layout}).encode("utf-8")
    start = -(-(_HEAD.size + len(header)) // _ALIGN) * _ALIGN
    os.ftruncate(memory, start + offset)
    with open(memory, "r+b", buffering=0, closefd=False) as out:
        out.write(_HEAD.pack(len(header)) + header)
        for (_, _, _, at), a in zip(layout, arrays.values()):
            out.seek(start + at)
            out.write(memoryview(a).cast("B"))


def _mapped(memory: int) -> Arrays | None:
    """The facts and arrays of a complete memory file, mapped copy-on-write (writable;
    a write copies only its page). None when the file does not read as ``_write``
    leaves one."""
    try:
        size = os.fstat(memory).st_size
        view = mmap.mmap(memory, size, flags=mmap.MAP_PRIVATE,
                         prot=mmap.PROT_READ | mmap.PROT_WRITE)
        (n,) = _HEAD.unpack_from(view, 0)
        header = json.loads(bytes(view[_HEAD.size:_HEAD.size + n]))
        start = -(-(_HEAD.size + n) // _ALIGN) * _ALIGN
        arrays = {}
        for name, dtype, shape, at in header["arrays"]:
            dtype = np.dtype(dtype)
            count = int(np.prod(shape, dtype=np.int64))
            arrays[name] = (np.frombuffer(view, dtype=dtype, count=count, offset=start + at)
                            .reshape(shape) if count else np.zeros(shape, dtype=dtype))
        return header["facts"], arrays
    except (ValueError, KeyError, TypeError, OSError, struct.error):
        return None


def _end(pid: int, kill: bool = False) -> None:
    """Reap the child (killed first if ``kill``), so that it is never left a zombie. A
    program that ignores SIGCHLD has its children reaped for it: nothing to wait for."""
    if kill:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
