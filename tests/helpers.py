"""Small helpers the test files share: a free loopback port, an index file of messages."""

from __future__ import annotations

import socket
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (free when asked; a test binds it
    soon after)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def write_index(folder: Path, messages) -> Path:
    """An index file in ``folder`` of ``messages`` (each with ``label`` and ``source``):
    'spam PATH' / 'ham PATH' lines with absolute paths, under a name not yet taken."""
    n = 0
    while (path := Path(folder) / f"index-{n}").exists():
        n += 1
    path.write_text("".join(f"{m.label} {Path(m.source).resolve()}\n" for m in messages))
    return path
