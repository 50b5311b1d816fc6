"""One writer at a time per model file: an exclusive ``flock`` on ``MODEL.lock`` beside it.

``textnb train``, ``retrain`` and ``forget`` hold the lock from before they load
the model until the new file has been renamed into place, so two updates at
once run one after the other and the second starts from the first one's result
(neither is lost). Readers (``classify``, ``info``) take no lock: the rename is
atomic, so they see the old file or the new one.

The kernel drops an ``flock`` when its holder exits, however it exits (``kill -9``
included), so a crash never leaves a stale lock. The lock file itself is never
deleted: a process may be waiting on it, and if the file were replaced a third
process could lock the new one while the first still holds the old one.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import TextnbError

__all__ = ["ModelLockedError", "lock_path", "model_lock", "remove_stale_temp_files"]

# How often a waiter with a timeout retries the lock.
_POLL_SECONDS = 0.05


class ModelLockedError(TextnbError):
    """Another process kept the model's lock for longer than the timeout."""


def lock_path(model_path: str | os.PathLike) -> Path:
    model_path = Path(model_path)
    return model_path.with_name(model_path.name + ".lock")


@contextmanager
def model_lock(model_path: str | os.PathLike, timeout: float | None = None) -> Iterator[Path]:
    """Hold the exclusive lock of ``model_path`` for the body of the ``with``.

    timeout (float | None): seconds to wait for another holder; None waits as long
        as it takes. On timeout, ModelLockedError names the lock file.
    YIELDS (Path): the lock file.
    """
    path = lock_path(model_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if timeout is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise ModelLockedError(
                            f"another textnb process is updating '{model_path}' (it holds "
                            f"'{path}') and did not finish within {timeout:g} s; wait for it "
                            "or raise --wait") from None
                    time.sleep(_POLL_SECONDS)
        yield path
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def remove_stale_temp_files(model_path: str | os.PathLike, older_than: float = 600.0) -> int:
    """Delete temporary files that a killed writer left beside the model; returns how many.

    ``store.atomic_write`` writes ``.MODEL.XXXX.tmp`` and renames it; a writer killed
    before the rename leaves it behind. Only files older than ``older_than`` seconds
    go: a writer that takes no lock may still be writing a fresh one (and if one were
    deleted under it, its rename would fail and leave the old model in place).
    """
    model_path = Path(model_path)
    cutoff = time.time() - older_than
    removed = 0
    for tmp in model_path.parent.glob(f".{model_path.name}.*.tmp"):
        try:
            if tmp.stat().st_mtime < cutoff:
                tmp.unlink()
                removed += 1
        except FileNotFoundError:
            pass
    return removed
