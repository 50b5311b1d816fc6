"""The record framing of the model's journal (``textnb.modelfile.journal``).

A record is one line of fields and the payload::

    <MAGIC> <field> ... <payload length> <SHA-256 hex of the payload>\\n<payload>\\n

appended with one ``write`` and fsync'd before its update is reported done. Reading
stops at the first record that is cut short or fails its checksum: a crash mid-append
leaves such a record, and its update was never reported done. (The journal of count
patches an earlier textnb kept in ``MODEL.delta`` framed its records the same way; it is
still read once, ``textnb.modelfile.count_patch.read_legacy_delta``.)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence

__all__ = ["MAX_DIGITS", "frame", "frames", "frames_of"]

# The most digits a length or a sequence number may have (a petabyte, 10**15 records): a
# field of thousands of digits is damage or a crafted record, and reading stops there.
MAX_DIGITS = 15


def frame(magic: bytes, fields: Sequence[bytes], payload: bytes) -> bytes:
    """One record: ``magic``, the ``fields`` (no spaces or newlines in them), the payload."""
    head = b" ".join([magic, *fields, str(len(payload)).encode(),
                      hashlib.sha256(payload).hexdigest().encode()])
    return head + b"\n" + payload + b"\n"


def frames(data: bytes, magic: bytes, n_fields: int, start: int = 0
           ) -> Iterator[tuple[list[bytes], bytes, int]]:
    """The complete records of ``data`` from offset ``start``, in order: (their fields, their
    payload, the offset just past them). Stops at the first record that is not complete
    and intact, or whose line does not hold ``n_fields`` fields after ``magic``."""
    for _, fields, payload, end in frames_of(data, {magic: n_fields}, start):
        yield fields, payload, end


def frames_of(data: bytes, layouts: dict[bytes, int], start: int = 0
              ) -> Iterator[tuple[bytes, list[bytes], bytes, int]]:
    """``frames`` for records of several layouts (``layouts``: magic -> number of fields):
    (their magic, fields, payload, the offset just past them)."""
    at = start
    while at < len(data):
        newline = data.find(b"\n", at)
        line = data[at:newline].split(b" ") if newline >= 0 else []
        if (not line or layouts.get(line[0]) != len(line) - 3
                or not line[-2].isdigit() or len(line[-2]) > MAX_DIGITS):
            return
        length = int(line[-2])
        payload = data[newline + 1:newline + 1 + length]
        end = newline + 1 + length + 1
        if (len(payload) != length or data[end - 1:end] != b"\n"
                or hashlib.sha256(payload).hexdigest().encode() != line[-1]):
            return
        yield line[0], line[1:-2], payload, end
        at = end
