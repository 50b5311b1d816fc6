"""The resident scorer and its thin client: same verdicts, bounded, reloading, never eating mail.

Servers bind only to a Unix socket in tmp_path or to 127.0.0.1, and every wait has a bound.
"""

import io
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

import pytest
from typer.testing import CliRunner

from textnb.cli import app
from textnb.delivery.client import (
    MAX_MESSAGE_BYTES,
    ScorerUnavailable,
    client_scorer,
    parse_address,
    ping,
    run_filter,
    score_remote,
)
from textnb.delivery.server import ResidentModel, ScorerServer, ServerError
from textnb.delivery.verdict_headers import filter_message, in_process_scorer, score_with
from textnb.mail.parse import MailLimits
from textnb.mail.sources import RawMessage, iter_index
from textnb.modelfile import store
from textnb.spamfilter import SpamFilter

from conftest import PROJECT, SAMPLE, SAMPLE_INDEX
from _wire import wait_for as _wait_for  # noqa: E402

MESSAGES = [p.read_bytes() for p in sorted((SAMPLE / "unlabelled").iterdir())]


@pytest.fixture(scope="module")
def models(tmp_path_factory, sample_filter):
    """The sample model, and one trained with the labels swapped (its verdicts flip)."""
    folder = tmp_path_factory.mktemp("models")
    swapped = SpamFilter().fit(RawMessage(m.source, m.raw, {"spam": "ham", "ham": "spam"}[m.label])
                               for m in iter_index(SAMPLE_INDEX))
    store.save(sample_filter, folder / "sample.tnb")
    store.save(swapped, folder / "swapped.tnb")
    return folder / "sample.tnb", folder / "swapped.tnb"


@pytest.fixture
def model_file(tmp_path, models):
    path = tmp_path / "model.tnb"
    path.write_bytes(models[0].read_bytes())
    return path


class Running:
    """A ScorerServer on a thread, stopped (with a bounded wait) on exit."""

    def __init__(self, model, address, **options):
        """model: a model file's path, or a resident model (ResidentModel, ModelSet)."""
        options.setdefault("timeout", 2.0)
        options.setdefault("reload_interval", 0.1)
        if isinstance(model, (str, os.PathLike)):
            model = ResidentModel(model)
        self.server = ScorerServer(model, address, **options).bind()
        self.address = self.server.bound_address
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.server.serve_forever, args=(self.stop,))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=20)
        assert not self.thread.is_alive()




# -- verdicts ---------------------------------------------------------------------


def test_remote_verdicts_equal_in_process_ones(tmp_path, model_file):
    local = store.load(model_file)
    with Running(model_file, str(tmp_path / "s.sock")) as running:
        for raw in MESSAGES:
            assert score_remote(running.address, raw) == score_with(local, raw)
        assert score_remote(running.address, MESSAGES[0], cost_ratio=1e300).label == "ham"
        assert ping(running.address)["requests"] == str(len(MESSAGES) + 1)


def test_a_tuned_model_that_flags_nothing_or_everything_at_a_ratio_is_read_by_its_clients(
        tmp_path, models):
    """A tuned model's map may never reach λ / (1 + λ) (threshold inf: nothing is worth
    flagging at that λ) or start above it (-inf): both are verdicts the scorer gives and
    the clients must read, not malformed replies that pass mail through unscored."""
    from textnb.decision import calibration

    tuned = store.load(models[0])
    # four out-of-fold scores: the map's top is 2 / 2.5 spams, its bottom 0.5 / 2.5
    tuned.calibration = calibration.fit([-3.0, -1.0, 2.0, 4.0], [0, 0, 1, 1])
    path = tmp_path / "tuned.tnb"
    store.save(tuned, path)
    with Running(path, str(tmp_path / "s.sock")) as running:
        for ratio, threshold, label in ((999.0, float("inf"), "ham"),
                                        (0.001, float("-inf"), "spam")):
            for raw in MESSAGES[:3]:
                verdict = score_remote(running.address, raw, cost_ratio=ratio)
                assert verdict == score_with(tuned, raw, ratio)
                assert (verdict.threshold, verdict.label) == (threshold, label)
            remote = client_scorer(running.address, path, cost_ratio=ratio, fallback=False)
            local = in_process_scorer(path, cost_ratio=ratio)
            result = filter_message(MESSAGES[0], remote)
            assert result == filter_message(MESSAGES[0], local)
            assert result.error is None and f"threshold={threshold:.3f}".encode() in result.output


def test_client_filter_output_equals_the_in_process_filter(tmp_path, model_file):
    local = in_process_scorer(model_file)
    with Running(model_file, str(tmp_path / "s.sock")) as running:
        remote = client_scorer(running.address, model_file, fallback=False)
        for raw in MESSAGES:
            assert filter_message(raw, remote, True) == filter_message(raw, local, True)


def test_unix_socket_is_owner_only_and_removed_on_stop(tmp_path, model_file):
    path = tmp_path / "s.sock"
    with Running(model_file, str(path)):
        mode = os.stat(path).st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
    assert not path.exists()


def test_loopback_tcp_and_no_public_address(model_file):
    with Running(model_file, ("127.0.0.1", 0)) as running:
        host, port = running.address
        assert host == "127.0.0.1" and port > 0
        assert parse_address(f"127.0.0.1:{port}") == ("127.0.0.1", port)
        assert score_remote(("127.0.0.1", port), MESSAGES[0]).label in ("spam", "ham")
    with pytest.raises(ServerError, match="not a loopback address"):
        ScorerServer(ResidentModel(model_file), ("0.0.0.0", 0)).bind()


def test_serve_without_a_model_says_so(tmp_path):
    result = CliRunner().invoke(app, ["serve", "--model", str(tmp_path / "none.tnb"),
                                      "--socket", str(tmp_path / "s.sock")])
    assert result.exit_code == 1 and "no model at" in result.output
    assert not (tmp_path / "s.sock").exists()


def test_address_forms():
    assert parse_address("/run/user/1000/textnb.sock") == "/run/user/1000/textnb.sock"
    assert parse_address("scorer.sock") == "scorer.sock"
    assert parse_address(":7833") == ("127.0.0.1", 7833)
    assert parse_address("[::1]:7833") == ("::1", 7833)


# -- the socket path --------------------------------------------------------------------


def test_stale_socket_is_replaced_but_other_files_are_not(tmp_path, model_file):
    path = tmp_path / "s.sock"
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(path))
    dead.close()  # a scorer that died without cleaning up
    with Running(model_file, str(path)) as running:
        assert ping(running.address)["loads"] == "1"
        with pytest.raises(ServerError, match="already listening"):
            ScorerServer(ResidentModel(model_file), str(path)).bind()
    regular = tmp_path / "notes.txt"
    regular.write_text("mine")
    with pytest.raises(ServerError, match="not a socket"):
        ScorerServer(ResidentModel(model_file), str(regular)).bind()
    assert regular.read_text() == "mine"


def test_the_socket_appears_only_once_it_accepts_connections(tmp_path, model_file):
    """Bound under a name of its own and renamed into place after listen(): whoever waits
    for the file (a client, a service manager, a test) is never refused."""
    path = tmp_path / "scorer.sock"
    server = ScorerServer(ResidentModel(model_file), str(path)).bind()
    try:
        assert sorted(p.name for p in tmp_path.iterdir()) == ["model.tnb", "scorer.sock"]
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        client = socket.socket(socket.AF_UNIX)
        client.connect(str(path))  # queued by the listening socket, not refused
        client.close()
    finally:
        server._listener.close()
        path.unlink()


# -- when the scorer cannot answer -----------------------------------------------------------


def test_client_falls_back_to_in_process_scoring(tmp_path, model_file):
    notes = []
    score = client_scorer(str(tmp_path / "nobody.sock"), model_file, notes=notes)
    assert score(MESSAGES[0]) == in_process_scorer(model_file)(MESSAGES[0])
    assert "unavailable" in notes[0] and "nobody.sock" in notes[0]


def test_no_fallback_passes_the_message_through(tmp_path, model_file):
    stdout, stderr = io.BytesIO(), io.StringIO()
    score = client_scorer(str(tmp_path / "nobody.sock"), model_file, fallback=False)
    code = run_filter(io.BytesIO(MESSAGES[0]), stdout, stderr, score)
    assert (code, stdout.getvalue()) == (3, MESSAGES[0])
    assert "passed through unchanged" in stderr.getvalue()


def test_message_size_is_bounded(tmp_path, model_file):
    big = b"Subject: big\n\n" + b"spam " * 400
    with Running(model_file, str(tmp_path / "s.sock"), max_bytes=1000) as running:
        with pytest.raises(ScorerUnavailable, match="exceeds the scorer's limit of 1000"):
            score_remote(running.address, big)
        notes = []
        verdict = client_scorer(running.address, model_file, notes=notes)(big)
        assert verdict.label in ("spam", "ham") and "exceeds" in notes[0]
        assert ping(running.address)["requests"] == "0"  # refused before reading


def test_client_sends_what_the_parser_would_keep():
    # One byte past MailLimits.max_bytes, so the parser still marks the message truncated.
    assert MAX_MESSAGE_BYTES == MailLimits().max_bytes + 1


def test_slow_clients_time_out_and_hold_no_worker(tmp_path, model_file):
    with Running(model_file, str(tmp_path / "s.sock"), max_clients=2, timeout=1.0) as running:
        slow = []
        for _ in range(3):  # more than the workers: request lines that never end
            conn = socket.socket(socket.AF_UNIX)
            conn.settimeout(5)
            conn.connect(running.address)
            conn.sendall(b"TEXTNB/1 SCO")
            slow.append(conn)
        time.sleep(0.2)
        start = time.monotonic()
        # Only complete requests reach a worker: this one is answered at once.
        assert score_remote(running.address, MESSAGES[0], timeout=0.5).label in ("spam", "ham")
        # The server drops the slow clients at their 1 s deadline, with an ERROR line.
        for conn in slow:
            assert conn.recv(200).startswith(b"TEXTNB/1 ERROR request not complete within 1 s")
            assert conn.recv(100) == b""
        assert time.monotonic() - start < 3
        for conn in slow:
            conn.close()


def test_garbage_gets_an_error_and_the_server_carries_on(tmp_path, model_file):
    with Running(model_file, str(tmp_path / "s.sock")) as running:
        for request in (b"HELLO\n", b"TEXTNB/1 SCORE -5\n", b"TEXTNB/1 SCORE 3 0\nabc",
                        b"x" * 5000):
            conn = socket.socket(socket.AF_UNIX)
            conn.settimeout(5)
            conn.connect(running.address)
            conn.sendall(request)
            assert conn.recv(1000).startswith(b"TEXTNB/1 ERROR ")
            conn.close()
        assert score_remote(running.address, MESSAGES[0]).label in ("spam", "ham")


# -- reloads ---------------------------------------------------------------------------


def test_reload_on_retrain_without_dropping_requests(tmp_path, model_file, models):
    with Running(model_file, str(tmp_path / "s.sock")) as running:
        before = [score_remote(running.address, raw) for raw in MESSAGES]
        answered, failures, done = [], [], threading.Event()

        def hammer():
            while not done.is_set():
                try:
                    answered.append(score_remote(running.address, MESSAGES[1], timeout=10))
                except ScorerUnavailable as exc:
                    failures.append(exc)

        clients = [threading.Thread(target=hammer) for _ in range(3)]
        for client in clients:
            client.start()
        try:
            # Requests answered by the old model first, then the swap, then wait for one
            # answered by the new model: setting `done` as soon as the reload is seen
            # could stop every client before its next request (CI once saw only 'ham').
            assert _wait_for(lambda: len(answered) > 0)
            store.atomic_write(model_file, models[1].read_bytes())  # as `textnb train` does
            assert _wait_for(lambda: ping(running.address)["loads"] == "2")
            assert _wait_for(lambda: answered[-1].label != answered[0].label)
        finally:
            done.set()
            for client in clients:
                client.join(timeout=15)
        assert failures == [] and len({v.label for v in answered}) == 2  # old and new model
        # Swapped labels swap the counts, so every log-odds changes sign.
        after = [score_remote(running.address, raw).log_odds for raw in MESSAGES]
        assert after == pytest.approx([-b.log_odds for b in before])


def test_a_damaged_new_model_keeps_the_old_one(tmp_path, model_file):
    with Running(model_file, str(tmp_path / "s.sock")) as running:
        before = score_remote(running.address, MESSAGES[0])
        model_file.write_bytes(model_file.read_bytes()[:1000])
        time.sleep(0.5)  # five reload checks
        assert ping(running.address)["loads"] == "1"
        assert score_remote(running.address, MESSAGES[0]) == before


def test_a_grown_tokenizer_is_renewed(model_file):
    model = ResidentModel(model_file)
    fresh = model.strings()
    model.max_strings = fresh + 50
    assert not model.check()
    # With an infix, so that spaCy splits them (other chunks are split without it and
    # add nothing to its strings: tokenize._words_without_spacy).
    words = b" ".join(b"x/w%d" % i for i in range(99))
    score_with(model.spam_filter, b"Subject: new words\n\n" + words)
    assert model.strings() >= fresh + 50
    assert model.check() and model.loads == 2 and model.strings() == fresh


# -- the real processes ------------------------------------------------------------------

_THIN_CHECK = """
import sys
import textnb.delivery.client
code = textnb.delivery.client.main(sys.argv[1:])
heavy = {'spacy', 'numpy', 'scipy', 'typer', 'click'} & {m.split('.')[0] for m in sys.modules}
heavy = sorted(heavy)
sys.stderr.write('heavy modules: %s\\n' % heavy)
sys.exit(code)
"""


def test_thin_client_process_imports_no_heavy_module(tmp_path, model_file):
    local = in_process_scorer(model_file)
    with Running(model_file, str(tmp_path / "s.sock")) as running:
        for raw in MESSAGES[:2]:
            done = subprocess.run([sys.executable, "-c", _THIN_CHECK, "--server", running.address,
                                   "--no-fallback", "--spamassassin"], input=raw,
                                  capture_output=True, cwd=PROJECT, timeout=60)
            expected = filter_message(raw, local, spamassassin=True)
            assert done.stdout == expected.output
            assert done.returncode == {"spam": 0, "ham": 1, "unsure": 2}[expected.verdict.label]
            assert b"heavy modules: []" in done.stderr, done.stderr


def test_serve_process_stops_cleanly_on_sigterm(tmp_path, model_file):
    path = tmp_path / "s.sock"
    server = subprocess.Popen([sys.executable, "-m", "textnb", "serve", "--model", str(model_file),
                               "--socket", str(path)], cwd=PROJECT, stderr=subprocess.PIPE)
    try:
        assert _wait_for(lambda: path.exists(), seconds=120), "server did not start"
        assert score_remote(str(path), MESSAGES[0]).label in ("spam", "ham")
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=15) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=15)
    assert not path.exists()
    assert b"scorer stopped after 1 requests" in server.stderr.read()
