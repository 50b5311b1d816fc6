"""Small helpers the test files share: a free loopback port, an index file of messages, one
scorer request read as a fake scorer reads it."""

from __future__ import annotations

import socket
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (free when asked; a test binds it
    soon after)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def read_request(conn: socket.socket) -> tuple[bytes, bytes]:
    """One request of the scorer's protocol from ``conn``: (its line, its message), the
    message's length read by the scorer's own parser (``request_reader.parse_head``)."""
    from textnb.delivery.request_reader import parse_head

    data = b""
    while b"\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("the client closed before a whole request line")
        data += chunk
    line, _, body = data.partition(b"\n")
    length = parse_head(line, 10**9)[3]
    while len(body) < length:
        chunk = conn.recv(1 << 20)
        if not chunk:
            raise ConnectionError("the client closed before the whole message")
        body += chunk
    return line, body


def write_index(folder: Path, messages) -> Path:
    """An index file in ``folder`` of ``messages`` (each with ``label`` and ``source``):
    'spam PATH' / 'ham PATH' lines with absolute paths, under a name not yet taken."""
    n = 0
    while (path := Path(folder) / f"index-{n}").exists():
        n += 1
    path.write_text("".join(f"{m.label} {Path(m.source).resolve()}\n" for m in messages))
    return path
