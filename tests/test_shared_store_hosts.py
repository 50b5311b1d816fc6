"""Several hosts on one PostgreSQL shared store, as a site runs them: a system test.

Each host here is what a mail host runs: a ``SharedModel`` of its own (its own
connections) or a real ``textnb serve --store`` process with its own outbox. The
database is a private cluster (tests/pg_cluster.py). What must hold, whatever the
interleaving, a scorer killed with SIGKILL, PostgreSQL restarted, or a host cut off for
the whole run: every host ends with counts identical (exact equality, no tolerance) to
one ``textnb train`` on the final labels.
"""

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import free_port
from tests.pg_cluster import pg_cluster, store_url  # noqa: F401  (fixtures)
from tests.test_shared_store import counts_of, host, new_model, relabelled
from textnb.config import FilterConfig
from textnb.delivery.client import ScorerUnavailable, learn_remote, ping, score_remote
from textnb.mail.sources import iter_index
from textnb.models.ledger import normalise

from conftest import every_message

PROJECT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("memo_tokens")


def spamassassin(root, n, folder):
    """``n`` SpamAssassin messages, both classes, spread over the corpus, read as
    ``textnb train --index`` reads them (a file that starts with an mbox ``From `` line is
    read as an mbox: a few messages' bytes then differ from the file's)."""
    from textnb.mail.corpora import iter_corpus

    every = list(iter_corpus("spamassassin", root))
    picked = every[::max(1, len(every) // n)][:n]
    index = Path(folder) / "spamassassin-index"
    index.write_text("".join(f"{e.label} {root / 'spamassassin' / e.relpath}\n"
                             for e in picked))
    return list(iter_index(index))


def one_train(messages, tmp_path):
    """The model ``textnb train --regime all`` makes of ``messages`` (their final labels):
    the store's hosts learn every message."""
    from textnb import commands
    from textnb.modelfile import store

    index = tmp_path / "final-index"
    index.write_text("".join(f"{m.label} {Path(m.source).resolve()}\n" for m in messages))
    model = tmp_path / "one-train.tnb"
    commands.train(model, every_message(), index=[str(index)])
    return store.load(model)


class Scorer:
    """A ``textnb serve --store`` process with its own socket and outbox."""

    def __init__(self, url, folder: Path, name: str, *options: str):
        self.url, self.socket, self.options = url, str(folder / f"{name}.sock"), options
        self.outbox = folder / f"{name}.outbox"
        self.log = open(folder / f"{name}.log", "ab")  # noqa: SIM115
        self.process = None

    def start(self):
        env = {**os.environ, "PYTHONPATH": str(PROJECT)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "textnb", "serve", "--store", self.url, "--socket",
             self.socket, "--outbox", str(self.outbox), "--reload-interval", "0.5",
             *self.options],
            stderr=self.log, stdout=self.log, env=env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                return ping(self.socket, timeout=1.0)
            except ScorerUnavailable:
                assert self.process.poll() is None, "the scorer exited"
                time.sleep(0.1)
        raise AssertionError("the scorer did not answer")

    def stop(self, sig=signal.SIGTERM):
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=60)

    def learned(self):
        reply = ping(self.socket, timeout=5.0)
        return {"spam": int(reply["spam"]), "ham": int(reply["ham"])}


@pytest.fixture
def scorers(tmp_path):
    started = []

    def make(url, name, *options):
        scorer = Scorer(url, tmp_path, name, *options)
        started.append(scorer)
        return scorer

    yield make
    for scorer in started:
        scorer.stop(signal.SIGKILL)


def trained_store(url, sample_index):
    from textnb.commands import shared_store

    shared_store.train(url, "default", FilterConfig(), index=[str(sample_index)])


def novel_message():
    words = " ".join(f"quorvex{i} plimbat{i}" for i in range(30))
    return f"From: Nia <nia@example.org>\nSubject: garden notes\n\n{words}\n".encode()


def test_a_learn_through_one_scorer_changes_the_others_verdicts_within_a_second(
        store_url, sample_index, scorers):
    trained_store(store_url, sample_index)
    a, b, c = (scorers(store_url, name) for name in "abc")
    for scorer in (a, b, c):
        scorer.start()
    message = novel_message()
    assert [score_remote(s.socket, message).label for s in (b, c)] == ["ham", "ham"]
    started = time.monotonic()
    assert learn_remote(a.socket, message, "spam") == "spam new"
    waits = {}
    while len(waits) < 2 and time.monotonic() - started < 5:
        for scorer in (b, c):
            if scorer not in waits and score_remote(scorer.socket, message).label == "spam":
                waits[scorer] = time.monotonic() - started
        time.sleep(0.005)
    print(f"learn on A seen by B and C after {max(waits.values()) * 1000:.0f} ms")
    assert len(waits) == 2 and max(waits.values()) < 1.0


def test_tune_write_on_the_store_changes_a_running_scorers_verdicts_without_a_restart(
        store_url, sample_index, scorers, tmp_path):
    from textnb import commands
    from textnb.commands import shared_store
    from textnb.modelfile import store

    trained_store(store_url, sample_index)
    scorer = scorers(store_url, "a")
    scorer.start()
    messages = list(iter_index(sample_index))
    before = [score_remote(scorer.socket, m.raw) for m in messages]
    # The same tuning of a model file trained on the same mail: what the scorer must say.
    model = tmp_path / "twin.tnb"
    commands.train(model, every_message(), index=[str(sample_index)])  # as the store learns
    commands.tune(model, [9.0], index=[str(sample_index)], n_folds=3, write=True)
    twin = store.load(model)
    log_odds = twin.log_odds(m.raw for m in messages)
    expected = [(d.label, float(x), float(p), d.threshold) for d, x, p in zip(
        twin.cost_model().decide_many(log_odds, twin.p_spam(log_odds)), log_odds,
        twin.p_spam(log_odds))]
    started = time.monotonic()
    shared_store.tune(store_url, "default", [9.0], index=[str(sample_index)], n_folds=3,
                      write=True)
    written = time.monotonic()
    while time.monotonic() - written < 5:
        after = [tuple(score_remote(scorer.socket, m.raw)) for m in messages]
        if after == expected:
            break
        time.sleep(0.05)
    print(f"tune --write took {written - started:.1f} s; the scorer scored with it "
          f"{(time.monotonic() - written) * 1000:.0f} ms after")
    assert after == expected  # the label, log-odds, P(spam) and threshold, bit for bit
    assert [v.threshold for v in before] == [0.0] * len(messages)  # ln 1, untuned
    assert {v[3] for v in after} != {0.0} and [tuple(v) for v in before] != after
    assert scorer.process.poll() is None  # the same process, never restarted


def test_three_hosts_teaching_2000_spamassassin_messages_at_once_equal_one_train(
        store_url, shared_corpora, tmp_path):
    """All three teach the same messages, in different orders and batches, at once; host
    B first teaches 200 of them under the wrong label and relabels them after; host C
    forgets 200 that host A has taught (after A has). The others only ever give the right
    label, so whatever the interleaving the final labels are the corpus's, less C's 200."""
    messages = spamassassin(shared_corpora, 2000, tmp_path)
    rng = random.Random(47)
    order = list(range(len(messages)))
    rng.shuffle(order)
    wrong, forgotten = set(order[:200]), set(order[200:400])
    new_model(store_url)
    hosts = [host(store_url) for _ in range(3)]
    # Tokenised once, here (memo_tokens): spaCy is not imported by three threads at once,
    # and the hosts' time goes to the store.
    hosts[0].spam_filter.tokens_many([normalise(m.raw) for m in messages])
    a_taught_forgotten = threading.Event()
    errors = []

    def host_a(h):
        first = [messages[i] for i in sorted(forgotten)]
        h.learn_messages(first)
        a_taught_forgotten.set()
        h.learn_messages(messages)  # batches of 256 against B's and C's single messages

    def host_b(h):
        swap = {"spam": "ham", "ham": "spam"}
        for i in order[::-1]:
            if i in forgotten:
                continue
            m = messages[i]
            if i in wrong:
                h.update("LEARN", m.raw, swap[m.label])
            h.update("LEARN", m.raw, m.label)

    def host_c(h):
        for k, i in enumerate(order[200:] + order[:200]):
            if i not in forgotten:
                h.update("LEARN", messages[i].raw, messages[i].label)
            if k == 600:
                a_taught_forgotten.wait(120)
                h.learn_messages([messages[j] for j in forgotten], kind="FORGET")

    def run(work, h):
        try:
            work(h)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w, h))
               for w, h in zip((host_a, host_b, host_c), hosts)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    seconds = time.monotonic() - started
    final = [m for i, m in enumerate(messages) if i not in forgotten]
    expected = counts_of(one_train(final, tmp_path))
    for h in hosts:
        h.catch_up()
        assert counts_of(h.spam_filter) == expected
    joining = host(store_url)
    assert counts_of(joining.spam_filter) == expected
    # The same records in the same order: the same columns, so verdicts bit for bit alike.
    tokens = [list(h.spam_filter.vocabulary.tokens_) for h in (*hosts, joining)]
    assert all(t == tokens[0] for t in tokens)
    raws = [m.raw for m in messages[:50]]
    scores = [h.spam_filter.log_odds(raws).tolist() for h in (*hosts, joining)]
    assert all(s == scores[0] for s in scores)
    print(f"three hosts: {3 * len(messages) + 400} learns and forgets in {seconds:.1f} s, "
          f"{len(expected[0])} tokens equal to one train")


class Proxy:
    """A TCP forwarder to PostgreSQL that the test cuts (a host's network away) and
    restores on the same port."""

    def __init__(self, target_port: int):
        self.target, self.port = target_port, free_port()
        self.open_sockets, self.lock = [], threading.Lock()
        self.listener = None
        self.restore()

    def restore(self):
        self.listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, args=(self.listener,), daemon=True).start()

    def _accept(self, listener):
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            if listener is not self.listener:  # accepted as it was being cut
                client.close()
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            with self.lock:
                self.open_sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a, b):
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self):
        listener, self.listener = self.listener, None
        try:
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread (Linux)
        except OSError:
            pass
        listener.close()
        with self.lock:
            for s in self.open_sockets:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            self.open_sockets = []


def test_killed_scorer_restarted_database_and_a_host_away_lose_nothing_and_count_nothing_twice(
        pg_cluster, shared_corpora, sample_index, scorers, tmp_path):
    url = pg_cluster.create_database("crashes")
    trained_store(url, sample_index)
    proxy = Proxy(pg_cluster.port)
    away_url = f"postgresql://textnb@127.0.0.1:{proxy.port}/crashes"
    a, b, c = scorers(url, "a"), scorers(url, "b"), scorers(away_url, "c")
    for scorer in (a, b, c):
        scorer.start()
    proxy.cut()  # host C is away from here to the end of the run
    messages = spamassassin(shared_corpora, 600, tmp_path)
    share = {a: messages[:250], b: messages[200:450], c: messages[400:]}  # overlapping
    relabel = {id(m) for m in messages[260:290]}  # B alone teaches these, then relabels
    forget = messages[560:580]  # C forgets these after teaching them
    acknowledged = {a: 0, b: 0, c: 0}
    stop_sending = threading.Event()

    def send(scorer, raw, label):
        """As a delivery agent would: again until the scorer acknowledges it."""
        while not stop_sending.is_set():
            try:
                return learn_remote(scorer.socket, raw, label, timeout=10.0)
            except ScorerUnavailable:
                time.sleep(0.2)
        raise AssertionError("never acknowledged")

    def client(scorer):
        for m in share[scorer]:
            send(scorer, m.raw, m.label)
            acknowledged[scorer] += 1
        if scorer is b:
            for m in share[b]:
                if id(m) in relabel:
                    send(b, m.raw, "ham" if m.label == "spam" else "spam")
        if scorer is c:
            for m in forget:
                send(c, m.raw, None)

    threads = [threading.Thread(target=client, args=(s,)) for s in (a, b, c)]
    for t in threads:
        t.start()
    try:
        while acknowledged[a] < 60:
            time.sleep(0.01)
        a.stop(signal.SIGKILL)  # mid-learn: its client keeps sending, unanswered
        time.sleep(0.5)
        a.start()
        while acknowledged[b] < 120:
            time.sleep(0.01)
        pg_cluster.stop("fast")  # mid-stream: learns meanwhile wait in the outboxes
        time.sleep(1.0)
        pg_cluster.start()
        for t in threads:
            t.join(timeout=600)
    finally:
        stop_sending.set()
    assert not any(t.is_alive() for t in threads)
    final = {m.raw: m for m in iter_index(sample_index)}  # what the store was trained on
    for m in messages:
        final[m.raw] = m
    for m in messages[260:290]:
        final[m.raw] = relabelled(m, "ham" if m.label == "spam" else "spam")
    for m in forget:
        del final[m.raw]
    expected = counts_of(one_train(list(final.values()), tmp_path))
    assert c.outbox.read_bytes().count(b"\nTNBE ") >= 150  # C's learns waited there
    assert c.learned() == {"spam": 40, "ham": 60}  # and C scored from the sample meanwhile
    proxy.restore()  # host C is back: its outbox is sent, each entry once
    deadline = time.monotonic() + 120
    want = expected[2]
    while time.monotonic() < deadline:
        if all(s.learned() == want for s in (a, b, c)):
            break
        time.sleep(0.2)
    assert [s.learned() for s in (a, b, c)] == [want] * 3
    assert counts_of(host(url).spam_filter) == expected
    print(f"after kill -9, a restart and a host away: {sum(want.values())} messages, "
          "equal to one train")


@contextlib.contextmanager
def milter_on_store(*options):
    """``textnb milter`` with ``options`` on a free loopback port, once it accepts: its
    socket spec; stopped with SIGTERM after."""
    port = free_port()
    spec = f"inet:{port}@127.0.0.1"
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    milter = subprocess.Popen([sys.executable, "-m", "textnb", "milter", "--socket", spec,
                               *options], env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert milter.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
        yield spec
    finally:
        milter.send_signal(signal.SIGTERM)
        milter.wait(timeout=60)


def test_the_milter_on_a_store_sees_a_learn_made_on_another_host(store_url, sample_index):
    """The two-host recipe of docs/shared-store.md: the MX's milter on the store, a learn
    on the IMAP host (a SharedModel of its own), the MX's next verdict changed."""
    from tests.test_milter import ADDED, MILTERTEST, miltertest

    if MILTERTEST is None:
        pytest.skip("Debian's miltertest is not installed: apt-get install miltertest")
    pytest.importorskip("Milter", reason="pymilter: pip install -e '.[milter]'")
    trained_store(store_url, sample_index)
    with milter_on_store("--store", store_url) as spec:
        message = novel_message()
        assert miltertest(spec, message, ADDED)["status"] == "ham"
        imap = host(store_url)
        assert imap.update("LEARN", message, "spam") == "new"
        started = time.monotonic()
        while miltertest(spec, message, ADDED)["status"] != "spam":
            assert time.monotonic() - started < 5, "the milter never saw the learn"
        assert time.monotonic() - started < 2.0


def test_a_scorer_on_a_store_records_verdicts_for_the_review_page(store_url, sample_index,
                                                                  scorers, tmp_path):
    """``textnb web`` reads what ``serve --record`` writes and teaches through the scorer,
    so with a scorer on the store the page's lessons go to the store."""
    from textnb.review.store import VerdictStore

    trained_store(store_url, sample_index)
    record = tmp_path / "verdicts.db"
    scorer = scorers(store_url, "recorded", "--record", str(record))
    scorer.start()
    message = novel_message()
    assert score_remote(scorer.socket, message).label == "ham"
    deadline = time.monotonic() + 30
    while True:
        rows = VerdictStore(record, readonly=True).history(None) if record.exists() else []
        if rows or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert [row.label for row in rows] == ["ham"]
    assert learn_remote(scorer.socket, message, "spam") == "spam new"
    assert counts_of(host(store_url).spam_filter)[2] == {"spam": 41, "ham": 60}


def test_users_models_in_the_store_through_two_scorers(store_url, sample_index, scorers):
    """The IMAPSieve recipe with --user: a learn for alice on one scorer makes her model
    in the store; the other scorer scores her with it, and bob with the shared model."""
    trained_store(store_url, sample_index)
    imap, mx = (scorers(store_url, name, "--store-users") for name in ("imap", "mx"))
    for scorer in (imap, mx):
        scorer.start()
    message = novel_message()
    assert learn_remote(imap.socket, message, "spam", user="alice") == "spam new"
    assert score_remote(imap.socket, message, user="alice").label == "spam"
    started = time.monotonic()
    while score_remote(mx.socket, message, user="Alice").label != "spam":
        assert time.monotonic() - started < 5, "the other scorer never found her model"
        time.sleep(0.05)
    assert score_remote(mx.socket, message, user="bob").label == "ham"
    assert score_remote(mx.socket, message).label == "ham"
    assert ping(mx.socket, user="alice")["spam"] == "41"


def test_the_milter_scores_a_recipient_with_their_own_model_in_the_store(
        store_url, sample_index, tmp_path):
    from tests.test_milter import ADDED, MILTERTEST, miltertest
    from textnb.delivery.shared_users import SharedModelSet
    from textnb.delivery.verdict_headers import score_with

    if MILTERTEST is None:
        pytest.skip("Debian's miltertest is not installed: apt-get install miltertest")
    pytest.importorskip("Milter", reason="pymilter: pip install -e '.[milter]'")
    trained_store(store_url, sample_index)
    message = novel_message()
    stop = threading.Event()
    imap = SharedModelSet(store_url, "default", tmp_path / "outbox", stop)
    imap.for_learning("b").update("LEARN", message, "spam")  # miltertest's recipient: b@
    assert score_with(imap.shared.spam_filter, message).label == "ham"
    try:
        with milter_on_store("--store", store_url, "--store-users") as spec:
            assert miltertest(spec, message, ADDED)["status"] == "spam"
    finally:
        stop.set()
        imap.close()


def test_a_store_scorers_metrics_count_its_learns_and_the_log_record_it_holds(
        store_url, sample_index, scorers):
    """``serve --store --metrics``: the scorer's counters as a file-store scorer's, and the
    store's gauges: the log record it holds (another host's learn moves it) and the learns
    waiting in its outbox."""
    import urllib.request

    def scrape(port):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            lines = reply.read().decode().splitlines()
        return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
                for line in lines if line and not line.startswith("#")}

    trained_store(store_url, sample_index)
    port = free_port()
    a = scorers(store_url, "a", "--metrics", f"127.0.0.1:{port}")
    a.start()
    before = scrape(port)
    assert before["textnb_store_outbox_waiting"] == 0
    assert before['textnb_model_messages{label="spam"}'] == 40
    assert "textnb_model_age_seconds" not in before  # a store has no file to age
    message = novel_message()
    assert learn_remote(a.socket, message, "spam") == "spam new"
    after = scrape(port)
    assert after['textnb_learn_requests_total{action="spam"}'] == 1
    assert after["textnb_store_log_record"] > before["textnb_store_log_record"]
    assert after['textnb_model_messages{label="spam"}'] == 41
    assert after["textnb_store_outbox_waiting"] == 0
    other = host(store_url)
    assert other.update("LEARN", novel_message().replace(b"garden", b"pond"), "ham") == "new"
    deadline = time.monotonic() + 5
    while scrape(port)["textnb_store_log_record"] <= after["textnb_store_log_record"]:
        assert time.monotonic() < deadline, "the scorer never followed the other host's learn"
        time.sleep(0.05)
