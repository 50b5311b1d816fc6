"""Learning through the resident scorer: the ledger's rules, the journal, the batched
writes, kill -9, and many clients at once.

Servers bind only to a Unix socket in tmp_path, and every wait has a bound.
"""

import os
import signal
import socket
import subprocess
import sys
import threading

import numpy as np
import pytest

from textnb.delivery.client import ScorerUnavailable, learn_remote, ping, score_remote
from textnb.modelfile.journal import Journal, Record, journal_path
from textnb.mail.sources import RawMessage
from textnb.modelfile import store
from textnb.modelfile.retrain import forget_messages, learn_messages
from textnb.models.ledger import message_digest

from textnb.delivery.server import ResidentModel, ScorerServer

from conftest import PROJECT
from test_c_client import c_client  # noqa: F401
from test_server import MESSAGES, _wait_for, model_file, models  # noqa: F401
from test_server import Running as _Running


class Running(_Running):
    """test_server's running scorer, with the learning options of ResidentModel."""

    def __init__(self, model_path, address, flush_seconds=1.0, **options):
        options.setdefault("timeout", 2.0)
        options.setdefault("reload_interval", 0.1)
        self.server = ScorerServer(ResidentModel(model_path, flush_seconds=flush_seconds),
                                   address, **options).bind()
        self.address = self.server.bound_address
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.server.serve_forever, args=(self.stop,))


def variant(i: int, base: bytes = MESSAGES[0]) -> bytes:
    """A message of its own (its own ledger digest): ``base`` with a numbered line added."""
    return base.rstrip(b"\n") + f"\nvariant {i} of the sample message\n".encode()


def same_counts(a, b) -> bool:
    return (a.vocabulary.tokens_ == b.vocabulary.tokens_ and a.ledger == b.ledger
            and a.n_learned == b.n_learned
            and np.array_equal(a.model.feature_count_, b.model.feature_count_)
            and np.array_equal(a.doc_freq_, b.doc_freq_))


def test_learn_and_forget_follow_the_ledger_as_retrain_does(tmp_path, model_file):
    expected = store.load(model_file)
    spam_of_the_sample = MESSAGES[0]
    with Running(model_file, str(tmp_path / "s.sock"), flush_seconds=0.1) as running:
        address = running.address
        score_remote_label = score_remote(address, spam_of_the_sample).label
        label = "ham" if score_remote_label == "spam" else "spam"
        assert learn_remote(address, variant(1), "spam") == "spam new"
        assert learn_remote(address, variant(1), "spam") == "spam known"
        assert learn_remote(address, variant(1), "ham") == "ham moved"
        assert learn_remote(address, variant(2), "ham") == "ham new"
        assert learn_remote(address, variant(2), None) == "ham"
        assert learn_remote(address, variant(2), None) == "not-found"
        for _ in range(3):  # enough to turn the verdict on this very message
            learn_remote(address, spam_of_the_sample, label)
        assert ping(address)["spam"] != "" and score_remote(address, spam_of_the_sample).label == label
    for raw, lab in [(variant(1), "spam"), (variant(1), "spam"), (variant(1), "ham"),
                     (variant(2), "ham")]:
        learn_messages(expected, [RawMessage("-", raw, lab)])
    forget_messages(expected, [RawMessage("-", variant(2), None)])
    learn_messages(expected, [RawMessage("-", spam_of_the_sample, label)] * 3)
    assert same_counts(store.load(model_file), expected)  # written at the stop
    assert not journal_path(model_file).exists()


def test_an_update_reaches_the_file_within_the_flush_bound(tmp_path, model_file):
    with Running(model_file, str(tmp_path / "s.sock"), flush_seconds=0.3) as running:
        learn_remote(running.address, variant(7), "spam")
        assert journal_path(model_file).exists()  # durable before the file is written
        assert _wait_for(lambda: message_digest(variant(7)) in store.load(model_file).ledger,
                         seconds=5.0)
        assert _wait_for(lambda: not journal_path(model_file).exists(), seconds=5.0)
        assert running.server.model.writes == 1


def test_a_retrain_meanwhile_is_kept_and_the_learn_too(tmp_path, model_file):
    from textnb.modelfile.retrain import retrain

    other = tmp_path / "other.eml"
    other.write_bytes(variant(9))
    with Running(model_file, str(tmp_path / "s.sock"), flush_seconds=0.5) as running:
        learn_remote(running.address, variant(8), "spam")
        retrain(model_file, ham=[str(other)])  # takes the same file lock as the scorer's write
        assert _wait_for(lambda: running.server.model.loads == 2)
    ledger = store.load(model_file).ledger
    assert ledger.label(message_digest(variant(8))) == "spam"
    assert ledger.label(message_digest(variant(9))) == "ham"


def test_fifty_clients_learning_at_once_lose_nothing(tmp_path, model_file):
    n, replies = 50, {}
    with Running(model_file, str(tmp_path / "s.sock"), max_clients=8, timeout=20.0,
                 flush_seconds=0.2) as running:
        def learn(i):
            replies[i] = learn_remote(running.address, variant(100 + i),
                                      ("spam", "ham")[i % 2], timeout=60.0)

        threads = [threading.Thread(target=learn, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    assert replies == {i: f"{('spam', 'ham')[i % 2]} new" for i in range(n)}
    ledger = store.load(model_file).ledger
    assert all(ledger.label(message_digest(variant(100 + i))) == ("spam", "ham")[i % 2]
               for i in range(n))


def test_killed_while_learning_the_model_is_whole_and_holds_every_acknowledged_learn(
        tmp_path, model_file):
    """A real `textnb serve` process, killed with SIGKILL while 4 clients learn as fast as
    they can and the model file is being rewritten every 0.2 s."""
    sock = tmp_path / "s.sock"
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    server = subprocess.Popen([sys.executable, "-m", "textnb", "serve", "--model", str(model_file),
                               "--socket", str(sock), "--flush-seconds", "0.2"],
                              stderr=subprocess.DEVNULL, env=env)
    acknowledged, stop = [], threading.Event()
    try:
        assert _wait_for(lambda: _pings(sock), seconds=120)

        def learner(k):
            i = 0
            while not stop.is_set():
                raw, label = variant(1000 * k + i), ("spam", "ham")[i % 2]
                try:
                    learn_remote(str(sock), raw, label, timeout=10.0)
                except ScorerUnavailable:
                    return
                acknowledged.append((raw, label))
                i += 1

        threads = [threading.Thread(target=learner, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        assert _wait_for(lambda: len(acknowledged) >= 60 and store.load(model_file)
                         and journal_path(model_file).exists(), seconds=120)
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=30)
    finally:
        stop.set()
        if server.poll() is None:
            server.kill()
            server.wait(timeout=30)
    for t in threads:
        t.join(timeout=30)
    store.load(model_file)  # whole: it loads and its checksums hold
    restarted = ResidentModel(model_file).spam_filter  # what the next `textnb serve` starts from
    assert len(acknowledged) >= 60
    for raw, label in acknowledged:
        assert restarted.ledger.label(message_digest(raw)) == label


def _pings(sock) -> bool:
    try:
        ping(str(sock), timeout=1.0)
        return True
    except ScorerUnavailable:
        return False


def test_a_torn_journal_record_is_ignored(tmp_path):
    journal = Journal(tmp_path / "m.tnb")
    journal.append(Record("LEARN", "spam", b"Subject: a\n\nbody\n"))
    journal.append(Record("FORGET", None, b"Subject: b\n\nbody\n"))
    whole = journal.path.read_bytes()
    journal.path.write_bytes(whole[:-5])  # a crash in the middle of the second append
    assert [r.kind for r in journal.read()] == ["LEARN"]
    journal.path.write_bytes(whole.replace(b"body\n\n", b"bodY\n\n", 1))  # a flipped byte
    assert journal.read() == []
    assert oct(os.stat(journal.path).st_mode & 0o777) in ("0o600", "0o644")


def test_a_single_model_scorer_refuses_a_user_and_old_clients_still_work(tmp_path, model_file):
    with Running(model_file, str(tmp_path / "s.sock")) as running:
        with pytest.raises(ScorerUnavailable, match="serves one model"):
            learn_remote(running.address, variant(3), "spam", user="alice")
        with pytest.raises(ScorerUnavailable, match="serves one model"):
            score_remote(running.address, variant(3), user="alice")
        with pytest.raises(ScorerUnavailable, match="bad request"):
            learn_remote(running.address, variant(3), "junk")
        s = socket.socket(socket.AF_UNIX)
        s.connect(running.address)
        s.sendall(b"TEXTNB/1 SCORE 5\nhello")
        assert s.recv(1024).startswith(b"TEXTNB/1 OK ")
        s.close()


def test_the_python_client_command_learns_and_says_when_it_did_not(tmp_path, model_file):
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    sock = tmp_path / "s.sock"
    run = [sys.executable, "-m", "textnb.delivery.client", "--server", str(sock)]
    with Running(model_file, str(sock)):
        done = subprocess.run([*run, "--learn", "spam"], input=variant(4), capture_output=True,
                              env=env, timeout=60)
        assert (done.returncode, done.stdout) == (0, b"learned spam new\n")
        done = subprocess.run([*run, "--forget"], input=variant(4), capture_output=True,
                              env=env, timeout=60)
        assert (done.returncode, done.stdout) == (0, b"forgotten spam\n")
    done = subprocess.run([*run, "--learn", "spam"], input=variant(4), capture_output=True,
                          env=env, timeout=60)
    assert done.returncode == 3 and b"message not learned as spam" in done.stderr
    done = subprocess.run([*run, "--learn", "maybe"], input=b"", capture_output=True, env=env,
                          timeout=60)
    assert done.returncode == 3 and b"--learn 'maybe' must be spam or ham" in done.stderr


# -- the compiled client ---------------------------------------------------------------


def _run(command, stdin: bytes):
    done = subprocess.run(command, input=stdin, capture_output=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(PROJECT)})
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("args", [["--learn", "spam"], ["--learn", "ham"], ["--forget"],
                                  ["--learn", "spam", "--user", "alice"]])
def test_the_compiled_client_learns_as_the_python_one_does(tmp_path, model_file, c_client, args):
    sock = tmp_path / "s.sock"
    python = [sys.executable, "-m", "textnb.delivery.client", "--server", str(sock), *args]
    compiled = [str(c_client), "--server", str(sock), *args]
    with Running(model_file, str(sock)):
        first = _run(compiled, variant(11))
        learn_remote(str(sock), variant(12), "ham")  # the same state for the Python client
        forget = args == ["--forget"]
        second = _run(python, variant(12) if forget else variant(13))
        if not forget:
            assert first[1].split()[:2] == second[1].split()[:2]
    if "--user" in args:
        assert first[0] == second[0] == 3 and b"serves one model" in first[2]
        assert first[2].replace(b"--learn", b"") == second[2].replace(b"--learn", b"")
    elif forget:
        assert (first[0], first[1]) == (0, b"forgotten not-found\n")
        assert (second[0], second[1]) == (0, b"forgotten ham\n")
    else:
        assert first == (0, f"learned {args[1]} new\n".encode(), b"") == second
    down = [_run([c.replace(str(sock), str(tmp_path / "none.sock")) for c in cmd], variant(14))
            for cmd in (compiled, python)]
    assert down[0][:2] == down[1][:2] == (3, b"")
    assert down[0][2] == down[1][2] and b"message not" in down[0][2]


def test_the_compiled_client_refuses_bad_learning_options(c_client):
    for args, says in ((["--learn", "maybe"], b"--learn 'maybe' must be spam or ham"),
                       (["--learn", "spam", "--forget"], b"--learn and --forget exclude"),
                       (["--user", "a b", "--forget"], b"must be 1-200 characters")):
        code, _, err = _run([str(c_client), *args], b"")
        assert code == 3 and says in err
        assert says in _run([sys.executable, "-m", "textnb.delivery.client", *args], b"")[2]
