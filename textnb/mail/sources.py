"""Every way messages come in, as lazy iterators of RawMessage.

Sources: a single file, an mbox, a Maildir, a directory tree of one-message files,
standard input ('-'), a TREC/bogofilter index ('spam PATH' lines) and
'label<TAB>text' files (the SMS Spam Collection form).

Nothing here holds more than two messages in memory: a 100,000-message mbox or
directory streams through. Paths are checked when an iterator is created, so a
typo fails before any work; file contents are read only as the iterator advances.
An input that cannot be read (permission denied, gone, a folder where a file was
listed) raises SourceError, or inside ``textnb.mail.unreadable.collecting()`` is skipped
and counted.
"""

from __future__ import annotations

import io
import os
import re
import stat
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import BinaryIO

from ..errors import MailboxFormatError, SourceError
from ..labels import LABELS
from .unreadable import lenient, unreadable

__all__ = ["RawMessage", "SourceFile", "iter_messages", "iter_index", "iter_tsv", "iter_labelled",
           "plan_labelled", "plan_unlabelled", "read_planned"]

_BLANK = (b"\n", b"\r\n")

PathSpec = str | os.PathLike


@dataclass(frozen=True)
class RawMessage:
    """One message as read, before any parsing.

    source (str): file path; 'PATH:N' for message N (1-based) of an mbox; '-' for
        standard input ('-:N' for an mbox there); 'PATH:LINE' for a TSV line. Index
        entries are named by their message file.
    raw (bytes): the message; for an mbox, without its 'From ' line and unquoted.
    label (str | None): 'spam', 'ham' or None when unlabelled.
    """

    source: str
    raw: bytes
    label: str | None


# -- checks and errors ----------------------------------------------------------


def _missing(path: PathSpec) -> SourceError:
    return SourceError(
        f"no such file or directory: '{os.fspath(path)}'; check the path (use '-' for standard input)"
    )


def _unreadable(path: PathSpec, err: OSError) -> SourceError:
    reason = (err.strerror or str(err)).lower()
    return SourceError(f"cannot read '{os.fspath(path)}': {reason}; check that it exists and is readable")


def _skip(error: SourceError, where: PathSpec, err: OSError | None = None, why: str = "") -> None:
    """Skip an input that cannot be read, counted (textnb.mail.unreadable), or raise ``error``."""
    error.__cause__ = err
    unreadable(error, os.fspath(where), why or (err.strerror or str(err)).lower())


def _existing(path: PathSpec) -> Path:
    path = Path(path)
    if not path.exists():
        raise _missing(path)
    return path


def _check_label(value: str, where: str) -> str:
    """The label in lower case; MailboxFormatError naming ``where`` otherwise."""
    label = value.strip().lower()
    if label not in LABELS:
        raise MailboxFormatError(f"{where}: unknown label '{value}'; use 'spam' or 'ham'")
    return label


# -- mbox -----------------------------------------------------------------------


def _finish(lines: list[bytes]) -> bytes:
    if lines and lines[-1] in _BLANK:
        lines.pop()  # the blank line that separates a message from the next 'From '
    return b"".join(lines)


def _split_mbox(lines: Iterable[bytes]) -> Iterator[bytes]:
    """Messages of an mbox, one at a time.

    A message starts at a 'From ' line at the start of the input or after a blank
    line. The 'From ' line is dropped, and one '>' is removed from quoted lines
    ('>From ' -> 'From ', '>>From ' -> '>From ': mboxrd, which reads mboxo too).
    """
    message: list[bytes] | None = None
    after_blank = True
    for line in lines:
        if after_blank and line.startswith(b"From "):
            if message is not None:
                yield _finish(message)
            message = []
            after_blank = False
            continue
        if line.startswith(b">") and line.lstrip(b">").startswith(b"From "):
            line = line[1:]
        if message is not None:
            message.append(line)
        after_blank = line in _BLANK
    if message is not None:
        yield _finish(message)


# An mbox file is read this far at once to see whether it holds one message (99.7% of
# SpamAssassin's files are shorter); a longer one is split line by line as it streams
# in, so a large mbox on a pipe is read as the messages are taken.
_WHOLE = 1 << 16
# A line that _split_mbox would change or cut at, after a line break: 'From ' (a new
# message if the line before is blank) or a quoted '>From '.
_MBOX_MARK = re.compile(rb"\n>*From ")


def _one_mbox_message(rest: bytes) -> bytes | None:
    """What ``_split_mbox`` makes of a 'From ' line and ``rest`` when it finds one message
    and changes no line (no ``_MBOX_MARK``, no quoted first line), else None. Corpora stored one
    message a file with its 'From ' line (SpamAssassin's) take this path: a search in C
    instead of a Python step per line, because the calling process that reads shares
    the cores with the workers (docs/design/parsing-speed.md#reading-files)."""
    if b"From " in rest and (_MBOX_MARK.search(rest) or rest[:1] == b">"
                             and rest.lstrip(b">").startswith(b"From ")):
        return None
    if rest.endswith(b"\n\r\n") or rest == b"\r\n":
        return rest[:-2]  # the blank line that would separate it from a next message
    if rest.endswith(b"\n\n") or rest == b"\n":
        return rest[:-1]
    return rest


def _read_stream(stream: BinaryIO, name: str, label: str | None) -> Iterator[RawMessage]:
    """One message, or an mbox when the first line is 'From ' (named 'NAME:N' if > 1)."""
    first = stream.readline()
    if not first.startswith(b"From "):
        yield RawMessage(name, first + stream.read(), label)
        return
    rest = stream.read(_WHOLE)
    if len(rest) < _WHOLE and (one := _one_mbox_message(rest)) is not None:
        yield RawMessage(name, one, label)
        return
    if not rest.endswith(b"\n"):
        rest += stream.readline()  # so that the lines of rest and of the stream are whole
    messages = _split_mbox(chain([first], io.BytesIO(rest), stream))
    # Hold the first message until we know whether a second exists: a file of one
    # message keeps its plain name, the way a one-message corpus file should.
    held = next(messages)
    second = next(messages, None)
    if second is None:
        yield RawMessage(name, held, label)
        return
    yield RawMessage(f"{name}:1", held, label)
    yield RawMessage(f"{name}:2", second, label)
    for number, raw in enumerate(messages, start=3):
        yield RawMessage(f"{name}:{number}", raw, label)


_READ_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def _read_small(fd: int) -> bytes | None:
    """The bytes of an open regular file of at most ``_WHOLE`` bytes, read in one system
    call; None, with nothing read, for any other file (read as a stream). Python's file
    object spends five more calls on a file (its buffer's size, a terminal check, a
    seek, reads to the end), and the calling process reads the files beside the
    workers (docs/design/parsing-speed.md#reading-files)."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > _WHOLE:
        return None
    whole = os.read(fd, info.st_size + 1)
    if len(whole) <= info.st_size:
        return whole
    os.lseek(fd, 0, os.SEEK_SET)  # it grew as we read: read it as a stream
    return None


def _read_file(path: PathSpec, label: str | None, *, mbox: bool = True,
               vanish_ok: bool = False) -> Iterator[RawMessage]:
    """Messages of one file; OSError becomes SourceError naming the file."""
    try:
        fd = os.open(path, _READ_FLAGS)
        try:
            whole = _read_small(fd)
            if whole is not None and not (mbox and whole.startswith(b"From ")):
                yield RawMessage(os.fspath(path), whole, label)  # what _read_stream makes of it
                return
            # The same descriptor, not the path again: a FIFO opened twice loses its writer.
            with io.BytesIO(whole) if whole is not None else open(fd, "rb", closefd=False) as stream:
                if mbox:
                    yield from _read_stream(stream, os.fspath(path), label)
                else:
                    yield RawMessage(os.fspath(path), stream.read(), label)
        finally:
            os.close(fd)
    except FileNotFoundError as err:
        # A mail client may move a Maildir message from new/ to cur/ while we
        # walk; the message will be seen (or was seen) under its new name.
        if not vanish_ok:
            _skip(_missing(path), path, err)
    except OSError as err:
        _skip(_unreadable(path, err), path, err)


# -- files, directories, Maildir, stdin ----------------------------------------------


def _files_below(folder: Path) -> Iterator[Path]:
    """Regular files below ``folder`` in sorted order, skipping hidden names.

    Each directory is listed when the walk reaches it, so only one listing per
    level is in memory. Directory symlinks are not followed (no cycles).
    """
    try:
        with os.scandir(folder) as entries:
            ordered = sorted(entries, key=lambda entry: entry.name)
    except OSError as err:
        _skip(_unreadable(folder, err), folder, err)
        return
    for entry in ordered:
        if entry.name.startswith("."):
            continue
        if entry.is_dir(follow_symlinks=False):
            yield from _files_below(Path(entry.path))
        elif entry.is_file():
            yield Path(entry.path)


def _is_maildir(folder: Path) -> bool:
    try:
        return (folder / "cur").is_dir() and (folder / "new").is_dir()
    except PermissionError:  # a folder we may not enter: reading it will say so (or skip it)
        return False


def _read_maildir(folder: Path, label: str | None) -> Iterator[RawMessage]:
    # Maildir files are one message each and never mbox-quoted, so a body line
    # 'From ...' after a blank line must not split them: no mbox detection.
    for sub in ("cur", "new"):  # tmp/ holds deliveries still being written
        for path in _files_below(folder / sub):
            yield from _read_file(path, label, mbox=False, vanish_ok=True)


def _read_tree(folder: Path, label: str | None) -> Iterator[RawMessage]:
    for path in _files_below(folder):
        yield from _read_file(path, label, vanish_ok=True)


def _read_stdin(label: str | None) -> Iterator[RawMessage]:
    # Looked up when iteration starts, not at import, so tests and callers can
    # replace sys.stdin. Empty input yields no message.
    stream = sys.stdin.buffer
    for message in _read_stream(stream, "-", label):
        if message.raw or message.source != "-":
            yield message


def iter_messages(spec: PathSpec, label: str | None = None) -> Iterator[RawMessage]:
    """Every message in ``spec``, lazily.

    spec (str | PathLike): '-' for standard input (one message, or an mbox if it
        starts with 'From '); a Maildir (has cur/ and new/: their files, sorted);
        any other directory (every regular file below it, sorted, hidden names
        skipped); a file (an mbox when its first line is 'From ', else one message).
    label (str | None): 'spam', 'ham' or None, attached to every message.
    YIELDS (RawMessage): in file order. Raises SourceError at once for a missing path.
    """
    if isinstance(spec, bytes):
        raise TypeError(f"spec must be a str or os.PathLike, got bytes {spec!r}; decode it first")
    if label is not None and label not in LABELS:
        raise ValueError(f"label must be 'spam', 'ham' or None, got {label!r}")
    if os.fspath(spec) == "-":
        return _read_stdin(label)
    path = _existing(spec)
    if path.is_dir():
        return _read_maildir(path, label) if _is_maildir(path) else _read_tree(path, label)
    return _read_file(path, label)


# -- labelled lists ---------------------------------------------------------------


def _index_entries(index: Path, base: Path, checking: bool = False
                   ) -> Iterator[tuple[str, Path, str]]:
    """(label, message path, 'INDEX:LINE') per entry; MailboxFormatError on a bad line.

    An entry whose file is missing is skipped (textnb.mail.unreadable) or raised; when
    ``checking`` and skipping, it is left for the reading pass to record, once.
    """
    try:
        with open(index, "rb") as stream:
            for lineno, line in enumerate(stream, start=1):
                text = line.decode("utf-8", "surrogateescape").strip()
                if not text or text.startswith("#"):
                    continue
                where = f"{index}:{lineno}"
                fields = text.split(None, 1)
                if len(fields) < 2:
                    raise MailboxFormatError(
                        f"{where}: expected 'spam PATH' or 'ham PATH', got '{text}'; add the label or the path"
                    )
                label = _check_label(fields[0], where)
                target = base / fields[1].strip()
                if not target.is_file():
                    if not (checking and lenient()):
                        folder = target.is_dir()
                        kind = "a directory" if folder else "no such file"
                        _skip(MailboxFormatError(
                            f"{where}: no such message file '{target}'{' (a directory)' * folder}; "
                            f"paths are relative to '{base}' unless absolute - fix the line or "
                            "move the index"
                        ), target, why=f"{kind}, listed at {where}")
                    continue
                yield label, target, where
    except OSError as err:
        if not (checking and lenient()):
            _skip(_unreadable(index, err), index, err)


def _read_index(index: Path, base: Path) -> Iterator[RawMessage]:
    for label, target, _ in _index_entries(index, base):
        yield from _read_file(target, label)


def iter_index(path: PathSpec, base: Path | None = None) -> Iterator[RawMessage]:
    """Messages listed in a TREC/bogofilter index: lines 'spam PATH' or 'ham PATH'.

    path (str | PathLike): the index. Labels are case-insensitive; blank lines and
        '#' comments are skipped.
    base (Path | None): folder that relative PATHs start from; default the index's folder.
    YIELDS (RawMessage): in index order. The whole index is checked first (labels
        and that every file exists; it holds paths, not messages), so a bad line
        70,000 fails with MailboxFormatError before any message is read. A missing
        file fails there too, unless unreadable inputs are being skipped
        (textnb.mail.unreadable): then it is counted when the reading reaches it.
    """
    index = _existing(path)
    base = index.parent if base is None else Path(base)
    for _ in _index_entries(index, base, checking=True):
        pass
    return _read_index(index, base)


def _read_tsv(path: Path) -> Iterator[RawMessage]:
    try:
        with open(path, "rb") as stream:
            for lineno, line in enumerate(stream, start=1):
                line = line.rstrip(b"\r\n")
                if not line.strip() or line.startswith(b"#"):
                    continue
                where = f"{path}:{lineno}"
                label, tab, text = line.partition(b"\t")
                if not tab:
                    shown = line[:40].decode("utf-8", "replace")
                    raise MailboxFormatError(
                        f"{where}: no TAB in '{shown}'; expected 'spam<TAB>text' or 'ham<TAB>text'"
                    )
                # A leading empty line says "no header section" (RFC 5322 ends the headers at
                # the first empty line): without it 62 of the 5,574 SMS texts, such as
                # 'K:)k:)good', parse as a header field and lose their words.
                yield RawMessage(where, b"\n" + text,
                                 _check_label(label.decode("utf-8", "replace"), where))
    except OSError as err:
        _skip(_unreadable(path, err), path, err)


def iter_tsv(path: PathSpec) -> Iterator[RawMessage]:
    """Messages of a 'label<TAB>text' file, one per line (the SMS Spam Collection form).

    YIELDS (RawMessage): source 'PATH:LINE', raw an empty line then the text's UTF-8 bytes
        (a message with no headers).
        A bad label raises MailboxFormatError when its line is reached.
    """
    return _read_tsv(_existing(path))


def iter_labelled(spam: Sequence[PathSpec] = (), ham: Sequence[PathSpec] = (),
                  index: Sequence[PathSpec] = (), tsv: Sequence[PathSpec] = ()) -> Iterator[RawMessage]:
    """Chain spam sources, ham sources, index files and TSV files, in that order.

    spam, ham (Sequence[str | PathLike]): specs for iter_messages, labelled accordingly.
    index, tsv (Sequence[str | PathLike]): files for iter_index and iter_tsv.
    YIELDS (RawMessage): lazily; every path is checked before the first message.
    """
    for name, specs in (("spam", spam), ("ham", ham), ("index", index), ("tsv", tsv)):
        # The classic misuse: a single path would be iterated character by character.
        if isinstance(specs, (str, bytes, os.PathLike)):
            raise TypeError(f"{name}= expects a list of paths, got the single path {specs!r}; "
                            f"wrap it: {name}=[{specs!r}]")
    iterators = [iter_messages(spec, "spam") for spec in spam]
    iterators += [iter_messages(spec, "ham") for spec in ham]
    iterators += [iter_index(path) for path in index]
    iterators += [iter_tsv(path) for path in tsv]
    return chain.from_iterable(iterators)


# -- plan, then read: the inputs as a list of files (what the engines split) ------------


@dataclass(frozen=True)
class SourceFile:
    """One input file, read exactly as the iterators above read it.

    path (str): the file ('-' for standard input). label (str | None): 'spam', 'ham' or
        None (TSV lines carry their own).
    form (str): 'mail' (one message, or an mbox when it starts with 'From '), 'maildir'
        (one message, never split), 'tsv' ('label<TAB>text' lines) or 'stdin'.
    vanish_ok (bool): a file gone by the time it is read is skipped (directory walks).
    """

    path: str
    label: str | None
    form: str = "mail"
    vanish_ok: bool = False


def _plan_spec(spec: PathSpec, label: str | None) -> Iterator[SourceFile]:
    if os.fspath(spec) == "-":
        yield SourceFile("-", label, "stdin")
        return
    path = _existing(spec)
    if not path.is_dir():
        yield SourceFile(str(path), label)
    elif _is_maildir(path):
        for sub in ("cur", "new"):
            for file in _files_below(path / sub):
                yield SourceFile(str(file), label, "maildir", vanish_ok=True)
    else:
        for file in _files_below(path):
            yield SourceFile(str(file), label, vanish_ok=True)


def _plan_index(index: PathSpec) -> Iterator[SourceFile]:
    path = _existing(index)
    for label, target, _ in _index_entries(path, path.parent):
        yield SourceFile(str(target), label)


def plan_labelled(spam: Sequence[PathSpec] = (), ham: Sequence[PathSpec] = (),
                  index: Sequence[PathSpec] = (), tsv: Sequence[PathSpec] = ()
                  ) -> list[SourceFile]:
    """The files of labelled sources, in ``iter_labelled``'s order (spam, ham, index, TSV).

    Lists directories and reads index files (for their paths), never a message: the
    plan is small (one entry a file) and can be cut into runs for several processes.
    ``read_planned(plan)`` yields what ``iter_labelled`` would.
    RAISES SourceError for a missing path, MailboxFormatError for a bad index line.
    """
    for name, specs in (("spam", spam), ("ham", ham), ("index", index), ("tsv", tsv)):
        if isinstance(specs, (str, bytes, os.PathLike)):
            raise TypeError(f"{name}= expects a list of paths, got the single path {specs!r}; "
                            f"wrap it: {name}=[{specs!r}]")
    files = [f for spec in spam for f in _plan_spec(spec, "spam")]
    files += [f for spec in ham for f in _plan_spec(spec, "ham")]
    files += [f for path in index for f in _plan_index(path)]
    files += [SourceFile(str(_existing(path)), None, "tsv") for path in tsv]
    return files


def plan_unlabelled(sources: Sequence[PathSpec] = (), index: Sequence[PathSpec] = (),
                    tsv: Sequence[PathSpec] = ()) -> list[SourceFile]:
    """The files of messages to score: plain sources (standard input when nothing is
    given), index files (their labels kept, for evaluation), TSV files."""
    if not (sources or index or tsv):
        sources = ["-"]
    files = [f for spec in sources for f in _plan_spec(spec, None)]
    files += [f for path in index for f in _plan_index(path)]
    files += [SourceFile(str(_existing(path)), None, "tsv") for path in tsv]
    return files


def read_planned(files: Iterable[SourceFile]) -> Iterator[RawMessage]:
    """The messages of planned files, in order (as the iterators above yield them)."""
    for f in files:
        if f.form == "stdin":
            yield from _read_stdin(f.label)
        elif f.form == "tsv":
            yield from _read_tsv(Path(f.path))
        else:
            # The planned path as it is (a str): a Path a file is a noticeable share of
            # reading small files (docs/design/parsing-speed.md#reading-files).
            yield from _read_file(f.path, f.label, mbox=f.form != "maildir",
                                  vanish_ok=f.vanish_ok)
