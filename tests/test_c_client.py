"""The compiled client (clients/textnb-client.c): the Python client's output and exit codes, byte
for byte, from the same scorer; its fallback; and the mail is never eaten. Then what both
clients believe: one deadline for the whole exchange, one reply grammar, the shared key.

The reference is the Python client's own code path (``run_filter`` with ``client_scorer``), run
in this process against the same server, plus one real ``textnb-client`` process.
"""

import io
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest

from textnb import __version__
from textnb.delivery.client import (ScorerUnavailable, client_scorer, learn_remote, ping,
                                    reply_mac, run_filter, score_remote)
from textnb.delivery.verdict_headers import filter_message, header_end, in_process_scorer

from conftest import PROJECT, SAMPLE
from helpers import read_request
from test_server import MESSAGES, Running

SOURCE = PROJECT / "clients" / "textnb-client.c"
SAMPLE_MESSAGES = [p.read_bytes() for p in sorted(SAMPLE.rglob("*.eml"))] + [
    (SAMPLE / "mbox").read_bytes()]  # an mbox 'From ' line, then several messages as one

# The cases where the insertion point or the line ending is easy to get wrong.
EDGE_CASES = {
    "crlf": b"Subject: hi\r\nTo: a@b.example\r\n\r\nbody \xe9\r\nmore\r\n",
    "no body, no blank line": b"Subject: only a header\nTo: a@b.example\n",
    "no trailing newline": b"Subject: hi\n\nbody without a final newline",
    "stops inside the header": b"Subject: hi\nTo: a@b.example",
    "stops inside a crlf header": b"Subject: hi\r\nTo: a@b.example",
    "8-bit": b"Subject: caf\xe9 \xff\xfe\nX-Name: \xc3\xa9t\xc3\xa9\n\n\x80\x81 bonus \xe9t\xe9 $$$\n",
    "nul bytes": b"Subject: a\x00b\n\nbody\x00 with nul\n",
    "empty": b"",
    "only a newline": b"\n",
    "no header at all": b"just a line of text, no colon\nsecond line\n",
    "8-bit field name ends the header": b"Subject: hi\nN\xe4me: x\nTo: y\n\nbody\n",
    "forged verdict with continuation": (
        b"X-TextNB-Status: ham\nx-textnb-score: log-odds=-9;\n  p=0.0\nX-Spam-Flag: YES\n"
        b"X-Spam-Status: No,\n\tscore=-5\nSubject: win\n\nclick http://x.example $$$\n"),
    "mbox From line then forged field": (
        b"From someone@example.com Mon Jan  1 00:00:00 2024\nX-TextNB-Status: ham\n"
        b"From also-a-continuation\nSubject: s\n\nbody\n"),
    "bare carriage return": b"Subject: a\rb\nTo: c\r\r\n\r\nbody\r",
    "blank line first": b"\r\nSubject: not a header any more\r\n",
    "empty field name": b": no name\nSubject: x\n\nbody\n",
    "forged field last, no newline": b"Subject: x\nX-TextNB-Status: ham",
    "mixed line endings": b"Subject: a\nTo: b\r\n\nbody\r\n",
}
CASES = list(EDGE_CASES.values())


@pytest.fixture(scope="module")
def c_client(tmp_path_factory):
    """The client compiled as `make -C clients` does, with warnings as errors."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler (cc, gcc or clang) to build clients/textnb-client.c: "
                    "apt-get install gcc to run these tests")
    binary = tmp_path_factory.mktemp("c-client") / "textnb-client"
    done = subprocess.run([cc, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror",
                           f'-DTEXTNB_VERSION="{__version__}"', "-o", str(binary), str(SOURCE)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{cc} failed:\n{done.stderr}"
    return binary


@pytest.fixture(scope="module")
def fallback_textnb(tmp_path_factory):
    """A `textnb` command for the fallback: this checkout's CLI under this interpreter."""
    script = tmp_path_factory.mktemp("bin") / "textnb"
    script.write_text(f'#!/bin/sh\nPYTHONPATH="{PROJECT}" exec "{sys.executable}" -m textnb "$@"\n')
    script.chmod(0o755)
    return script


@pytest.fixture(scope="module")
def model(sample_model_file):
    return sample_model_file


@pytest.fixture(scope="module")
def scorer(tmp_path_factory, model):
    sock = tmp_path_factory.mktemp("scorer") / "s.sock"
    with Running(model, str(sock), timeout=10.0) as running:
        yield running


def run_c(binary, raw, *args, env=None, timeout=120):
    """(exit code, stdout, stderr) of the compiled client on one message."""
    env = {**os.environ, **(env or {})}
    done = subprocess.run([str(binary), *map(str, args)], input=raw, capture_output=True,
                          env=env, timeout=timeout)
    return done.returncode, done.stdout, done.stderr.decode("utf-8", "replace")


def run_python(raw, address, spamassassin=False, always_exit_0=False, cost_ratio=None,
               key=None, insecure_tcp=False):
    """(exit code, stdout) of the Python client's code path, without the fallback."""
    stdout, stderr = io.BytesIO(), io.StringIO()
    score = client_scorer(address, None, cost_ratio, fallback=False, key=key,
                          insecure_tcp=insecure_tcp)
    code = run_filter(io.BytesIO(raw), stdout, stderr, score, spamassassin, always_exit_0)
    assert stderr.getvalue() == ""
    return code, stdout.getvalue()


# -- the same bytes and exit codes as the Python client -------------------------------------


@pytest.mark.parametrize("spamassassin", [False, True])
def test_sample_corpus_byte_for_byte(c_client, scorer, spamassassin):
    flags = ["--spamassassin"] if spamassassin else []
    codes = set()
    for raw in SAMPLE_MESSAGES:
        code, out, err = run_c(c_client, raw, "--server", scorer.address, "--no-fallback", *flags)
        assert (code, out) == run_python(raw, scorer.address, spamassassin), raw[:200]
        assert err == ""
        codes.add(code)
    assert codes == {0, 1}  # both verdicts met: the exit codes were compared, not just 0s


@pytest.mark.parametrize("name", list(EDGE_CASES))
def test_edge_cases_byte_for_byte(c_client, scorer, name):
    raw = EDGE_CASES[name]
    for flags in ([], ["--spamassassin"]):
        code, out, err = run_c(c_client, raw, "--server", scorer.address, "--no-fallback", *flags)
        assert (code, out) == run_python(raw, scorer.address, bool(flags)), name
        assert err == ""


def test_cost_ratio_and_always_exit_0(c_client, scorer):
    for raw in MESSAGES[:3] + CASES[:2]:
        for ratio in (1e-300, 0.5, 9, 1e300):
            code, out, _ = run_c(c_client, raw, "--server", scorer.address, "--spamassassin",
                                 "--cost-ratio", ratio)
            assert (code, out) == run_python(raw, scorer.address, True, cost_ratio=ratio)
        code, out, _ = run_c(c_client, raw, "--server", scorer.address, "--always-exit-0")
        assert (code, out) == run_python(raw, scorer.address, always_exit_0=True) and code == 0
    # An extreme ratio moves the threshold, so the verdicts differ: the ratio was sent.
    labels = {run_c(c_client, MESSAGES[0], f"--server={scorer.address}", "--cost-ratio", r)[0]
              for r in (1e-300, 1e300)}
    assert labels == {0, 1}


def test_same_as_a_real_python_client_process(c_client, scorer):
    for raw in (MESSAGES[0], EDGE_CASES["crlf"]):
        args = ["--server", scorer.address, "--spamassassin", "--no-fallback"]
        python = subprocess.run([sys.executable, "-m", "textnb.delivery.client", *args], input=raw,
                                capture_output=True, cwd=PROJECT, timeout=120)
        assert run_c(c_client, raw, *args)[:2] == (python.returncode, python.stdout)


def test_loopback_tcp_and_ping(c_client, model):
    with Running(model, ("127.0.0.1", 0)) as running:
        host, port = running.address
        for spec in (f"{host}:{port}", f":{port}"):
            code, out, _ = run_c(c_client, MESSAGES[1], "--server", spec, "--no-fallback",
                                 "--insecure-tcp")
            assert (code, out) == run_python(MESSAGES[1], running.address, insecure_tcp=True)
        code, out, _ = run_c(c_client, b"", "--server", f":{port}", "--ping", "--insecure-tcp")
        expected = " ".join(f"{k}={v}" for k, v in ping(running.address).items())
        # requests counts the scoring above; nothing scored in between
        assert (code, out.decode()) == (0, expected + "\n")


def test_ping_a_scorer_that_is_down(c_client, tmp_path):
    code, out, err = run_c(c_client, b"", "--server", tmp_path / "none.sock", "--ping")
    assert (code, out) == (1, b"") and "none.sock: No such file or directory" in err


# -- replies only a stand-in scorer gives -------------------------------------------------------


class StandIn:
    """A Unix socket that reads each request whole, records it and answers ``reply``."""

    def __init__(self, path, reply: bytes):
        self.path, self.reply, self.requests = str(path), reply, []
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(self.path)
        self.listener.listen(8)
        self.listener.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=15)
        self.listener.close()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(10)
                line, body = read_request(conn)
                self.requests.append((line, len(body)))
                conn.sendall(self.reply)


# Replies no scorer writes: both clients take none of them for a verdict (the reply grammar
# in textnb/delivery/client.py's docstring).
HOSTILE_REPLIES = {
    "5,000-digit log-odds": b"TEXTNB/1 OK spam " + b"9" * 5000 + b" 1.0 0.0\n",
    "40-digit log-odds": b"TEXTNB/1 OK spam " + b"9" * 40 + b" 1.0 0.0\n",
    "log-odds past a double": b"TEXTNB/1 OK ham -1e400 0.0 0.0\n",
    "inf": b"TEXTNB/1 OK spam inf 1.0 -inf\n",
    "nan": b"TEXTNB/1 OK ham -0.5 0.1 nan\n",
    "-nan": b"TEXTNB/1 OK ham -0.5 0.1 -nan\n",
    "hex": b"TEXTNB/1 OK ham -0x1p3 0.1 0.0\n",
    "underscores": b"TEXTNB/1 OK ham -1_000 0.1 0.0\n",
    "plus sign": b"TEXTNB/1 OK ham +1.5 0.1 0.0\n",
    "bare fraction": b"TEXTNB/1 OK ham -.5 0.1 0.0\n",
    "bare point": b"TEXTNB/1 OK ham -5. 0.1 0.0\n",
    "capital E": b"TEXTNB/1 OK ham -1E5 0.1 0.0\n",
    "P above 1": b"TEXTNB/1 OK spam 3.5 1.5 0.0\n",
    "P below 0": b"TEXTNB/1 OK ham -3.5 -0.1 0.0\n",
    "no line end": b"TEXTNB/1 OK ham -3.5 0.03 0.0",
    "line end past 1024 bytes": b"TEXTNB/1 OK ham -3.5 0.03 0.0" + b" " * 1000 + b"\n",
    "crlf": b"TEXTNB/1 OK ham -3.5 0.03 0.0\r\n",
    "tab": b"TEXTNB/1 OK ham\t-3.5 0.03 0.0\n",
    "two spaces": b"TEXTNB/1 OK ham  -3.5 0.03 0.0\n",
    "trailing space": b"TEXTNB/1 OK ham -3.5 0.03 0.0 \n",
    "nul": b"TEXTNB/1 OK ham -3.5 0.03 0.0\x00\n",
    "escape in error": b"TEXTNB/1 ERROR \x1b[2Jbusy\n",
    "a mac nobody asked for": b"TEXTNB/1 OK ham -3.5 0.03 0.0 mac=" + b"0" * 64 + b"\n",
    "threshold Infinity": b"TEXTNB/1 OK ham -3.5 0.03 Infinity\n",
    "threshold +inf": b"TEXTNB/1 OK ham -3.5 0.03 +inf\n",
    "threshold INF": b"TEXTNB/1 OK ham -3.5 0.03 INF\n",
}


@pytest.mark.parametrize("reply, exit_code", [
    (b"TEXTNB/1 OK unsure 0.25 0.5 0.0\n", 2),
    (b"TEXTNB/1 OK spam 1e300 1.0 -1e-300\n", 0),
    (b"TEXTNB/1 OK ham -0.0004 1e-300 -0.0\n", 1),  # -0.000 as Python writes it
    (b"TEXTNB/1 OK spam 2.0005 0.0000005 -0.25\n", 0),  # halfway cases round as in Python
    (b"TEXTNB/1 OK ham 1.7976931348623157e+308 0.1 -1e308\n", 1),
    # a tuned model flags nothing at this λ (its map never reaches λ / (1 + λ)) ...
    (b"TEXTNB/1 OK ham 35.5 0.9975 inf\n", 1),
    # ... or everything (its map starts above it)
    (b"TEXTNB/1 OK spam -40.0 0.5 -inf\n", 0),
    (b"TEXTNB/1   OK  ham -1 0 0 \r\n", 3),  # not OK: the kind is the empty word
    (b"TEXTNB/1 OK maybe 1 2 3\n", 3),
    (b"TEXTNB/1 OK ham 1 2\n", 3),
    (b"TEXTNB/1 OK ham one 2 3\n", 3),
    (b"TEXTNB/1 ERROR the scorer is busy\n", 3),
    (b"HTTP/1.0 200 OK\n", 3),
    (b"", 3),  # hung up without a word
    *[(reply, 3) for reply in HOSTILE_REPLIES.values()],
])
def test_every_reply_is_read_as_the_python_client_reads_it(c_client, tmp_path, reply, exit_code):
    raw = EDGE_CASES["forged verdict with continuation"]
    with StandIn(tmp_path / "s.sock", reply) as scorer:
        for flags in ([], ["--spamassassin"]):
            code, out, _ = run_c(c_client, raw, "--server", scorer.path, "--no-fallback", *flags)
            stdout, stderr = io.BytesIO(), io.StringIO()
            expected = run_filter(io.BytesIO(raw), stdout, stderr,
                                  client_scorer(scorer.path, fallback=False), bool(flags))
            assert (code, out) == (expected, stdout.getvalue()) and code == exit_code


def test_the_request_carries_what_the_parser_would_keep_and_the_ratio(c_client, tmp_path):
    big = b"Subject: big\n\n" + b"x" * 10_000_100
    with StandIn(tmp_path / "s.sock", b"TEXTNB/1 OK ham -3.5 0.03 0.0\n") as scorer:
        code, out, _ = run_c(c_client, big, "--server", scorer.path, "--cost-ratio", " 9 ")
        assert code == 1 and out.endswith(b"x" * 10_000_100)
        ((line, length),) = scorer.requests
    # MAX_MESSAGE_BYTES as in textnb.delivery.client;
    # the ratio as any float the server reads as 9.0.
    words = line.split()
    assert words[:3] == [b"TEXTNB/1", b"SCORE", b"10000001"] and length == 10_000_001
    assert float(words[3]) == 9.0


# -- when the scorer cannot answer -------------------------------------------------------------


def test_fallback_when_the_scorer_is_down_equals_textnb_filter(c_client, fallback_textnb, model,
                                                              tmp_path):
    local = in_process_scorer(model)
    env = {"TEXTNB_COMMAND": str(fallback_textnb)}
    for raw, flags in ((MESSAGES[0], ["--spamassassin"]), (EDGE_CASES["crlf"], [])):
        code, out, err = run_c(c_client, raw, "--server", tmp_path / "nobody.sock", "--model",
                               model, *flags, env=env)
        expected = filter_message(raw, local, bool(flags))
        assert (code, out) == ({"spam": 0, "ham": 1}[expected.verdict.label], expected.output)
        assert "resident scorer unavailable" in err and "nobody.sock" in err


def test_oversize_message_is_refused_then_scored_in_process(c_client, fallback_textnb, model,
                                                            tmp_path):
    big = b"Subject: big\n\n" + b"spam " * 400
    env = {"TEXTNB_COMMAND": str(fallback_textnb)}
    with Running(model, str(tmp_path / "s.sock"), max_bytes=1000) as running:
        code, out, err = run_c(c_client, big, "--server", running.address, "--model", model,
                               env=env)
        expected = filter_message(big, in_process_scorer(model))
        assert (code, out) == ({"spam": 0, "ham": 1}[expected.verdict.label], expected.output)
        assert "exceeds the scorer's limit of 1000" in err
        code, out, err = run_c(c_client, big, "--server", running.address, "--no-fallback")
        assert (code, out) == (3, big) and "passed through unchanged" in err
        assert ping(running.address)["requests"] == "0"


def test_no_fallback_passes_the_message_through(c_client, tmp_path):
    for raw in (MESSAGES[0], b""):
        for flags, exit_code in (([], 3), (["--always-exit-0"], 0)):
            code, out, err = run_c(c_client, raw, "--server", tmp_path / "nobody.sock",
                                   "--no-fallback", *flags)
            assert (code, out) == (exit_code, raw) and "passed through unchanged" in err


def test_a_scorer_that_never_answers_times_out(c_client, tmp_path):
    mute = socket.socket(socket.AF_UNIX)
    mute.bind(str(tmp_path / "mute.sock"))
    mute.listen(4)  # connections queue in the backlog, nobody answers
    try:
        start = time.monotonic()
        code, out, err = run_c(c_client, MESSAGES[0], "--server", tmp_path / "mute.sock",
                               "--timeout", "0.3", "--no-fallback")
        assert time.monotonic() - start < 5
    finally:
        mute.close()
    assert (code, out) == (3, MESSAGES[0]) and "timed out" in err


@pytest.mark.parametrize("fake", [
    "exit 1",  # a Python that dies on import: exit 1 ("ham") and nothing written
    "cat >/dev/null; printf 'X-TextNB-Status: spam\\n\\ncut short'; exit 0",
    "cat; exit 2",  # the message unchanged, but no verdict header
    "kill -9 $$",
])
def test_a_failed_fallback_still_delivers_the_message(c_client, tmp_path, fake):
    command = tmp_path / "textnb"
    command.write_text(f"#!/bin/sh\n{fake}\n")
    command.chmod(0o755)
    for raw in (MESSAGES[0], EDGE_CASES["no body, no blank line"]):
        code, out, err = run_c(c_client, raw, "--server", tmp_path / "nobody.sock",
                               env={"TEXTNB_COMMAND": str(command)})
        assert (code, out) == (3, raw) and "passed through unchanged" in err, err


def test_a_missing_fallback_command_still_delivers(c_client, tmp_path):
    code, out, err = run_c(c_client, MESSAGES[0], "--server", tmp_path / "nobody.sock",
                           "--always-exit-0", env={"TEXTNB_COMMAND": str(tmp_path / "nope")})
    assert (code, out) == (0, MESSAGES[0])
    assert "cannot run" in err and "exit 127" in err


@pytest.mark.parametrize("args, says", [
    (["--bogus"], "unknown option '--bogus'"),
    (["--cost-ratio", "-1"], "--cost-ratio '-1' must be a number > 0"),
    (["--timeout=0x10"], "--timeout '0x10' must be a number > 0"),
    (["--server"], "--server needs a value"),
])
def test_a_bad_option_passes_the_message_through(c_client, args, says):
    code, out, err = run_c(c_client, MESSAGES[0], *args)
    assert (code, out) == (3, MESSAGES[0])
    assert f"textnb-client: error: {says}" in err and "usage: textnb-client" in err


def test_help(c_client):
    code, out, _ = run_c(c_client, b"", "--help")
    assert code == 0 and b"--always-exit-0" in out and b"TEXTNB_COMMAND" in out


def test_makefile_builds_the_client(tmp_path):
    make = shutil.which("make")
    if make is None or shutil.which("cc") is None:
        pytest.skip("no make or cc: apt-get install make gcc to check `make -C clients`")
    (tmp_path / "clients").mkdir()
    (tmp_path / "textnb").mkdir()
    for name in ("Makefile", "textnb-client.c"):
        shutil.copy(PROJECT / "clients" / name, tmp_path / "clients" / name)
    shutil.copy(PROJECT / "textnb" / "__init__.py", tmp_path / "textnb" / "__init__.py")
    done = subprocess.run([make, "-C", str(tmp_path / "clients"), "CFLAGS=-O2 -Wall -Wextra -Werror",
                           "TEXTNB=/opt/textnb/bin/textnb"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    usage = subprocess.run([str(tmp_path / "clients" / "textnb-client"), "--help"],
                           capture_output=True, text=True, timeout=30).stdout
    assert f"textnb {__version__}" in usage and "/opt/textnb/bin/textnb" in usage


# -- the SpamAssassin corpus ---------------------------------------------------------------


@pytest.mark.corpus
@pytest.mark.slow
def test_spamassassin_pass_through(c_client, scorer, shared_corpora):
    """Every 20th of the 6,047 messages (302; 8-bit ones among them), as stored and as CRLF:
    the Python client's bytes, and every byte of the body unchanged at the end."""
    from textnb.mail.corpora import iter_corpus

    sample = list(iter_corpus("spamassassin", shared_corpora))[::20]
    for i, example in enumerate(sample):
        raw = example.raw
        if i % 3 == 0:
            raw = raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        code, out, _ = run_c(c_client, raw, "--server", scorer.address, "--no-fallback",
                             "--spamassassin")
        assert (code, out) == run_python(raw, scorer.address, True), example.relpath
        body = raw[header_end(raw)[0]:]
        assert out.endswith(body), example.relpath
    assert len(sample) == 303 and sum(not e.raw.isascii() for e in sample) > 10


# -- the exchange's deadline, the reply grammar, the shared key ------------------------------


class Answering:
    """A Unix socket or a loopback TCP port that reads each request whole and answers
    ``answer(request line)``, a byte every ``drip`` seconds if asked; each connection on a
    thread of its own. ``lines`` holds the request lines."""

    def __init__(self, address, answer, drip: float = 0.0):
        self.answer = answer if callable(answer) else (lambda line: answer)
        self.drip, self.lines = drip, []
        if isinstance(address, tuple):
            self.listener = socket.socket(socket.AF_INET)
            self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.listener.bind(address)
            self.address = self.listener.getsockname()[:2]
            self.spec = f"{self.address[0]}:{self.address[1]}"
        else:
            self.listener = socket.socket(socket.AF_UNIX)
            self.listener.bind(str(address))
            self.address = self.spec = str(address)
        self.listener.listen(8)
        self.listener.settimeout(0.2)
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._serve)]

    def __enter__(self):
        self.threads[0].start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for thread in list(self.threads):
            thread.join(timeout=15)
        self.listener.close()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            thread = threading.Thread(target=self._one, args=(conn,))
            self.threads.append(thread)
            thread.start()

    def _one(self, conn):
        with conn:
            conn.settimeout(10)
            try:
                line, _ = read_request(conn)
                self.lines.append(line)
                reply = self.answer(line)
                if not self.drip:
                    conn.sendall(reply)
                for i in range(len(reply) if self.drip else 0):
                    if self.stop.wait(self.drip):
                        return
                    conn.sendall(reply[i:i + 1])
            except OSError:
                pass  # the client gave up: what a dripping scorer is for


def python_client(raw, *args, env=None):
    """(exit code, stdout, stderr) of a real Python textnb-client process."""
    done = subprocess.run([sys.executable, "-m", "textnb.delivery.client", *map(str, args)],
                          input=raw, capture_output=True, cwd=PROJECT, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(PROJECT), **(env or {})})
    return done.returncode, done.stdout, done.stderr.decode("utf-8", "replace")


def test_j8_timeout_is_a_deadline_for_the_whole_reply(c_client, tmp_path):
    """A scorer dripping its 30-byte reply a byte every 0.3 s (each read well within any
    per-read timeout; 9 s in all) is given up on at --timeout 1, by both clients."""
    reply = b"TEXTNB/1 OK ham -3.5 0.03 0.0\n"
    raw = MESSAGES[0]
    with Answering(tmp_path / "drip.sock", reply, drip=0.3) as dripping:
        start = time.monotonic()
        code, out, err = run_c(c_client, raw, "--server", dripping.spec, "--timeout", "1",
                               "--no-fallback")
        c_seconds = time.monotonic() - start
        assert (code, out) == (3, raw) and "timed out" in err, err
        start = time.monotonic()
        with pytest.raises(ScorerUnavailable, match="timed out"):
            score_remote(dripping.address, raw, timeout=1.0)
        python_seconds = time.monotonic() - start
        with pytest.raises(ScorerUnavailable, match="timed out"):  # learning too
            learn_remote(dripping.address, raw, "spam", timeout=1.0)
    assert 0.9 < c_seconds < 2.0 and 0.9 < python_seconds < 2.0, (c_seconds, python_seconds)


LEARN_HOSTILE = {
    "control bytes in the outcome": b"TEXTNB/1 LEARNED spam \x1b[31mnew\x1b[0m\n",
    "a bell": b"TEXTNB/1 LEARNED spam new\x07\n",
    "no line end": b"TEXTNB/1 LEARNED spam new",
    "an outcome in capitals": b"TEXTNB/1 LEARNED spam NEW\n",
    "no outcome": b"TEXTNB/1 LEARNED spam\n",
    "a word too many": b"TEXTNB/1 LEARNED spam new moved\n",
    "a label of its own": b"TEXTNB/1 LEARNED eggs new\n",
    "8-bit outcome": b"TEXTNB/1 LEARNED spam n\xc3\xa9w\n",
    "forgotten for a learn": b"TEXTNB/1 FORGOTTEN spam\n",
}


@pytest.mark.parametrize("name", list(LEARN_HOSTILE))
def test_j11_a_hostile_learned_reply_is_not_learned_and_prints_nothing(c_client, tmp_path, name):
    raw = MESSAGES[0]
    with Answering(tmp_path / "s.sock", LEARN_HOSTILE[name]) as scorer:
        for run in (run_c, None):
            if run is None:
                code, out, err = python_client(raw, "--server", scorer.spec, "--learn", "spam")
            else:
                code, out, err = run(c_client, raw, "--server", scorer.spec, "--learn", "spam")
            assert (code, out) == (3, b""), (run, name)
            assert "message not learned as spam" in err and "\x1b" not in err and "\x07" not in err


def test_j11_a_5000_digit_log_odds_is_refused_by_both_clients(c_client, tmp_path):
    """The review's case: the compiled client read it as inf, the Python one refused it."""
    raw = MESSAGES[0]
    for reply in (b"TEXTNB/1 OK spam " + b"9" * 5000 + b" 1.0 0.0\n",
                  b"TEXTNB/1 OK spam " + b"9" * 500 + b" 1.0 0.0\n"):  # within MAX_LINE
        with Answering(tmp_path / "s.sock", reply) as scorer:
            assert run_c(c_client, raw, "--server", scorer.spec, "--no-fallback")[:2] == (3, raw)
            with pytest.raises(ScorerUnavailable, match="malformed scorer reply"):
                score_remote(scorer.address, raw)
        (tmp_path / "s.sock").unlink()


def test_j11_a_pong_with_control_bytes_is_not_printed(c_client, tmp_path):
    with Answering(tmp_path / "s.sock", b"TEXTNB/1 PONG spam=1 \x1b]0;owned\x07\n") as scorer:
        assert run_c(c_client, b"", "--server", scorer.spec, "--ping")[:2] == (1, b"")
        assert python_client(b"", "--server", scorer.spec, "--ping")[:2] == (1, b"")


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "scorer.key"
    path.write_text("5f1d0c2e8a77b3f6a1c9e4d2b8f0a6c3e7d1b5f9a2c4e6d8b0f1a3c5e7d9b2f4\n")
    path.chmod(0o600)
    return path


def test_j9_an_impostor_on_the_tcp_port_is_not_believed(c_client, model, key_file):
    """Another local user binds the scorer's TCP port while it is down and answers "ham":
    with the scorer's key the clients want a MAC over their nonce, which it cannot make;
    without a key they do not ask a TCP scorer at all (unless --insecure-tcp)."""
    from textnb.delivery.client import read_key

    key, raw = read_key(key_file), MESSAGES[0]
    with Running(model, ("127.0.0.1", 0), key=key) as real:  # the scorer, while it runs
        host, port = real.address
        spec = f"{host}:{port}"
        expected = run_python(raw, real.address, key=key)
        assert run_c(c_client, raw, "--server", spec, "--key-file", key_file,
                     "--no-fallback")[:2] == expected
        assert python_client(raw, "--server", spec, "--key-file", key_file,
                             "--no-fallback")[:2] == expected
        assert ping(real.address, key=key)["loads"] == "1"
        # a genuine reply, signed for a nonce of its own, to replay below
        nonce = b"00" * 16
        with socket.create_connection(real.address, timeout=10) as conn:
            conn.sendall(b"TEXTNB/1 SCORE %d nonce=%s\n" % (len(raw), nonce) + raw)
            genuine = conn.recv(4096)
        line, _, mac = genuine.rstrip(b"\n").rpartition(b" mac=")
        assert mac == reply_mac(key, nonce, line)
    impostor_replies = {
        "plain": b"TEXTNB/1 OK ham -9.0 0.0001 0.0\n",
        "made-up mac": b"TEXTNB/1 OK ham -9.0 0.0001 0.0 mac=" + b"ab" * 32 + b"\n",
        "replayed": genuine.replace(b"OK spam", b"OK ham"),
        "replayed whole": genuine,
    }
    for name, reply in impostor_replies.items():
        with Answering(("127.0.0.1", port), reply) as impostor:  # the port, now free
            for code, out, err in (
                    run_c(c_client, raw, "--server", spec, "--key-file", key_file,
                          "--no-fallback"),
                    python_client(raw, "--server", spec, "--key-file", key_file,
                                  "--no-fallback"),
                    python_client(raw, "--server", spec, "--no-fallback",
                                  env={"TEXTNB_KEY_FILE": str(key_file)})):
                assert (code, out) == (3, raw), name  # unscored, unchanged: no verdict
                assert "did not prove it holds the key" in err, err
            for run in (lambda *a: run_c(c_client, *a), python_client):
                code, out, err = run(raw, "--server", spec, "--key-file", key_file,
                                     "--learn", "ham")
                assert (code, out) == (3, b"") and "message not learned" in err
            with pytest.raises(ScorerUnavailable, match="did not prove"):
                ping(impostor.address, key=key)
        assert len(impostor.lines) == 6 and all(b" nonce=" in line for line in impostor.lines)
    with Answering(("127.0.0.1", port), impostor_replies["plain"]) as impostor:
        for run in (lambda *a: run_c(c_client, *a), python_client):  # no key: not asked
            code, out, err = run(raw, "--server", spec, "--no-fallback")
            assert (code, out) == (3, raw) and "--insecure-tcp" in err, err
        assert impostor.lines == []
        for run in (lambda *a: run_c(c_client, *a), python_client):  # told to trust the port
            code, out, _ = run(raw, "--server", spec, "--no-fallback", "--insecure-tcp")
            assert code == 1 and b"X-TextNB-Status: ham" in out


def test_j9_a_key_file_others_can_read_is_refused(c_client, key_file):
    from typer.testing import CliRunner

    from textnb.cli import app

    runner, raw = CliRunner(), MESSAGES[0]
    for mode, text, says in ((0o644, None, "has mode 0644: others could read the key; "
                                           "'chmod 600"),
                             (0o600, "short\n", "holds 5 bytes, not 32 to 4096; make one with "
                                                "'openssl rand -hex 32")):
        key_file.chmod(mode)
        if text is not None:
            key_file.write_text(text)
        for run in (lambda *a: run_c(c_client, *a), python_client):
            code, out, err = run(raw, "--server", ":1", "--key-file", key_file)
            assert (code, out) == (3, raw) and says in err, err  # the message goes through
        done = runner.invoke(app, ["filter", "--server", ":1", "--key-file", str(key_file)],
                             input=raw)
        assert (done.exit_code, done.stdout_bytes) == (3, raw) and says in done.stderr
        done = runner.invoke(app, ["serve", "--tcp", "0", "--key-file", str(key_file)])
        assert done.exit_code == 1 and says in done.output, done.output


def test_j9_the_unix_socket_is_answered_by_its_owner(c_client):
    """A socket file of this user's, listened on by another uid (a socket renamed into
    place between the client's check and its connect): refused by the peer's uid."""
    if os.getuid() != 0:
        pytest.skip("needs root, to listen as another user (uid 65534)")
    import tempfile
    from pathlib import Path

    folder = Path(tempfile.mkdtemp(prefix="textnb-peer-"))  # tmp_path's parents are 0700
    folder.chmod(0o777)
    path = folder / "s.sock"
    child = subprocess.Popen(
        [sys.executable, "-c", "import os, socket, sys, time; os.setgid(65534); os.setuid(65534);"
         "s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4);"
         "print('up', flush=True); time.sleep(60)", str(path)], stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline() == b"up\n"
        os.chown(path, os.getuid(), os.getgid())  # the file says: this user's scorer
        folder.chmod(0o700)
        raw = MESSAGES[0]
        code, out, err = run_c(c_client, raw, "--server", path, "--no-fallback", "--timeout", "2")
        assert (code, out) == (3, raw) and "but uid 65534 listens on it" in err, err
        with pytest.raises(ScorerUnavailable, match="but uid 65534 listens on it"):
            score_remote(str(path), raw, timeout=2)
    finally:
        child.kill()
        child.wait(timeout=10)
        shutil.rmtree(folder)
