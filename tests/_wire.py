"""Talking to a scorer with raw bytes, as a hostile or broken client would: the daemon
tests send what the clients (textnb.delivery.client, clients/textnb-client.c) never would; and
waiting, bounded, for what a daemon does on its own threads."""

from __future__ import annotations

import socket
import time


def connect(address, timeout: float = 5.0) -> socket.socket:
    """A connected socket to a Unix path or a (host, port) pair."""
    family = socket.AF_INET if isinstance(address, tuple) else socket.AF_UNIX
    conn = socket.socket(family, socket.SOCK_STREAM)
    conn.settimeout(timeout)
    conn.connect(address)
    return conn


def reply(conn: socket.socket) -> bytes:
    """What the scorer sends up to its first line end (or until it hangs up)."""
    data = b""
    while b"\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def ask(address, request: bytes) -> bytes:
    """One request on a connection of its own, and its reply."""
    with connect(address) as conn:
        conn.sendall(request)
        return reply(conn)


def wait_for(condition, seconds: float = 10.0) -> bool:
    """Whether ``condition()`` came true within ``seconds`` (polled every 20 ms)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False
