"""The resident scorer against hostile and careless clients.

tests/test_server.py covers the scorer's features and a first pass at its bounds;
this file pushes on them: who may connect, garbage of every kind, clients that
stall or trickle, the concurrency bound, 200 clients at once, and model files
that try to run code when loaded. Servers bind only to a Unix socket in tmp_path
or to 127.0.0.1, and every wait has a bound.
"""

from __future__ import annotations

import os
import random
import socket
import stat
import threading
import time

import pytest

from textnb.delivery.client import PROTOCOL, ScorerUnavailable, ping, score_remote
from textnb.delivery.server import ResidentModel, ScorerServer, ServerError
from textnb.delivery.verdict_headers import score_with
from textnb.mail.sources import iter_index
from textnb.modelfile import store

from conftest import SAMPLE, SAMPLE_INDEX
from test_operator_errors import _pickled
from test_server import Running
from _wire import ask as _ask, connect as _connect
from _wire import wait_for as _wait_for  # noqa: E402

MESSAGES = ([m.raw for m in iter_index(SAMPLE_INDEX)]
            + [p.read_bytes() for p in sorted((SAMPLE / "unlabelled").iterdir())])


@pytest.fixture
def model_file(tmp_path, sample_filter):
    path = tmp_path / "model.tnb"
    store.save(sample_filter, path)
    return path


# -- who may connect ---------------------------------------------------------------------


def test_socket_is_owner_only_whatever_the_umask(tmp_path, model_file):
    old = os.umask(0)
    try:
        with Running(model_file, str(tmp_path / "new" / "s.sock")):
            assert stat.S_IMODE(os.stat(tmp_path / "new" / "s.sock").st_mode) == 0o600
            assert stat.S_IMODE(os.stat(tmp_path / "new").st_mode) == 0o700  # made by the server
    finally:
        os.umask(old)


def test_a_folder_others_can_write_to_is_refused(tmp_path, model_file):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # anyone could rename their own socket over ours
    with pytest.raises(ServerError, match=r"mode 0777\) lets other users replace the socket; use "
                                          r"a folder of your own"):
        ScorerServer(ResidentModel(model_file), str(shared / "s.sock")).bind()
    assert not (shared / "s.sock").exists()
    shared.chmod(0o1777)  # sticky, as /tmp: only a file's owner may rename or remove it
    with Running(model_file, str(shared / "s.sock")) as running:
        assert ping(running.address)["loads"] == "1"


def test_tcp_is_loopback_unless_allowed(model_file):
    for host in ("0.0.0.0", "192.0.2.1"):  # every interface; a documentation address
        with pytest.raises(ServerError, match="not a loopback address.*--allow-remote"):
            ScorerServer(ResidentModel(model_file), (host, 0)).bind()
    with Running(model_file, ("localhost", 0)) as running:  # a name that resolves to loopback
        assert running.address[0] in ("127.0.0.1", "::1")


# -- garbage --------------------------------------------------------------------------------

GARBAGE = {
    "random-bytes": bytes(random.Random(9).randrange(256) for _ in range(3000)),
    "random-line": bytes(random.Random(3).randrange(256) for _ in range(200)) + b"\n",
    "empty-line": b"\n",
    "http": b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "other-version": b"TEXTNB/2 SCORE 3\nabc",
    "unknown-verb": b"TEXTNB/1 LEARN 3\nabc",
    "no-length": b"TEXTNB/1 SCORE\n",
    "negative-length": b"TEXTNB/1 SCORE -5\n",
    "non-numeric-length": b"TEXTNB/1 SCORE 1e3\nabc",
    "huge-length": b"TEXTNB/1 SCORE " + b"9" * 40 + b"\n",
    "over-max-bytes": b"TEXTNB/1 SCORE 10000002\n",
    "zero-cost-ratio": b"TEXTNB/1 SCORE 3 0\nabc",
    "non-numeric-cost-ratio": b"TEXTNB/1 SCORE 3 cheap\nabc",
    "nan-cost-ratio": b"TEXTNB/1 SCORE 3 nan\nabc",
    "inf-cost-ratio": b"TEXTNB/1 SCORE 3 inf\nabc",
    "extra-words": b"TEXTNB/1 SCORE 3 1 2\nabc",
    "endless-line": b"TEXTNB/1 SCORE " + b"1" * 5000,
    "short-nonce": b"TEXTNB/1 PING nonce=abc\n",
    "upper-case-nonce": b"TEXTNB/1 PING nonce=" + b"AB" * 16 + b"\n",
}


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_garbage_gets_an_error_reply_and_the_server_carries_on(tmp_path, model_file, transport):
    address = str(tmp_path / "s.sock") if transport == "unix" else ("127.0.0.1", 0)
    local = store.load(model_file)
    with Running(model_file, address, timeout=2.0) as running:
        for name, request in GARBAGE.items():
            reply = _ask(running.address, request)
            assert reply.startswith(PROTOCOL + b" ERROR ") and reply.endswith(b"\n"), (name, reply)
            assert len(reply) < 300, name  # an error line, not an echo of the garbage
        with _connect(running.address):  # connect and hang up at once
            pass
        assert score_remote(running.address, MESSAGES[0]) == score_with(local, MESSAGES[0])
        assert ping(running.address)["requests"] == "1"  # no garbage was scored
        reader = running.server.reader
        assert _wait_for(lambda: not reader.connections and reader.buffered == 0)  # none left


def test_error_replies_name_the_problem(tmp_path, model_file):
    with Running(model_file, str(tmp_path / "s.sock")) as running:
        assert b"exceeds the scorer's limit of 10000001 (--max-bytes)" in _ask(
            running.address, GARBAGE["over-max-bytes"])
        assert b"cost ratio b'cheap' must be a number > 0 and finite" in _ask(
            running.address, GARBAGE["non-numeric-cost-ratio"])
        assert b"no request line within 1024 bytes" in _ask(running.address,
                                                            GARBAGE["endless-line"])


# -- stalled and slow clients ----------------------------------------------------------




def _trickle(conn: socket.socket, data: bytes, stop: threading.Event) -> None:
    """Send one byte every 50 ms: each read arrives well within any per-read timeout."""
    try:
        for i in range(len(data)):
            if stop.wait(0.05):
                return
            conn.sendall(data[i:i + 1])
    except OSError:
        pass  # the server hung up: what we want


@pytest.mark.parametrize("stall", ["silent", "half-line", "half-message", "trickle"])
def test_a_stalled_client_is_cut_off_at_the_timeout_and_blocks_nobody(tmp_path, model_file, stall):
    timeout = 2.0
    local = store.load(model_file)
    raw = MESSAGES[3]
    request = PROTOCOL + b" SCORE %d\n" % len(raw) + raw
    with Running(model_file, str(tmp_path / "s.sock"), timeout=timeout, max_clients=4) as running:
        staller = _connect(running.address, timeout=10)
        stop = threading.Event()
        sender = None
        if stall == "half-line":
            staller.sendall(request[:8])
        elif stall == "half-message":
            staller.sendall(request[: len(request) // 2])
        elif stall == "trickle":  # slowloris: never idle, never done
            sender = threading.Thread(target=_trickle, args=(staller, request, stop))
            sender.start()
        start = time.monotonic()
        # Others are served at once meanwhile.
        for other in MESSAGES[:5]:
            t0 = time.monotonic()
            assert score_remote(running.address, other, timeout=5) == score_with(local, other)
            assert time.monotonic() - t0 < timeout / 2  # not held up until the staller goes
        # The staller is dropped when its time is up: by the request's deadline, not per read.
        try:
            leftover = staller.recv(1000)
        except ConnectionResetError:
            leftover = b""
        waited = time.monotonic() - start
        stop.set()
        if sender is not None:
            sender.join(timeout=10)
        staller.close()
        assert not leftover.startswith(PROTOCOL + b" OK"), leftover
        assert 0.5 * timeout < waited < timeout + 2.0, waited


def test_at_most_max_clients_are_answered_at_once(tmp_path, model_file):
    with Running(model_file, str(tmp_path / "s.sock"), max_clients=3, timeout=20.0) as running:
        busy = [_connect(running.address, timeout=10) for _ in range(5)]
        for conn in busy:  # request lines that never end: read, but never handed on
            conn.sendall(PROTOCOL + b" SCO")
        assert _wait_for(lambda: len(running.server.reader.connections) == 5)
        assert running.server.pool.threads == []  # no worker waits for them
        verdicts = [None] * 12

        def client(k):
            verdicts[k] = score_remote(running.address, MESSAGES[k % len(MESSAGES)], timeout=10)

        clients = [threading.Thread(target=client, args=(k,)) for k in range(12)]
        for t in clients:
            t.start()
        for t in clients:
            t.join(timeout=30)
        assert all(v is not None and v.label in ("spam", "ham") for v in verdicts)
        assert 1 <= len(running.server.pool.threads) <= 3
        for conn in busy:
            conn.close()


# -- load ---------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_200_concurrent_clients_all_get_the_in_process_verdict(tmp_path, model_file, transport):
    n_clients = 200
    local = store.load(model_file)
    expected = [score_with(local, raw) for raw in MESSAGES]
    address = str(tmp_path / "s.sock") if transport == "unix" else ("127.0.0.1", 0)
    with Running(model_file, address, timeout=10.0) as running:  # the default 8 at once
        barrier = threading.Barrier(n_clients)
        verdicts: list = [None] * n_clients

        def client(k: int) -> None:
            barrier.wait()  # all connect together: 192 of them wait in the listen queue
            try:
                verdicts[k] = score_remote(running.address, MESSAGES[k % len(MESSAGES)],
                                           timeout=60)
            except ScorerUnavailable as exc:
                verdicts[k] = exc

        threads = [threading.Thread(target=client, args=(k,)) for k in range(n_clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        failures = [v for v in verdicts if not hasattr(v, "label")]
        assert failures == []
        assert verdicts == [expected[k % len(MESSAGES)] for k in range(n_clients)]
        assert ping(running.address)["requests"] == str(n_clients)


# -- model files are data -------------------------------------------------------------------


def test_a_reload_never_runs_code_from_the_model_file(tmp_path, model_file, sample_filter):
    """A model file swapped for one whose array would run code when unpickled."""
    sentinel = tmp_path / "code-ran"
    with Running(model_file, str(tmp_path / "s.sock")) as running:
        before = score_remote(running.address, MESSAGES[0])
        store.atomic_write(model_file, _pickled(model_file.read_bytes(), sentinel))
        time.sleep(0.5)  # five reload checks
        assert ping(running.address)["loads"] == "1"  # refused: the old model serves on
        assert score_remote(running.address, MESSAGES[0]) == before
    assert not sentinel.exists()
