"""textnb milter: driven by Debian's miltertest (the MTA side, written by OpenDKIM's authors),
and under load by a small MTA-side client here; every fault accepts the message unchanged.

Milters listen on a Unix socket in tmp_path or on 127.0.0.1; every wait has a bound.
"""

import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from typer.testing import CliRunner

from textnb.cli import app
from textnb.delivery.verdict_headers import score_with, verdict_fields
from textnb.mail.sources import RawMessage, iter_index
from textnb.modelfile import store
from textnb.spamfilter import SpamFilter

from conftest import PROJECT, SAMPLE, SAMPLE_INDEX

Milter = pytest.importorskip(
    "Milter", reason="pymilter is not installed: apt-get install libmilter-dev, then "
                     "pip install 'textnb[milter]'")
from textnb.delivery.milter import (MilterPolicy, action_for, message_bytes,  # noqa: E402
                                    parse_socket)
from textnb.delivery.milter import MilterError  # noqa: E402

MILTERTEST = shutil.which("miltertest")
needs_miltertest = pytest.mark.skipif(MILTERTEST is None, reason="Debian's miltertest is not "
                                      "installed: apt-get install miltertest")
SPAM = (SAMPLE / "spam" / "001.eml").read_bytes()
HAM = (SAMPLE / "ham" / "001.eml").read_bytes()
START_SECONDS = 120  # loading spaCy on a busy 2-core machine


def split_message(raw: bytes):
    """(fields, body) as an MTA hands them to a milter: 'Name', 'value' (folds kept)."""
    raw = raw.replace(b"\r\n", b"\n")
    head, _, body = raw.partition(b"\n\n")
    fields = []
    for line in head.split(b"\n"):
        if line[:1] in (b" ", b"\t"):
            name, value = fields[-1]
            fields[-1] = (name, value + b"\n" + line)
        else:
            name, _, value = line.partition(b":")
            fields.append((name, value[1:] if value.startswith(b" ") else value))
    return fields, body


@pytest.fixture(scope="module")
def model_file(sample_model_file):
    return sample_model_file


@pytest.fixture(scope="module")
def local(model_file):
    return store.load(model_file)


def expected_fields(local, raw, spamassassin=False):
    return [(n.decode(), v.decode())
            for n, v in verdict_fields(score_with(local, raw), spamassassin)]


# -- a milter process ---------------------------------------------------------------------

INJECT = """
import sys, time, textnb.delivery.milter as m
from textnb.cli import app
kind = sys.argv[1]
def boom(*args):
    raise RuntimeError("injected fault")
def slow(*args):
    time.sleep(5)
    raise AssertionError("unreachable: the milter stopped waiting")
m.score_with = {"boom": boom, "slow": slow}[kind]
app(sys.argv[2:], prog_name="textnb")
"""


class MilterProcess:
    """`textnb milter` (or the same with a fault injected) in a child, SIGTERM on exit."""

    def __init__(self, tmp_path, model, *options, inject=None, spec=None):
        self.path = tmp_path / "milter" / "m.sock"
        self.spec = spec or f"unix:{self.path}"
        args = ["milter", "--socket", self.spec, "--model", str(model), *options]
        head = [sys.executable, "-c", INJECT, inject] if inject else [
            sys.executable, "-m", "textnb"]
        self.proc = subprocess.Popen(head + args, cwd=PROJECT, stderr=subprocess.PIPE)
        self.log = b""

    def __enter__(self):
        deadline = time.monotonic() + START_SECONDS
        while not self._listening():
            assert self.proc.poll() is None, self.proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the milter did not start"
            time.sleep(0.1)
        return self

    def _listening(self) -> bool:
        if self.spec.startswith("unix:"):
            return self.path.exists()
        port, _, host = self.spec.partition(":")[2].partition("@")
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
            return True
        except OSError:
            return False

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=15)
        self.log += self.proc.stderr.read()
        return code

    def __exit__(self, kind, *exc):
        self.stop()
        if kind is not None:  # shown with the failure
            sys.stderr.write(self.log.decode(errors="replace"))


# -- miltertest -----------------------------------------------------------------------------

def lua(data: bytes) -> str:
    """A Lua string literal holding exactly these bytes."""
    return '"' + "".join(chr(b) if 32 <= b < 127 and b not in b'"\\' else f"\\{b:03d}"
                         for b in data) + '"'


def miltertest(spec, raw, checks=()):
    """Send one message through miltertest; RETURNS its printed 'key=value' lines as a dict.

    checks: (key, Lua expression) pairs evaluated after end-of-message.
    """
    fields, body = split_message(raw)
    lines = [f'conn = mt.connect("{spec}", 20, 0.25)',
             'assert(conn, "no connection")',
             'assert(mt.negotiate(conn, nil, nil, nil) == nil)',
             # the milter skips these steps; miltertest refuses to send skipped ones
             'for _, step in ipairs({{SMFIP_NOCONNECT, mt.conninfo, "localhost", "127.0.0.1"},'
             ' {SMFIP_NOMAIL, mt.mailfrom, "<a@example.org>"},'
             ' {SMFIP_NORCPT, mt.rcptto, "<b@example.org>"}}) do',
             # (no nil argument: miltertest 1.4 dereferences it and crashes)
             '  if not mt.test_option(conn, step[1]) then'
             ' assert(step[2](conn, table.unpack(step, 3)) == nil) end',
             'end',
             'going = true']
    for name, value in fields:
        lines.append(f'if going then assert(mt.header(conn, {lua(name)}, {lua(value)}) == nil);'
                     ' going = mt.getreply(conn) == SMFIR_CONTINUE end')
    lines.append('if going and not mt.test_option(conn, SMFIP_NOEOH) then'
                 ' assert(mt.eoh(conn) == nil) end')
    for start in range(0, len(body), 60000):  # libmilter's chunk bound is 64 KiB
        lines.append(f'if going then assert(mt.bodystring(conn, {lua(body[start:start + 60000])})'
                     ' == nil); going = mt.getreply(conn) == SMFIR_CONTINUE end')
    lines += ['if going then assert(mt.eom(conn) == nil) end',
              'print("reply=" .. string.char(mt.getreply(conn)))',
              'print("eom=" .. tostring(going))']
    lines += [f'print("{key}=" .. tostring({expression}))' for key, expression in checks]
    lines.append("mt.disconnect(conn)")
    done = subprocess.run([MILTERTEST], input="\n".join(lines).encode(), capture_output=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr.decode() + done.stdout.decode()
    return dict(line.split("=", 1) for line in done.stdout.decode().splitlines() if "=" in line)


ADDED = [("status", 'mt.getheader(conn, "X-TextNB-Status", 0)'),
         ("score", 'mt.getheader(conn, "X-TextNB-Score", 0)'),
         ("flag", 'mt.getheader(conn, "X-Spam-Flag", 0)'),
         ("sa", 'mt.getheader(conn, "X-Spam-Status", 0)'),
         ("added", "mt.eom_check(conn, MT_HDRADD)"),
         ("changed", "mt.eom_check(conn, MT_HDRCHANGE)"),
         ("deleted", "mt.eom_check(conn, MT_HDRDELETE)"),
         ("inserted", "mt.eom_check(conn, MT_HDRINSERT)"),
         ("body", "mt.eom_check(conn, MT_BODYCHANGE)"),
         ("quarantine", "mt.eom_check(conn, MT_QUARANTINE)"),
         # miltertest 2.11 matches a reply only given all of code, status and text
         ("smtpreply", 'mt.eom_check(conn, MT_SMTPREPLY, "550", "5.7.1", '
                       '"Message refused as spam (textnb)")')]
UNCHANGED = {"added": "false", "changed": "false", "deleted": "false", "inserted": "false",
             "body": "false", "quarantine": "false"}


@needs_miltertest
@pytest.mark.slow
def test_miltertest_sees_filters_headers_on_spam_and_ham(tmp_path, model_file, local):
    with MilterProcess(tmp_path, model_file) as running:
        for raw, label in ((SPAM, "spam"), (HAM, "ham")):
            seen = miltertest(running.spec, raw, ADDED)
            (status, expected_status), (score, expected_score) = expected_fields(local, raw)
            assert (status, seen["status"]) == ("X-TextNB-Status", label) == (status,
                                                                              expected_status)
            assert (score, seen["score"]) == ("X-TextNB-Score", expected_score)
            assert seen["reply"] == "c" and seen["flag"] == seen["sa"] == "nil"
            assert {k: seen[k] for k in UNCHANGED} == {**UNCHANGED, "added": "true"}
    assert running.stop() == 0 or running.proc.returncode == 0
    assert b"milter stopped after 2 messages" in running.log, running.log


@needs_miltertest
@pytest.mark.slow
def test_spamassassin_headers_and_forged_fields_replaced(tmp_path, model_file, local):
    forged = b"X-TextNB-Status: ham\nX-Spam-Flag: NO\nX-Spam-Flag: NO\n" + SPAM
    with MilterProcess(tmp_path, model_file, "--spamassassin") as running:
        seen = miltertest(running.spec, forged, ADDED + [
            ("del_status", 'mt.eom_check(conn, MT_HDRDELETE, "X-TextNB-Status")'),
            ("del_flag", 'mt.eom_check(conn, MT_HDRDELETE, "X-Spam-Flag")')])
        ham = miltertest(running.spec, HAM, ADDED)
    expected = dict(expected_fields(local, SPAM, spamassassin=True))
    assert seen["flag"] == expected["X-Spam-Flag"] == "YES"
    assert seen["sa"] == expected["X-Spam-Status"] and seen["sa"].startswith("Yes, score=")
    assert seen["del_status"] == seen["del_flag"] == "true"
    assert ham["flag"] == "nil" and ham["sa"].startswith("No, score=")


@needs_miltertest
@pytest.mark.slow
def test_reject_and_quarantine_above_a_certainty(tmp_path, model_file, local):
    assert score_with(local, SPAM).p_spam > 0.9 and score_with(local, HAM).label == "ham"
    with MilterProcess(tmp_path, model_file, "--reject-above", "0.9") as running:
        rejected = miltertest(running.spec, SPAM, ADDED)
        kept = miltertest(running.spec, HAM, ADDED)
    assert rejected["reply"] == "y" and rejected["smtpreply"] == "true"  # REJECT with a text
    assert rejected["added"] == "false"
    assert kept["reply"] == "c" and kept["status"] == "ham"
    with MilterProcess(tmp_path, model_file, "--quarantine-above", "0.9") as running:
        held = miltertest(running.spec, SPAM, ADDED)
    assert held["quarantine"] == "true" and held["status"] == "spam"


# -- faults: the message goes through unchanged --------------------------------------------

@needs_miltertest
@pytest.mark.slow
@pytest.mark.parametrize("inject,options,reply", [
    ("boom", (), "a"),
    ("boom", ("--on-error", "tempfail"), "t"),
    ("slow", ("--timeout", "0.5"), "a"),
])
def test_a_fault_in_scoring_accepts_the_message_unchanged(tmp_path, model_file, inject,
                                                          options, reply):
    with MilterProcess(tmp_path, model_file, *options, inject=inject) as running:
        started = time.monotonic()
        seen = miltertest(running.spec, SPAM, ADDED)
        took = time.monotonic() - started
    assert seen["reply"] == reply
    assert {k: seen[k] for k in UNCHANGED} == UNCHANGED
    assert took < 4.5  # the slow scorer sleeps 5 s; the milter stopped waiting at 0.5
    fault = b"injected fault" if inject == "boom" else b"no verdict within 0.5 s (--timeout)"
    assert fault in running.log, running.log


@needs_miltertest
@pytest.mark.slow
def test_an_oversized_message_is_accepted_unscored(tmp_path, model_file):
    big = SPAM + b"spam words again\n" * 20_000  # 340 kB, over 6 body chunks
    with MilterProcess(tmp_path, model_file, "--max-bytes", "100000") as running:
        seen = miltertest(running.spec, big, ADDED)
        normal = miltertest(running.spec, SPAM, ADDED)
    assert seen["reply"] == "a" and seen["eom"] == "false"  # accepted mid-body
    assert normal["status"] == "spam"
    assert b"over 100000 bytes (--max-bytes) accepted unscored" in running.log


@needs_miltertest
@pytest.mark.slow
def test_reloads_a_new_model_and_keeps_the_old_one_when_damaged(tmp_path, model_file):
    path = tmp_path / "model.tnb"
    path.write_bytes(model_file.read_bytes())
    swapped = swapped_filter()
    with MilterProcess(tmp_path, path, "--reload-interval", "0.1") as running:
        assert miltertest(running.spec, SPAM, ADDED)["status"] == "spam"
        damaged = tmp_path / "damaged"
        damaged.write_bytes(b"not a model")
        damaged.replace(path)
        time.sleep(1.0)
        assert miltertest(running.spec, SPAM, ADDED)["status"] == "spam"  # the old model
        store.save(swapped, path)
        deadline = time.monotonic() + 60
        while miltertest(running.spec, SPAM, ADDED)["status"] != "ham":
            assert time.monotonic() < deadline, "the retrained model was not loaded"
            time.sleep(0.2)
    assert b"cannot be loaded" in running.log and b"reloaded model" in running.log


# -- the command line -----------------------------------------------------------------------

def test_socket_forms():
    assert parse_socket("inet:8891@127.0.0.1") == ("inet:8891@127.0.0.1", None)
    assert parse_socket("inet:8891@localhost") == ("inet:8891@localhost", None)
    spec, path = parse_socket("unix:/run/textnb/m.sock")
    assert spec == "unix:/run/textnb/m.sock" and str(path) == "/run/textnb/m.sock"
    assert parse_socket("inet:25@192.0.2.1", allow_remote=True)[0] == "inet:25@192.0.2.1"
    for bad, says in (("8891", "is not a milter socket"), ("inet:x@127.0.0.1", "inet:PORT@HOST"),
                      ("inet:70000@127.0.0.1", "inet:PORT@HOST"), ("inet:8891", "names no host"),
                      ("inet:25@192.0.2.1", "not a loopback address")):
        with pytest.raises(MilterError, match=says):
            parse_socket(bad)


@pytest.mark.parametrize("args,code,says", [
    (["--socket", "inet:8891"], 1, "names no host"),
    (["--socket", "inet:8891@127.0.0.1", "--reject-above", "1.5"], 2, "between 0 and 1"),
    (["--socket", "inet:8891@127.0.0.1", "--on-error", "drop"], 2, "accept or tempfail"),
    (["--socket", "inet:8891@127.0.0.1", "--model", "/nonexistent/m.tnb"], 1, "m.tnb"),
])
def test_bad_settings_fail_in_one_line(args, code, says):
    result = CliRunner().invoke(app, ["milter", *args])
    assert result.exit_code == code, result.output
    assert says in result.output


def test_actions_follow_the_log_odds_only_for_spam():
    from textnb.delivery.verdict_headers import Verdict

    policy = MilterPolicy(reject_above=0.999, quarantine_above=0.9)
    assert action_for(Verdict("spam", 7.0, 0.9991, 0.0), policy) == "reject"  # ln 999 = 6.9
    assert action_for(Verdict("spam", 6.8, 0.9989, 0.0), policy) == "quarantine"
    assert action_for(Verdict("spam", 2.0, 0.88, 0.0), policy) is None
    assert action_for(Verdict("unsure", 40.0, 1.0, 50.0), policy) is None
    # P(spam) rounds to 1.0 from log-odds 37; the log-odds still order the messages
    assert action_for(Verdict("spam", 60.0, 1.0, 0.0), MilterPolicy(reject_above=1 - 1e-15)) \
        == "reject"


def test_the_milter_scores_the_bytes_delivery_would_store():
    for path in sorted((SAMPLE / "spam").iterdir())[:10] + sorted((SAMPLE / "ham").iterdir())[:10]:
        raw = path.read_bytes().replace(b"\r\n", b"\n")  # as Postfix stores it
        fields, body = split_message(raw)
        assert message_bytes(fields, body) == raw
        crlf = [(n, v.replace(b"\n", b"\r\n")) for n, v in fields]
        assert message_bytes(crlf, body.replace(b"\n", b"\r\n")) == raw  # SMTP's line ends


# -- an MTA-side client of the milter protocol, for load and shutdown --------------------------

ACTIONS = 0x01 | 0x10 | 0x20  # SMFIF_ADDHDRS | SMFIF_CHGHDRS | SMFIF_QUARANTINE
FINAL = set(b"acdrt")  # accept, continue, discard, reject, tempfail


class MtaSession:
    """The MTA's side of one milter connection; offers no protocol options (an MTA of
    milter version 2), so every step gets exactly one reply."""

    def __init__(self, spec, timeout=60.0):
        port, _, host = spec.partition(":")[2].partition("@")
        if spec.startswith("unix:"):
            self.sock = socket.socket(socket.AF_UNIX)
            self.sock.settimeout(timeout)
            self.sock.connect(spec[5:])
        else:
            self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.send(b"O", struct.pack(">III", 6, ACTIONS, 0))
        command, data = self.read()
        assert command == ord("O"), (command, data)

    def send(self, command: bytes, data: bytes = b"") -> None:
        self.sock.sendall(struct.pack(">I", len(data) + 1) + command + data)

    def read(self):
        head = self._exactly(5)
        (length,) = struct.unpack(">I", head[:4])
        return head[4], self._exactly(length - 1)

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the milter closed the connection")
            data += chunk
        return data

    def step(self, command: bytes, data: bytes = b""):
        """Send one step; RETURNS (final reply, the modifications before it)."""
        self.send(command, data)
        changes = []
        while True:
            reply, payload = self.read()
            if reply in FINAL:
                return chr(reply), changes
            if reply != ord("p"):  # progress
                changes.append((chr(reply), payload))

    def connect_and_envelope(self, recipients=(b"<b@example.org>",)):
        assert self.step(b"C", b"localhost\0" + b"4" + struct.pack(">H", 25) + b"127.0.0.1\0")[0] \
            == "c"
        assert self.step(b"M", b"<a@example.org>\0")[0] == "c"
        for recipient in recipients:
            assert self.step(b"R", recipient + b"\0")[0] == "c"

    def headers(self, fields):
        for name, value in fields:
            assert self.step(b"L", name + b"\0" + value + b"\0")[0] == "c"
        assert self.step(b"N")[0] == "c"

    def body_and_end(self, body: bytes, queue_id: bytes = b"QID"):
        for start in range(0, len(body), 60000):
            assert self.step(b"B", body[start:start + 60000])[0] == "c"
        self.send(b"D", b"E" + b"i\0" + queue_id + b"\0")  # macros: no reply
        return self.step(b"E")

    def message(self, raw: bytes, queue_id: bytes = b"QID", recipients=(b"<b@example.org>",)):
        fields, body = split_message(raw)
        self.connect_and_envelope(recipients)
        self.headers(fields)
        return self.body_and_end(body, queue_id)

    def close(self):
        try:
            self.send(b"Q")
        finally:
            self.sock.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_200_concurrent_sessions_all_answered_none_altered(tmp_path, model_file, local):
    messages = [m.raw for m in iter_index(SAMPLE_INDEX)]
    expected = [[("h", n + b"\0" + v + b"\0") for n, v in verdict_fields(score_with(local, raw))]
                for raw in messages]
    spec = f"inet:{free_port()}@127.0.0.1"
    n = 200

    def one(i):
        session = MtaSession(spec)
        try:
            return session.message(messages[i % len(messages)], b"Q%d" % i)
        finally:
            session.close()

    with MilterProcess(tmp_path, model_file, spec=spec) as running:
        started = time.monotonic()
        with ThreadPoolExecutor(n) as pool:
            results = list(pool.map(one, range(n), timeout=120))
        took = time.monotonic() - started
    assert [reply for reply, _ in results] == ["c"] * n
    assert [changes for _, changes in results] == [expected[i % len(messages)] for i in range(n)]
    assert b"milter stopped after 200 messages" in running.log
    print(f"200 concurrent sessions answered in {took:.1f} s")


@pytest.mark.slow
def test_sigterm_lets_the_session_in_flight_finish(tmp_path, model_file, local):
    fields, body = split_message(SPAM)
    with MilterProcess(tmp_path, model_file) as running:
        session = MtaSession(running.spec)
        session.connect_and_envelope()
        session.headers(fields)
        running.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        reply, changes = session.body_and_end(body)
        session.close()
        assert running.stop() == 0
    assert reply == "c"
    assert [c for c, _ in changes] == ["h", "h"]
    assert b"milter stopped after 1 messages" in running.log
    assert not running.path.exists()


def test_concurrent_callers_get_the_verdicts_of_one(model_file):
    """MilterScorer scores on one worker thread, whatever thread calls it."""
    from textnb.delivery.milter import MilterScorer
    from textnb.delivery.server import ResidentModel

    scorer = MilterScorer(ResidentModel(model_file), MilterPolicy(timeout=60))
    try:
        messages = [m.raw for m in iter_index(SAMPLE_INDEX)][:40]
        alone = [scorer.score(raw) for raw in messages]
        with ThreadPoolExecutor(8) as pool:
            assert list(pool.map(scorer.score, messages)) == alone
        assert scorer.messages == 80
    finally:
        scorer.close()


def swapped_filter():
    """The sample model trained with the labels swapped: its verdicts flip."""
    return SpamFilter().fit(RawMessage(m.source, m.raw, {"spam": "ham", "ham": "spam"}[m.label])
                            for m in iter_index(SAMPLE_INDEX))


def user_models(tmp_path, model_file):
    """A --models folder: the sample model as _shared, the swapped one as alice's.
    RETURNS (folder, alice's filter)."""
    folder = tmp_path / "models"
    (folder / "_shared").mkdir(parents=True)
    (folder / "_shared" / "model.tnb").write_bytes(model_file.read_bytes())
    (folder / "alice").mkdir()
    swapped = swapped_filter()
    store.save(swapped, folder / "alice" / "model.tnb")
    return folder, swapped


def scrape(port: int) -> dict[str, float]:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return {name: float(value) for name, value in
            (line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))}


@pytest.mark.slow
def test_the_recipient_chooses_the_users_model_and_the_metrics_count_it(tmp_path, model_file,
                                                                       local):
    folder, swapped = user_models(tmp_path, model_file)
    spec, metrics = f"inet:{free_port()}@127.0.0.1", free_port()
    shared_fields = [("h", n + b"\0" + v + b"\0")
                     for n, v in verdict_fields(score_with(local, SPAM))]
    alice_fields = [("h", n + b"\0" + v + b"\0")
                    for n, v in verdict_fields(score_with(swapped, SPAM))]
    cases = [([b"<alice@example.org>"], alice_fields),
             ([b"<Alice+junk@Example.ORG>", b"<alice@other.example>"], alice_fields),
             ([b"<bob@example.org>"], shared_fields),  # no model of his own
             ([b"<alice@example.org>", b"<bob@example.org>"], shared_fields),  # two users
             ([b"<../x@example.org>"], shared_fields)]  # not a user name
    assert alice_fields != shared_fields
    with MilterProcess(tmp_path, folder / "_shared" / "model.tnb", "--models", str(folder),
                       "--metrics", f"127.0.0.1:{metrics}", spec=spec) as running:
        for i, (recipients, expected) in enumerate(cases):
            session = MtaSession(spec)
            try:
                reply, changes = session.message(SPAM, b"Q%d" % i, recipients)
            finally:
                session.close()
            assert (reply, changes) == ("c", expected), recipients
        seen = scrape(metrics)
    assert seen['textnb_requests_total{kind="message"}'] == len(cases)
    assert seen['textnb_verdicts_total{label="spam"}'] == 3
    assert seen['textnb_verdicts_total{label="ham"}'] == 2
    assert seen['textnb_request_seconds_count{kind="message"}'] == len(cases)
    assert seen['textnb_model_reloads_total'] == 0
    assert seen['textnb_user_models'] == 1
    assert b"user=alice" in running.log
