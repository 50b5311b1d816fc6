"""A host's outbox: learns kept on the host, fsync'd, until the shared store has them.

A scorer on the shared store writes every LEARN and FORGET here before it sends it, and
sends the entries in order (``SharedModel.drain``). Each transaction that applies an
entry also records the entry's position under the outbox's id (``textnb_outboxes``), so
after a crash, a lost connection (the commit made or not) or a database away for hours,
the entries past the database's position are sent again, and only those: each is
applied exactly once. An entry holds the message's digest and token counts, not the
mail.

The file: a line ``TNBOX1 <outbox id> <position of the last entry before this file>``
and then the entries, framed as the journal's records are
(``textnb.modelfile.journal_frames``: a crash mid-append leaves an entry cut short, which
reading stops at, and whose learn was never acknowledged). Once the database has every
entry the file is replaced by its header alone.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import uuid
import zlib
from pathlib import Path

from ...errors import TextnbError
from ..count_patch import decode
from ..journal_frames import frame, frames
from .database import Item

__all__ = ["Outbox"]

MAGIC = b"TNBOX1"
ENTRY = b"TNBE"


class Outbox:
    """The outbox file at ``path`` (created if missing), held by this process alone."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._fh = open(self.path, "a+b")  # noqa: SIM115 - held open for the process's life
        try:
            fcntl.flock(self._fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._fh.close()
            raise TextnbError(f"the outbox '{self.path}' is in use by another process; give "
                              "each scorer an outbox of its own (--outbox)") from None
        self._fh.seek(0)
        data = self._fh.read()
        if not data:
            self.id, self.base = uuid.uuid4().hex, 0
            self._rewrite(self.base)
            data = self._header(self.base)
        head, _, _ = data.partition(b"\n")
        words = head.split(b" ")
        if len(words) != 3 or words[0] != MAGIC or not words[2].isdigit():
            self._fh.close()
            raise TextnbError(f"'{self.path}' is not a textnb outbox; move it away (its learns, "
                              "if any, are lost) or give another --outbox")
        self.id, self.base = words[1].decode(), int(words[2])
        self.entries: list[tuple[int, str, Item]] = []
        end = len(head) + 1
        for fields, payload, end in frames(data, ENTRY, 3, len(head) + 1):
            self.entries.append((int(fields[0]), fields[1].decode(), _item(fields[2], payload)))
        if end < len(data):  # an entry cut short by a crash: never acknowledged
            self._fh.truncate(end)
        self.last = self.entries[-1][0] if self.entries else self.base

    def _header(self, base: int) -> bytes:
        return b" ".join([MAGIC, self.id.encode(), str(base).encode()]) + b"\n"

    def _rewrite(self, base: int) -> None:
        self._fh.seek(0)
        self._fh.truncate(0)
        self._fh.write(self._header(base))
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def append(self, model: str, item: Item) -> int:
        """Write ``item`` for the model named ``model``, fsync'd; RETURNS its position."""
        body = {"digest": item.digest.hex(), "label": item.label, "tokens": item.tokens,
                "tf": item.tf, "hash": None if item.tokens_hash is None else str(item.tokens_hash)}
        payload = zlib.compress(json.dumps(body, separators=(",", ":")).encode(), 1)
        with self._lock:
            position = self.last + 1
            self._fh.write(frame(ENTRY, [str(position).encode(), model.encode(),
                                         item.kind.encode()], payload))
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self.last = position
            self.entries.append((position, model, item))
        return position

    def pending(self, done: int) -> list[tuple[int, str, Item]]:
        """The entries past position ``done`` (the database's), in order."""
        with self._lock:
            return [e for e in self.entries if e[0] > done]

    def settle(self, done: int) -> None:
        """Drop the entries the database has (up to ``done``); the file is rewritten
        once it holds none the database lacks."""
        with self._lock:
            self.entries = [e for e in self.entries if e[0] > done]
            if not self.entries and self.base != self.last:
                self.base = self.last
                self._rewrite(self.base)

    def close(self) -> None:
        self._fh.close()


def _item(kind: bytes, payload: bytes) -> Item:
    body = decode(payload)
    return Item(kind.decode(), bytes.fromhex(body["digest"]), body["label"], body["tokens"],
                body["tf"], None if body["hash"] is None else int(body["hash"]))
