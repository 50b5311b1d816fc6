"""One writer at a time per model file: an exclusive ``flock`` on ``MODEL.lock`` beside it.

``textnb train``, ``retrain`` and ``forget`` hold the lock from before they load
the model until the new file has been renamed into place, so two updates at
once run one after the other and the second starts from the first one's result
(neither is lost). Readers (``classify``, ``info``) take no lock: the rename is
atomic, so they see the old file or the new one.

The kernel drops an ``flock`` when its holder exits, however it exits (``kill -9``
included), so a crash never leaves a stale lock. The lock file itself is never
deleted: a process may be waiting on it. Where it is replaced (below), a process that
waited on the old file finds, once it holds it, that the name is no longer its file,
and waits on the new one instead, so no two processes ever hold the lock at once.

Anyone who can open a file can ``flock`` it, read-only or not; so the lock file has
the model's owner's permission bits only (``owned_files.allowed_mode``: ``0600``, or
the group's too where the model is group-writable), and one that others could open
(an earlier textnb made it ``0644``) is replaced before it is used
(docs/security.md#the-files-beside-the-model).
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import TextnbError
from .owned_files import UntrustedFileError, allowed_mode, open_owned, still_named

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
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        fd = _open_lock(path, model_path)
        try:
            _take(fd, deadline, model_path, path, timeout)
            if still_named(fd, path):
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # replaced while this process waited: the new one is the lock
    try:
        yield path
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _take(fd: int, deadline: float | None, model_path, path: Path, timeout) -> None:
    if deadline is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise ModelLockedError(
                    f"another textnb process is updating '{model_path}' (it holds "
                    f"'{path}') and did not finish within {timeout:g} s; wait for it "
                    "or raise --wait") from None
            time.sleep(_POLL_SECONDS)


def _open_lock(path: Path, model_path: str | os.PathLike) -> int:
    """A descriptor of the lock file that only those who can write the model could have
    opened (``owned_files``): one that others may open, or that is not textnb's, is
    replaced by a new one first (a process that already opened it keeps its descriptor,
    so a ``chmod`` would not do). A holder of the replaced file then locks a file no
    one else uses; ``model_lock``'s caller waits on the new one."""
    for _ in range(3):
        try:
            fd = open_owned(path, model_path, os.O_RDWR | os.O_CREAT, "the model's lock file")
        except UntrustedFileError:
            _replace_lock(path, model_path)
            continue
        if os.fstat(fd).st_mode & 0o777 & ~allowed_mode(model_path):
            os.close(fd)
            _replace_lock(path, model_path)
            continue
        return fd
    raise UntrustedFileError(
        f"the model's lock file '{path}' keeps being replaced by a file textnb did not "
        "make; check who writes to the folder of the model")


def _replace_lock(path: Path, model_path: str | os.PathLike) -> None:
    """Put a new, private lock file in place of ``path`` (rename: atomic, and a symlink
    itself is replaced, not its target)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".new", dir=path.parent)
    try:
        os.fchmod(fd, allowed_mode(model_path))
        os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise UntrustedFileError(
            f"the model's lock file '{path}' can be opened by users who cannot write the "
            f"model, and could not be replaced ({exc.strerror or exc}); remove it") from None


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
