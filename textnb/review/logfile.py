"""The review page's connections to the verdict log, let go of when the log is replaced.

An operator may move the log aside (the fix for a damaged one) or delete it while the
scorer and the page run. A connection keeps the file it opened, so without a check the
page would go on showing the old rows and teach against them, and SQLite, which names
a log's write-ahead files by its path, would have the old file's last readers share
them with the new log the scorer begins there, corrupting both. So every use of a
connection first compares the file at the path with the one open (a stat), and a
watcher thread does the same once a second while the page is idle: a replaced log's
connections are closed at once, the scorer (:mod:`textnb.review.recorder`) begins the
new one only when nobody has the old one open, and the page opens that.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from contextlib import contextmanager

from .store import StoreError, VerdictStore

__all__ = ["LogConnections", "WATCH_SECONDS", "held_elsewhere"]

# How often an idle page looks whether the log at its path was replaced: the scorer's
# new log waits for the page to let go of the old one (its verdicts wait in the queue).
WATCH_SECONDS = 1.0


class LogConnections:
    """One connection per use ('read': the event loop's pages; 'teach', 'stats': worker
    threads), each used by one thread at a time and opened on first use.

    path (Path): the verdict log; days, max_bytes: the store's bounds; wait_ms: how
    long each use waits for a lock, by use ({'read': 100}; others: the store's default).
    """

    def __init__(self, path, days: float, max_bytes: int, wait_ms: dict | None = None):
        self.path, self.days, self.max_bytes = path, days, max_bytes
        self.wait_ms = wait_ms or {}
        self._locks: dict[str, threading.Lock] = {}
        self._stores: dict[str, VerdictStore] = {}
        self._registry = threading.Lock()
        self._watcher: threading.Thread | None = None

    @contextmanager
    def use(self, kind: str):
        """The ``kind`` connection, for one thread at a time; StoreError when the log
        is missing, damaged or locked."""
        with self._registry:
            lock = self._locks.setdefault(kind, threading.Lock())
        with lock:
            store = self._stores.get(kind)
            if store is not None and store.replaced():
                self._close(kind)
                store = None
            if store is None:
                wait = self.wait_ms.get(kind)
                store = VerdictStore(self.path, self.days, self.max_bytes, create=False,
                                     **({"wait_ms": wait} if wait is not None else {}))
                self._stores[kind] = store
                self._watch()
            yield store

    def let_go_if_replaced(self) -> None:
        """Close every connection whose file is no longer the log at the path."""
        with self._registry:
            kinds = list(self._locks.items())
        for kind, lock in kinds:
            with lock:
                store = self._stores.get(kind)
                if store is not None and store.replaced():
                    self._close(kind)

    def _close(self, kind: str) -> None:
        try:
            self._stores.pop(kind).close()
        except Exception:  # noqa: BLE001 - a replaced file: nothing left to lose
            pass

    def _watch(self) -> None:
        if self._watcher is not None:
            return
        me = weakref.ref(self)

        def watch():
            while True:
                time.sleep(WATCH_SECONDS)
                connections = me()
                if connections is None:
                    return
                try:
                    connections.let_go_if_replaced()
                except StoreError:
                    pass
                del connections

        self._watcher = threading.Thread(target=watch, name="textnb-web-log", daemon=True)
        self._watcher.start()


def held_elsewhere(path) -> bool:
    """Whether a connection, of any process, has the write-ahead files at ``path`` open:
    each holds a shared lock on byte 128 of the ``-shm`` file (SQLite's "dead man's
    switch") while open. Write-ahead files nobody holds were left by a process that
    died, with the old file's last writes: they are renamed ``PATH.orphaned-wal`` and
    ``-shm``, out of a new log's way.

    The test is an open file description lock, which conflicts with SQLite's record
    locks even in this process; and the descriptor is never closed, since closing any
    descriptor of a file drops every record lock this process's connections hold on it.
    """
    import fcntl
    import struct

    shm = f"{path}-shm"
    try:
        found = os.stat(shm)
    except FileNotFoundError:
        return False
    key = (found.st_dev, found.st_ino)
    fd = _SHM_FDS.get(key)
    if fd is None:
        try:
            fd = _SHM_FDS[key] = os.open(shm, os.O_RDWR)
        except FileNotFoundError:
            return False
    try:  # struct flock: type, whence, start, length, pid (0 for these locks)
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi", fcntl.F_WRLCK, 0, 128, 1, 0))
    except OSError:
        return True
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi", fcntl.F_UNLCK, 0, 128, 1, 0))
    for suffix in ("-wal", "-shm"):
        try:
            os.replace(f"{path}{suffix}", f"{path}.orphaned{suffix}")
        except FileNotFoundError:
            pass
    return False


# held_elsewhere's descriptors of -shm files, by (device, inode): one per file it looked at
_SHM_FDS: dict[tuple[int, int], int] = {}
