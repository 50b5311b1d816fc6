"""The daemons under attack: one test per attack, named after it.

docs/security.md lists the attacks and what each now meets. Servers bind only to a Unix
socket in tmp_path or to 127.0.0.1; every wait has a bound. The load test at the end
runs for LOAD_SECONDS; ``python -m bench.server_attack`` runs the same load for 60 s.
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import socket
import subprocess
import sys
import threading
import time

import pytest
from typer.testing import CliRunner

from bench.server_attack import Tricklers, load_run, percentile
from textnb.cli import app
from textnb.delivery.client import PROTOCOL, ScorerUnavailable, learn_remote, ping, score_remote
from textnb.delivery.server import ResidentModel, ScorerServer, ServerError
from textnb.delivery.telemetry import Telemetry, serve_metrics
from textnb.delivery.users import ModelSet
from textnb.delivery.verdict_headers import score_with
from textnb.modelfile import store

from conftest import PROJECT, SAMPLE
from helpers import free_port
from test_c_client import c_client  # noqa: F401
from test_server import Running as Serving
from test_server_learn import variant
from _wire import ask as _ask, connect as _connect
from _wire import wait_for as _wait_for  # noqa: E402

MESSAGES = [p.read_bytes() for p in sorted((SAMPLE / "unlabelled").iterdir())]
LOAD_SECONDS = 20.0


@pytest.fixture
def model_file(tmp_path, sample_model_file):
    path = tmp_path / "model.tnb"
    path.write_bytes(sample_model_file.read_bytes())
    return path


@pytest.fixture
def models_dir(tmp_path, sample_model_file):
    folder = tmp_path / "models"
    (folder / "_shared").mkdir(parents=True)
    (folder / "_shared" / "model.tnb").write_bytes(sample_model_file.read_bytes())
    return folder




# -- F1: who may teach ----------------------------------------------------------------------


def test_tcp_per_user_models_refused_without_flag(models_dir):
    with pytest.raises(ServerError, match="--user-from-peer.*--allow-any-user-to-teach"):
        ScorerServer(ModelSet(models_dir), ("127.0.0.1", 0))
    with Serving(ModelSet(models_dir), ("127.0.0.1", 0), allow_any_user_to_teach=True) as on:
        assert learn_remote(on.address, variant(1), "spam", user="alice") == "spam new"


def test_world_connectable_socket_per_user_models_refused_without_peer_check(tmp_path,
                                                                             models_dir):
    sock = str(tmp_path / "run" / "s.sock")
    with pytest.raises(ServerError, match=r"mode 0666\) would let every local user read and "
                                          r"teach every user's model"):
        ScorerServer(ModelSet(models_dir), sock, socket_mode=0o666)
    ScorerServer(ModelSet(models_dir), sock, socket_mode=0o666, user_from_peer=True)
    ScorerServer(ModelSet(models_dir), sock, socket_mode=0o660)  # the group is trusted


def test_serve_command_refuses_per_user_models_over_tcp_before_loading(tmp_path):
    # No model anywhere: the refusal comes before any load.
    done = subprocess.run([sys.executable, "-m", "textnb", "serve", "--models",
                           str(tmp_path / "none"), "--tcp", "0"], cwd=PROJECT,
                          capture_output=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert b"Serve them on a Unix socket with --user-from-peer" in done.stderr
    assert b"Traceback" not in done.stderr


def test_learning_over_tcp_refused_without_flag(model_file):
    before = store.load(model_file).n_learned
    with Serving(ResidentModel(model_file), ("127.0.0.1", 0)) as on:
        with pytest.raises(ScorerUnavailable, match="not learned: any local user can connect"):
            learn_remote(on.address, variant(2), "spam")
        assert score_remote(on.address, MESSAGES[0]).label in ("spam", "ham")  # scoring is open
        assert ping(on.address)["spam"] == str(before["spam"])
    with Serving(ResidentModel(model_file), ("127.0.0.1", 0),
                 allow_any_user_to_teach=True) as on:
        assert learn_remote(on.address, variant(2), "spam") == "spam new"


def test_metrics_port_says_every_local_user_can_read_it(tmp_path, model_file):
    # --max-bytes 0 makes the scorer refuse to start just after the metrics port opens.
    result = CliRunner().invoke(app, ["serve", "--model", str(model_file), "--socket",
                                      str(tmp_path / "s.sock"), "--metrics", "127.0.0.1:0",
                                      "--max-bytes", "0"])
    assert "readable by every local user" in result.output


# -- F3: the request reader -------------------------------------------------------------------


def test_huge_length_field_gets_error_line(tmp_path, model_file, caplog):
    caplog.set_level(logging.INFO, "textnb")
    with Serving(ResidentModel(model_file), str(tmp_path / "s.sock")) as on:
        five_thousand = _ask(on.address, PROTOCOL + b" SCORE " + b"9" * 5000 + b"\n")
        thousand = _ask(on.address, PROTOCOL + b" SCORE " + b"9" * 1000 + b"\n")
        zeros = _ask(on.address, PROTOCOL + b" SCORE " + b"0" * 900 + b"5\nhello")
        assert ping(on.address)["requests"] == "1"
    assert five_thousand == PROTOCOL + b" ERROR no request line within 1024 bytes\n"
    assert thousand.startswith(PROTOCOL + b" ERROR message length of 1000 digits exceeds the "
                                          b"scorer's limit of 10000001 (--max-bytes)")
    assert zeros.startswith(PROTOCOL + b" OK ")  # leading zeros are not digits of size
    assert "Traceback" not in caplog.text


def test_request_line_over_the_limit_in_one_read_is_refused(tmp_path, model_file):
    with Serving(ResidentModel(model_file), str(tmp_path / "s.sock")) as on:
        reply = _ask(on.address, PROTOCOL + b" PING" + b" " * 60_000 + b"\n")
    assert reply == PROTOCOL + b" ERROR no request line within 1024 bytes\n"


def test_bad_client_log_lines_are_bounded(tmp_path, model_file, caplog):
    caplog.set_level(logging.INFO, "textnb")
    with Serving(ResidentModel(model_file), str(tmp_path / "s.sock")) as on:
        for _ in range(60):
            assert _ask(on.address, PROTOCOL + b" SCORE " + b"7" * 4400 + b"\n").startswith(
                PROTOCOL + b" ERROR ")
        assert ping(on.address)["loads"] == "1"
    records = [r for r in caplog.records if r.name.startswith("textnb")
               and "stopped after" not in r.getMessage()]
    assert len(records) <= 12, [r.getMessage() for r in records]
    assert all(len(r.getMessage()) < 400 for r in records)


# -- F4: slow clients -------------------------------------------------------------------------


def test_trickling_clients_do_not_starve_ping(tmp_path, model_file):
    with Serving(ResidentModel(model_file), str(tmp_path / "s.sock"), max_clients=8,
                 timeout=5.0) as on:
        with Tricklers(on.address, 16, every=0.1):
            assert _wait_for(lambda: len(on.server.reader.connections) >= 16)
            for k in range(3):
                start = time.monotonic()
                assert int(ping(on.address, timeout=2)["loads"]) == 1
                assert learn_remote(on.address, variant(10 + k), "spam", timeout=2) == "spam new"
                assert time.monotonic() - start < 2


def test_a_learn_past_its_deadline_is_never_applied(tmp_path, model_file):
    model = ResidentModel(model_file, flush_seconds=0.1)
    before = model.spam_filter.n_learned["spam"]
    with Serving(model, str(tmp_path / "s.sock"), timeout=1.0) as on:
        with model.lock:  # the model busy (a long write) past the client's patience
            with pytest.raises(ScorerUnavailable):
                learn_remote(on.address, variant(20), "spam", timeout=1.0)
        time.sleep(0.5)  # the worker has the lock now, and refuses the late update
        assert model.spam_filter.n_learned["spam"] == before
        assert model.journal.read() == []
    assert store.load(model_file).n_learned["spam"] == before


def test_a_learn_sent_and_not_answered_is_perhaps_not_learned(tmp_path, c_client):  # noqa: F811
    """A client that gave up waiting cannot know whether the update was made: both
    clients say so, and that sending it again is safe (the ledger counts it once)."""
    sock = tmp_path / "silent.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(sock))
    listener.listen(8)
    held = []

    def silent():  # reads every request, answers none
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)

    thread = threading.Thread(target=silent, daemon=True)
    thread.start()
    runs = [subprocess.run([*command, "--server", str(sock), "--timeout", "0.5", "--learn",
                            "spam"], input=variant(50), capture_output=True, timeout=60,
                           env={**os.environ, "PYTHONPATH": str(PROJECT)})
            for command in ([str(c_client)], [sys.executable, "-m", "textnb.delivery.client"])]
    listener.close()
    for conn in held:
        conn.close()
    assert runs[0].returncode == runs[1].returncode == 3
    assert runs[0].stderr == runs[1].stderr
    assert runs[0].stderr.startswith(b"textnb-client: error: message perhaps not learned as "
                                     b"spam: ")
    assert b"sending it again is safe" in runs[0].stderr


# -- F5: out of descriptors ---------------------------------------------------------------------

_LOW_LIMIT = """
import resource, sys, threading, logging
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
logging.basicConfig(level=logging.INFO, format="%(message)s")
from textnb.delivery.server import ResidentModel, ScorerServer
model = ResidentModel(sys.argv[1])
try:  # more connections than descriptors, so that accept() itself meets EMFILE
    server = ScorerServer(model, sys.argv[2], timeout=1.0, max_connections=1000).bind()
except TypeError:  # a scorer without the bound (its accept meets EMFILE all the same)
    server = ScorerServer(model, sys.argv[2], timeout=1.0).bind()
print("ready", flush=True)
server.serve_forever(threading.Event())
"""


def _idle(address, n: int) -> list[socket.socket]:
    conns = []
    for _ in range(n):
        try:
            conns.append(_connect(address, timeout=2))
        except OSError:
            break
    return conns


def test_accept_emfile_keeps_serving(tmp_path, model_file):
    sock = str(tmp_path / "s.sock")
    scorer = subprocess.Popen([sys.executable, "-c", _LOW_LIMIT, str(model_file), sock],
                              cwd=PROJECT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert scorer.stdout.readline() == b"ready\n", scorer.stderr.read()
        idle = _idle(sock, 100)  # more than its 64 descriptors: accept() meets EMFILE
        try:
            assert ping(sock, timeout=30)["loads"] == "1"  # once the idle ones time out
            assert scorer.poll() is None
        finally:
            for conn in idle:
                conn.close()
        assert score_remote(sock, MESSAGES[0], timeout=10).label in ("spam", "ham")
    finally:
        scorer.terminate()
        scorer.wait(timeout=20)
    log = scorer.stderr.read()
    assert b"cannot accept a connection (Too many open files)" in log, log[-2000:]
    assert log.count(b"cannot accept") <= 11 and b"Traceback" not in log


def test_connections_past_the_cap_wait_in_the_backlog_without_spinning(tmp_path, model_file):
    sock = str(tmp_path / "s.sock")
    with Serving(ResidentModel(model_file), sock, max_connections=5, timeout=3.0) as on:
        idle = _idle(sock, 8)
        assert _wait_for(lambda: len(on.server.reader.connections) == 5)
        cpu = time.process_time()
        time.sleep(1.0)
        assert time.process_time() - cpu < 0.3  # the reader sleeps until one closes
        assert ping(sock, timeout=15)["loads"] == "1"  # after the idle ones' deadlines
        for conn in idle:
            conn.close()


def test_scorer_under_64_descriptors_keeps_answering(tmp_path, model_file):
    """The CLI's own bounds under `prlimit --nofile=64`: scorer and metrics port flooded."""
    sock = str(tmp_path / "s.sock")

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    port = free_port()
    scorer = subprocess.Popen([sys.executable, "-m", "textnb", "serve", "--model",
                               str(model_file), "--socket", sock, "--timeout", "1",
                               "--metrics", f"127.0.0.1:{port}"], cwd=PROJECT,
                              stderr=subprocess.PIPE, preexec_fn=low_limit)
    try:
        assert _wait_for(lambda: os.path.exists(sock), 120), "the scorer did not start"
        idle = _idle(("127.0.0.1", port), 100) + _idle(sock, 100)
        try:
            assert ping(sock, timeout=30)["loads"] == "1"
            assert scorer.poll() is None
        finally:
            for conn in idle:
                conn.close()
        # Answered again once the flood's connections are closed: until the port's
        # threads see them go, a scrape finds the MAX_SCRAPES slots taken and is closed
        # at once (as a flood's connection past the cap is), so it is retried, bounded.
        assert _wait_for(lambda: _scrape(port).startswith(b"HTTP/1.0 200"), 20)
    finally:
        scorer.terminate()
        assert scorer.wait(timeout=20) == 0
    assert b"Traceback" not in scorer.stderr.read()


def _scrape(port: int) -> bytes:
    with _connect(("127.0.0.1", port)) as conn:
        conn.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
        return data


# -- F6: out of threads -------------------------------------------------------------------------


def test_thread_start_failure_keeps_serving(tmp_path, model_file, monkeypatch):
    model = ResidentModel(model_file, flush_seconds=600)  # only the final write writes
    before = model.spam_filter.n_learned["spam"]
    sock = str(tmp_path / "s.sock")
    on = Serving(model, sock)
    with on:
        def cannot_start(self, start=threading.Thread.start):
            # The model file's writer (store: "textnb-save") still starts: at shutdown the
            # workers have ended first, so under a real thread limit their slots are free.
            if self.name == "textnb-save":
                return start(self)
            raise RuntimeError("can't start new thread")

        with monkeypatch.context() as patch:
            patch.setattr(threading.Thread, "start", cannot_start)
            with pytest.raises(ScorerUnavailable, match="scorer out of threads; try again"):
                ping(sock, timeout=5)
            assert on.thread.is_alive()
        assert learn_remote(sock, variant(30), "spam") == "spam new"  # a worker now runs
        with monkeypatch.context() as patch:
            patch.setattr(threading.Thread, "start", cannot_start)
            assert ping(sock, timeout=5)["loads"] == "1"  # the running worker answers
            on.stop.set()
            on.thread.join(timeout=20)  # shutdown joins only threads that started
    assert not on.thread.is_alive()
    assert store.load(model_file).n_learned["spam"] == before + 1  # the final write happened


_THREAD_LIMIT = """
import sys, threading
from textnb.cli import main
start = threading.Thread.start

def limited(self):  # a TasksMax of 3: the main thread, the reload thread and one more
    if threading.active_count() >= 3:
        raise RuntimeError("can't start new thread")
    start(self)

threading.Thread.start = limited
sys.argv = ["textnb", "serve", *sys.argv[1:]]
main()
"""


def test_scorer_under_a_thread_limit_keeps_answering(tmp_path, model_file):
    """`textnb serve` where at most one thread beyond its own two can start: 30 clients
    at once are all answered, by the one worker that started."""
    sock = str(tmp_path / "s.sock")
    local = store.load(model_file)
    scorer = subprocess.Popen([sys.executable, "-c", _THREAD_LIMIT, "--model", str(model_file),
                               "--socket", sock], cwd=PROJECT, stderr=subprocess.PIPE)
    try:
        assert _wait_for(lambda: os.path.exists(sock), 120), "the scorer did not start"
        verdicts = [None] * 30

        def client(k):
            try:
                verdicts[k] = score_remote(sock, MESSAGES[k % len(MESSAGES)], timeout=30)
            except ScorerUnavailable as exc:
                verdicts[k] = exc

        clients = [threading.Thread(target=client, args=(k,)) for k in range(30)]
        for t in clients:
            t.start()
        for t in clients:
            t.join(timeout=60)
        assert verdicts == [score_with(local, MESSAGES[k % len(MESSAGES)]) for k in range(30)]
        assert learn_remote(sock, variant(60), "spam") == "spam new"
    finally:
        scorer.terminate()
        assert scorer.wait(timeout=30) == 0
    log = scorer.stderr.read()
    assert b"Traceback" not in log and b"scorer stopped after 30 requests" in log
    assert store.load(model_file).n_learned["spam"] == local.n_learned["spam"] + 1


# -- F7: the metrics port ------------------------------------------------------------------------


def test_metrics_idle_connections_bounded(model_file):
    telemetry = Telemetry(lambda: ResidentModel(model_file))
    port = serve_metrics(telemetry, "127.0.0.1", 0, max_scrapes=4, scrape_seconds=1.0)
    threads_before = threading.active_count()
    try:
        address = port.server_address[:2]
        idle = _idle(address, 40)
        assert len(idle) == 40
        time.sleep(0.5)
        assert threading.active_count() - threads_before <= 4  # one thread per open scrape
        assert _wait_for(lambda: threading.active_count() <= threads_before, 5)
        for conn in idle:  # each closed by the port: at once past the cap, or at 1 s
            conn.settimeout(5)
            assert conn.recv(100) == b""
            conn.close()
        assert _scrape(address[1]).startswith(b"HTTP/1.0 200")
    finally:
        port.shutdown()
        port.server_close()


# -- a full disk -------------------------------------------------------------------------------


def test_full_disk_while_journalling_gets_error_and_keeps_serving(tmp_path, model_file,
                                                                  monkeypatch):
    model = ResidentModel(model_file)

    def full(record, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with Serving(model, str(tmp_path / "s.sock")) as on:
        with monkeypatch.context() as patch:
            patch.setattr(model.journal, "append", full)
            with pytest.raises(ScorerUnavailable, match="not learned: .*No space left on device"):
                learn_remote(on.address, variant(40), "spam")
            assert score_remote(on.address, MESSAGES[0]).label in ("spam", "ham")
        assert learn_remote(on.address, variant(40), "spam") == "spam new"


# -- bounded load: tricklers and well-behaved clients together ------------------------------------


def test_200_tricklers_and_50_clients_no_well_behaved_request_fails(tmp_path, model_file):
    local = store.load(model_file)
    expected = [score_with(local, raw) for raw in MESSAGES]
    sock = str(tmp_path / "s.sock")
    scorer = subprocess.Popen([sys.executable, "-m", "textnb", "serve", "--model",
                               str(model_file), "--socket", sock], cwd=PROJECT,
                              stderr=subprocess.DEVNULL)
    try:
        assert _wait_for(lambda: os.path.exists(sock), 120), "the scorer did not start"
        latencies, failures, _ = load_run(sock, LOAD_SECONDS, 200, 50, MESSAGES, expected)
    finally:
        scorer.terminate()
        scorer.wait(timeout=30)
    print(f"{len(latencies)} requests, p50 {percentile(latencies, 50) * 1000:.0f} ms, "
          f"p99 {percentile(latencies, 99) * 1000:.0f} ms")
    assert failures == [] and len(latencies) > 50
