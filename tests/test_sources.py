"""Tests for textnb.mail.sources: every way messages come in, lazily."""

import inspect
import io
import os
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import textnb.mail.sources as sources_module
from textnb.errors import MailboxFormatError, SourceError
from textnb.mail.sources import (RawMessage, _read_stream, _split_mbox, iter_index, iter_labelled,
                                 iter_messages, iter_tsv)

MBOX = (
    b"From alice@example.com Mon Jan  1 00:00:00 2001\n"
    b"Subject: one\n\nfirst body\n>From the quoted line\n>>From doubly quoted\n\n"
    b"From bob@example.com Mon Jan  1 00:00:01 2001\n"
    b"Subject: two\n\nsecond body\nFrom not after a blank line\n\n"
    b"From carol@example.com Mon Jan  1 00:00:02 2001\n"
    b"Subject: three\n\nthird body\n"
)


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def sources(messages) -> list[str]:
    return [message.source for message in messages]


def test_single_file(tmp_path):
    path = write(tmp_path / "msg.eml", b"Subject: hi\n\nbody\n")
    assert list(iter_messages(path, "ham")) == [RawMessage(str(path), b"Subject: hi\n\nbody\n", "ham")]


def test_mbox_with_three_messages_and_from_quoting(tmp_path):
    path = write(tmp_path / "box.mbox", MBOX)
    messages = list(iter_messages(str(path)))
    assert sources(messages) == [f"{path}:1", f"{path}:2", f"{path}:3"]
    assert messages[0].raw == b"Subject: one\n\nfirst body\nFrom the quoted line\n>From doubly quoted\n"
    assert messages[1].raw == b"Subject: two\n\nsecond body\nFrom not after a blank line\n"
    assert messages[2].raw == b"Subject: three\n\nthird body\n"
    assert {message.label for message in messages} == {None}


def test_mbox_with_crlf_line_ends(tmp_path):
    path = write(tmp_path / "box", MBOX.replace(b"\n", b"\r\n"))
    messages = list(iter_messages(path))
    assert len(messages) == 3
    assert messages[2].raw == b"Subject: three\r\n\r\nthird body\r\n"


# Lines a one-message mbox file may hold, the shapes _read_stream's fast path tells apart.
_MBOX_LINES = [b"From x@y Mon Jan  1 00:00:00 2001\n", b"From the desk\n", b">From quoted\n",
               b">>From twice\n", b"> From not quoted\n", b"\n", b"\r\n", b"text\n",
               b"text\r\n", b"no newline", b"Subject: s\n"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_MBOX_LINES), max_size=8))
def test_reading_an_mbox_file_whole_is_splitting_it_line_by_line(lines):
    """The one-message fast path (a search for the lines that matter) reads every file
    as the line-by-line splitter does."""
    data = b"From a@b Mon Jan  1 00:00:00 2001\n" + b"".join(
        line for i, line in enumerate(lines) if line != b"no newline" or i == len(lines) - 1)
    expected = list(_split_mbox(io.BytesIO(data)))
    got = [m.raw for m in _read_stream(io.BytesIO(data), "f", None)]
    assert got == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_MBOX_LINES + [b"From z@y Mon Jan  1 00:00:00 2001\n"]),
                max_size=10), st.sampled_from([5, 6, 16, 40, 1 << 16]),  # _WHOLE >= len("From ")
       st.sampled_from([b"From a@b Mon Jan  1 00:00:00 2001\n", b"Subject: plain\n"]))
def test_reading_in_reads_of_any_size_is_splitting_line_by_line(lines, whole, first):
    """Whatever the size of the read after the 'From ' line (ending inside a line, past
    the end), a file reads as the line-by-line splitter (or, without a 'From ' line,
    whole) gives it."""
    data = first + b"".join(
        line for i, line in enumerate(lines) if line != b"no newline" or i == len(lines) - 1)
    expected = list(_split_mbox(io.BytesIO(data))) if first.startswith(b"From ") else [data]
    saved, sources_module._WHOLE = sources_module._WHOLE, whole
    try:
        got = [m.raw for m in _read_stream(io.BufferedReader(io.BytesIO(data)), "f", None)]
    finally:
        sources_module._WHOLE = saved
    assert got == expected


def test_file_starting_with_from_holding_one_message_keeps_its_name(tmp_path):
    path = write(tmp_path / "00001.abc", b"From x@y Mon Jan  1 00:00:00 2001\nSubject: a\n\nbody\n")
    assert list(iter_messages(path, "spam")) == [RawMessage(str(path), b"Subject: a\n\nbody\n", "spam")]


def test_plain_message_with_from_line_in_body_is_not_split(tmp_path):
    raw = b"Subject: a\n\nhello\n\nFrom the desk of the CEO\n"
    path = write(tmp_path / "msg", raw)
    assert [m.raw for m in iter_messages(path)] == [raw]


def test_directory_tree_sorted_recursive_skipping_hidden(tmp_path):
    write(tmp_path / "b" / "2", b"Subject: b2\n\n")
    write(tmp_path / "a", b"Subject: a\n\n")
    write(tmp_path / "b" / "1", b"Subject: b1\n\n")
    write(tmp_path / "c" / ".hidden", b"x")
    write(tmp_path / ".git" / "config", b"x")
    write(tmp_path / "d.mbox", MBOX)
    got = [os.path.relpath(source, tmp_path) for source in sources(iter_messages(tmp_path, "ham"))]
    assert got == ["a", os.path.join("b", "1"), os.path.join("b", "2"), "d.mbox:1", "d.mbox:2", "d.mbox:3"]


def test_maildir_reads_cur_and_new_not_tmp(tmp_path):
    write(tmp_path / "new" / "2.host", b"Subject: new\n\n")
    write(tmp_path / "cur" / "1.host:2,S", b"Subject: cur\n\nbody\n\nFrom me, unquoted\n")
    write(tmp_path / "tmp" / "3.host", b"Subject: partial")
    write(tmp_path / "dovecot-uidlist", b"not a message")
    messages = list(iter_messages(tmp_path))
    assert [m.raw.split(b"\n")[0] for m in messages] == [b"Subject: cur", b"Subject: new"]
    assert messages[0].raw.endswith(b"From me, unquoted\n")  # Maildir files are never split


class FakeStdin:
    """Stands in for sys.stdin: only .buffer (binary) is used."""

    def __init__(self, data: bytes) -> None:
        self.buffer = io.BytesIO(data)


@pytest.mark.parametrize(
    "data, expected",
    [
        (b"Subject: piped\n\nbody\n", [RawMessage("-", b"Subject: piped\n\nbody\n", None)]),
        (b"", []),
        (MBOX, ["-:1", "-:2", "-:3"]),
    ],
    ids=["one-message", "empty", "mbox"],
)
def test_stdin(monkeypatch, data, expected):
    monkeypatch.setattr(sys, "stdin", FakeStdin(data))
    messages = list(iter_messages("-"))
    assert (sources(messages) if data == MBOX else messages) == expected


def test_missing_path_names_it_and_the_fix(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(SourceError) as excinfo:
        iter_messages(missing)  # raises at the call, before iteration
    assert str(excinfo.value) == (
        f"no such file or directory: '{missing}'; check the path (use '-' for standard input)"
    )


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root can read any file")
def test_unreadable_file_names_it(tmp_path):
    path = write(tmp_path / "secret", b"Subject: x\n\n")
    path.chmod(0)
    with pytest.raises(SourceError, match="cannot read '.*secret': permission denied"):
        list(iter_messages(path))


@pytest.mark.parametrize("size", ["small", "large"])
def test_read_error_names_the_file(tmp_path, monkeypatch, size):
    """Small files are read in one system call (sources._read_small), larger ones as a
    stream (open): an error in either names the file."""
    path = write(tmp_path / "box", MBOX if size == "small" else MBOX * (1 + (1 << 16) // len(MBOX)))

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    if size == "small":
        real_os_open = os.open
        monkeypatch.setattr("textnb.mail.sources.os.open",
                            lambda p, *a: refuse() if str(p) == str(path) else real_os_open(p, *a))
    else:
        monkeypatch.setattr("textnb.mail.sources.open", refuse, raising=False)
    with pytest.raises(SourceError, match=r"cannot read '.*box': permission denied; check that"):
        list(iter_messages(path))


@pytest.mark.parametrize("data", [MBOX, b"Subject: plain\n\nbody\n", MBOX * 400],
                         ids=["mbox", "one message", "large mbox"])
def test_files_read_in_one_call_give_what_a_stream_gives(tmp_path, data):
    """sources._read_small reads a small regular file in one call; the messages are
    those the stream path (_read_stream) makes of the same bytes."""
    path = write(tmp_path / "box", data)
    expected = [(m.source, m.raw) for m in _read_stream(io.BytesIO(data), str(path), None)]
    assert [(m.source, m.raw) for m in iter_messages(path)] == expected


def test_a_file_that_grows_while_read_is_read_as_a_stream(tmp_path, monkeypatch):
    """A size that fstat gives too small (the file grew in between): the bytes read are
    not kept; the file is read again as a stream, whole."""
    path = write(tmp_path / "box", MBOX)
    real_fstat = os.fstat

    def stale(fd):
        info = real_fstat(fd)
        return os.stat_result((info.st_mode, *info[1:6], 10, *info[7:]))

    monkeypatch.setattr(sources_module.os, "fstat", stale)
    assert [m.raw for m in iter_messages(path)] == [m.raw for m in _read_stream(io.BytesIO(MBOX), "", None)]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this system")
def test_a_named_pipe_is_read_once_from_its_writer(tmp_path):
    """A FIFO (or a shell's <(...)) is opened once: opening it again would wait for a
    writer that has gone."""
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(MBOX), daemon=True)
    writer.start()
    got: list = []
    reader = threading.Thread(target=lambda: got.extend(iter_messages(fifo)), daemon=True)
    reader.start()
    reader.join(timeout=20)
    assert not reader.is_alive(), "reading the FIFO hung"
    assert [m.raw for m in got] == [m.raw for m in _read_stream(io.BytesIO(MBOX), "", None)]


def test_label_must_be_spam_ham_or_none(tmp_path):
    with pytest.raises(ValueError, match="got 'Spam!'"):
        iter_messages(tmp_path, "Spam!")


# -- index and TSV ------------------------------------------------------------


def test_index_with_relative_and_absolute_paths_and_comments(tmp_path):
    write(tmp_path / "data" / "inmail.1", b"Subject: 1\n\n")
    write(tmp_path / "data" / "inmail 2", b"Subject: 2\n\n")
    absolute = write(tmp_path / "elsewhere" / "m3", b"Subject: 3\n\n")
    index = write(
        tmp_path / "full" / "index",
        f"# TREC-style index\n\nspam ../data/inmail.1\nHAM   ../data/inmail 2\nSpam {absolute}\n".encode(),
    )
    messages = list(iter_index(index))
    assert [(m.label, m.raw) for m in messages] == [
        ("spam", b"Subject: 1\n\n"), ("ham", b"Subject: 2\n\n"), ("spam", b"Subject: 3\n\n")
    ]
    assert messages[0].source == str(index.parent / "../data/inmail.1")


def test_index_base_overrides_the_index_folder(tmp_path):
    write(tmp_path / "msgs" / "m1", b"Subject: 1\n\n")
    index = write(tmp_path / "index", b"ham m1\n")
    assert [m.label for m in iter_index(index, base=tmp_path / "msgs")] == ["ham"]


@pytest.mark.parametrize(
    "line, message",
    [
        ("junk m1", r"index:2: unknown label 'junk'; use 'spam' or 'ham'"),
        ("spam missing.eml", r"index:2: no such message file '.*missing.eml'; paths are relative to"),
        ("spam", r"index:2: expected 'spam PATH' or 'ham PATH', got 'spam'"),
    ],
    ids=["bad-label", "missing-file", "no-path"],
)
def test_index_errors_name_file_line_value_and_fix(tmp_path, line, message):
    write(tmp_path / "m1", b"Subject: 1\n\n")
    index = write(tmp_path / "index", f"ham m1\n{line}\n".encode())
    with pytest.raises(MailboxFormatError, match=message):
        iter_index(index)  # the whole index is checked before any message is read


def test_tsv(tmp_path):
    path = write(tmp_path / "SMS", "ham\tOk lar...\r\nspam\tFree entry \u00a3100\n\nHAM\tsee you\n".encode())
    messages = list(iter_tsv(path))
    assert messages == [
        RawMessage(f"{path}:1", b"\nOk lar...", "ham"),
        RawMessage(f"{path}:2", "\nFree entry \u00a3100".encode(), "spam"),
        RawMessage(f"{path}:4", b"\nsee you", "ham"),
    ]


def test_tsv_text_that_looks_like_a_header_stays_text(tmp_path):
    from textnb.mail.parse import parse_message

    path = write(tmp_path / "SMS", b"ham\tK:)k:)good\n")
    parsed = parse_message(next(iter_tsv(path)).raw)
    assert parsed.headers == () and "K:)k:)good" in parsed.parts[0].text


@pytest.mark.parametrize(
    "content, message",
    [(b"maybe\ttext\n", r"SMS:1: unknown label 'maybe'"), (b"spam text without tab\n", r"SMS:1: no TAB in")],
)
def test_tsv_errors(tmp_path, content, message):
    path = write(tmp_path / "SMS", content)
    with pytest.raises(MailboxFormatError, match=message):
        list(iter_tsv(path))


def test_iter_labelled_chains_all_kinds(tmp_path):
    write(tmp_path / "spam" / "s1", b"Subject: s\n\n")
    write(tmp_path / "ham.mbox", MBOX)
    write(tmp_path / "m", b"Subject: i\n\n")
    index = write(tmp_path / "index", b"spam m\n")
    tsv = write(tmp_path / "sms", b"ham\thello\n")
    messages = iter_labelled(spam=[tmp_path / "spam"], ham=[str(tmp_path / "ham.mbox")], index=[index], tsv=[tsv])
    assert [m.label for m in messages] == ["spam", "ham", "ham", "ham", "spam", "ham"]


def test_iter_labelled_checks_every_path_up_front(tmp_path):
    write(tmp_path / "s1", b"Subject: s\n\n")
    with pytest.raises(SourceError, match="no such file or directory: '.*typo'"):
        iter_labelled(spam=[tmp_path / "s1"], ham=[tmp_path / "typo"])


def test_iter_labelled_rejects_a_single_path(tmp_path):
    with pytest.raises(TypeError, match=r"wrap it: spam=\["):
        iter_labelled(spam=str(tmp_path))


# -- laziness -------------------------------------------------------------------


class CountingReader(io.RawIOBase):
    """A binary stream that counts how many bytes were read from it."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)
        self.n_read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self._data.readinto(buffer)
        self.n_read += n
        return n


def test_big_mbox_on_stdin_is_streamed(monkeypatch):
    one = b"From a@b Mon Jan  1 00:00:00 2001\nSubject: x\n\n" + b"word " * 200 + b"\n\n"
    data = one * 2000  # about 2 MB
    reader = CountingReader(data)
    stdin = FakeStdin(b"")
    stdin.buffer = io.BufferedReader(reader)
    monkeypatch.setattr(sys, "stdin", stdin)
    messages = iter_messages("-")
    assert next(messages).source == "-:1"
    assert reader.n_read < len(data) // 20  # only the first buffers were read
    assert sum(1 for _ in messages) == 1999


def test_directory_is_a_generator_reading_files_as_it_goes(tmp_path):
    for name in ("1", "2", "3"):
        write(tmp_path / name, b"Subject: %s\n\n" % name.encode())
    messages = iter_messages(tmp_path)
    assert inspect.isgenerator(messages)
    assert next(messages).raw == b"Subject: 1\n\n"
    # Changed after the listing but before being read: the new content is seen,
    # and a file that vanished meanwhile (a Maildir move) is skipped.
    write(tmp_path / "2", b"Subject: changed\n\n")
    (tmp_path / "3").unlink()
    assert [m.raw for m in messages] == [b"Subject: changed\n\n"]
