"""The files beside a model (its journal and its lock), used only when they are what textnb made.

Whoever can make a file in the model's folder, or open one there, could otherwise turn
them against the model's owner: a symlink named ``MODEL.journal`` would have an append
truncate its target (and a readable target would hold raw mail); a FIFO or a link to
``/dev/zero`` would hang or exhaust every reader; a lock file that other users can open
lets them ``flock`` it and stall every writer for good. So these files are opened

- without following a symlink (``O_NOFOLLOW``) and without waiting on a FIFO
  (``O_NONBLOCK``), then refused unless they are a regular file with one link, owned by
  the model file's owner (or by this process's user, or root, who made it);
- with no permission bits for anyone who cannot write the model: ``0600``, plus the
  group's read and write where the model file is group-writable (``allowed_mode``). A
  lock file with more (an earlier textnb made it ``0644``) is replaced by a new one,
  since whoever opened the old one keeps a descriptor that a ``chmod`` cannot take back.

The model file itself may be a symlink (a model kept elsewhere); ``read_regular`` only
refuses one that is not a regular file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import ModelFormatError

__all__ = ["UntrustedFileError", "allowed_mode", "check_owned", "open_owned", "read_owned",
           "read_regular", "still_named"]


class UntrustedFileError(ModelFormatError):
    """A file beside the model is not one textnb made: a symlink, a FIFO or device, a file
    with several names, another user's, or open to users who cannot write the model."""


def model_stat(model_path: str | os.PathLike) -> os.stat_result | None:
    try:
        return os.stat(model_path)
    except OSError:
        return None


def allowed_mode(model_path: str | os.PathLike) -> int:
    """The permission bits a file beside the model may have: the owner's read and write,
    and the group's where the model file is group-writable."""
    st = model_stat(model_path)
    return 0o600 | (0o060 if st is not None and st.st_mode & 0o020 else 0)


def _owners(model_path: str | os.PathLike) -> set[int]:
    st = model_stat(model_path)
    return {os.geteuid(), 0} | ({st.st_uid} if st is not None else set())


def check_owned(fd: int, path: Path, model_path: str | os.PathLike,
                what: str = "the journal") -> os.stat_result:
    """``fd``'s status if it is a file textnb may trust beside the model (module docstring,
    the permission bits apart); else UntrustedFileError naming it and the fix."""
    st = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(st.st_mode):
        problem = "is not a regular file"
    elif st.st_nlink != 1:
        problem = f"has {st.st_nlink} names (a hard link to another file)"
    elif st.st_uid not in _owners(model_path):
        problem = f"belongs to user id {st.st_uid}, not to the model's owner"
    if problem:
        raise UntrustedFileError(
            f"{what} '{path}' {problem}, so textnb will not use it; remove it (textnb makes "
            "a new one) after checking who put it there")
    return st


def open_owned(path: Path, model_path: str | os.PathLike, flags: int,
               what: str = "the journal") -> int:
    """A descriptor of ``path`` opened with ``flags`` (``O_CREAT`` makes it ``allowed_mode``)
    without following a symlink or waiting on a FIFO, and checked (``check_owned``).
    UntrustedFileError for a symlink or a file textnb did not make; OSError as ``os.open``."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     allowed_mode(model_path))
    except OSError as exc:
        if exc.errno == getattr(os, "ELOOP", 40) or os.path.islink(path):
            raise UntrustedFileError(
                f"{what} '{path}' is a symbolic link, so textnb will not use it; remove it "
                "(textnb makes a new one) after checking who put it there") from None
        raise
    try:
        check_owned(fd, path, model_path, what)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def still_named(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open as ``fd``: a writer that waited for a lock
    while the file was replaced or removed holds a lock no one else uses."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    fst = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (fst.st_dev, fst.st_ino)


def read_owned(path: Path, model_path: str | os.PathLike, what: str = "the journal") -> bytes:
    """The bytes of ``path``, opened by ``open_owned``; FileNotFoundError when there is none."""
    fd = open_owned(path, model_path, os.O_RDONLY, what)
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def read_regular(path: str | os.PathLike) -> bytes:
    """The bytes of the file at ``path`` (a symlink is followed), refused when it is not a
    regular file: a FIFO would hang the reader, a device never end."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ModelFormatError(
                f"model '{path}' is not a regular file (a FIFO, a device or a folder); give "
                "--model the path of a model file")
        os.set_blocking(fd, True)
        return fh.read()
