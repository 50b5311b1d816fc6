"""A file replaced atomically (temporary file, fsync, rename, fsync of the folder), and a
file's mtime advanced for whoever watches it."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from ..errors import write_error


def touch(model_path: Path) -> None:
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
