"""The order a --spam pile and a --ham pile arrived in, so that they can be learned as one.

``train``'s default pass (``training.regime = "thick"``, ``textnb.modelfile.lifecycle``)
judges each message by the model of the messages before it, so the order it is given
the mail in is part of the training. An index lists the mail in one sequence; two piles
(a Junk folder and an inbox) do not, and one wholly before the other is not the order
the mail came in. Their messages are put back in the order they arrived in, when each
file holds one message (a Maildir, a folder of .eml files):

- a Maildir file's name starts with its delivery time (the Maildir convention,
  ``time.unique.host``, https://cr.yp.to/proto/maildir.html): the time the user's
  own server stored it;
- otherwise the date of the topmost ``Received:`` field, the last hop's, written by the
  receiving server's clock, not the sender's;
- otherwise the ``Date:`` field, which the sender writes (spam forges it freely).

Messages with no time that parses come first, in the order given; ties keep it too.
A file of several messages (an mbox) or standard input has no place of its own in the
sequence, and then there is no arrival order: ``arrival_order`` says so (None).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from datetime import timezone
from email.utils import parsedate_to_datetime

from .sources import SourceFile, read_planned

__all__ = ["DATE_FIELD", "arrival_order", "arrival_time", "posix_time"]

# Maildir names: "<seconds>.<unique>.<host>[:2,flags]"; nine or ten digits, 1973 to 2286.
_MAILDIR_TIME = re.compile(r"^(\d{9,10})\.")
_RECEIVED = re.compile(rb"^Received:[ \t]*(.*(?:\r?\n[ \t].*)*)", re.IGNORECASE | re.MULTILINE)
DATE_FIELD = re.compile(rb"^Date:[ \t]*(.*(?:\r?\n[ \t].*)*)", re.IGNORECASE | re.MULTILINE)
# A header section longer than this is not read for dates (a hostile one can be megabytes).
HEADER_BYTES = 64 * 1024


def posix_time(value: bytes) -> float | None:
    """An RFC 5322 date-time as a POSIX timestamp (no zone: UTC), or None when it does
    not parse."""
    try:
        when = parsedate_to_datetime(value.decode("latin-1").strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    try:
        return when.timestamp()
    except (OverflowError, OSError, ValueError):
        return None


def arrival_time(raw: bytes, maildir_name: str | None = None) -> float | None:
    """When a message arrived (module docstring), as a POSIX timestamp; None when
    nothing tells. maildir_name: its file name, when it is a Maildir's."""
    if maildir_name is not None and (m := _MAILDIR_TIME.match(maildir_name)):
        return float(m.group(1))
    head = raw[:HEADER_BYTES]
    end = re.search(rb"\r?\n\r?\n", head)
    header = head[:end.start()] if end else head
    received = _RECEIVED.search(header)
    if received and b";" in received.group(1):
        when = posix_time(received.group(1).rsplit(b";", 1)[1])
        if when is not None:
            return when
    date = DATE_FIELD.search(header)
    return posix_time(date.group(1)) if date else None


def arrival_order(files: Sequence[SourceFile]) -> list[SourceFile] | None:
    """The planned files in the order their messages arrived, or None when a file is
    standard input, a TSV file or holds several messages (an mbox): no order to find.

    Each file is read once here (its messages are read again when learned); a file that
    cannot be read is skipped and reported here, as reading it would
    (``textnb.mail.unreadable``), and left out of the order.
    """
    keyed = []
    for position, planned in enumerate(files):
        if planned.form not in ("mail", "maildir"):
            return None
        messages = read_planned([planned])
        first = next(messages, None)
        messages.close()  # the file's descriptor, now
        if first is None:  # unreadable (reported) or empty
            continue
        if first.source != planned.path:  # "PATH:1": an mbox of several messages
            return None
        name = os.path.basename(planned.path) if planned.form == "maildir" else None
        when = arrival_time(first.raw, name)
        keyed.append(((when is not None, when or 0.0, position), planned))
    keyed.sort(key=lambda item: item[0])
    return [planned for _, planned in keyed]
