"""Releasing held mail: the privileged command (textnb-release) with a fake postqueue and
postsuper on PATH, and the milter's record of what it held (the review page's buttons:
tests/test_release_page.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from textnb.delivery import hold_queue
from textnb.delivery.hold_queue import valid_queue_id
from textnb.delivery.verdict_headers import Verdict
from textnb.review.recorder import VerdictRecorder
from textnb.review.store import VerdictStore

from conftest import PROJECT

SPAM = Verdict("spam", 9.0, 0.9999, 0.0)
# The file itself: it imports nothing of textnb but itself, as root runs it.
RELEASE = [sys.executable, str(PROJECT / "textnb" / "delivery" / "hold_queue.py")]

FAKE_POSTQUEUE = """\
#!{python}
# postqueue -j: one JSON object per message of the queue file $FAKE_QUEUE
import json, os, sys
state = os.environ["FAKE_QUEUE"]
with open(state + ".calls", "a") as calls:
    calls.write("postqueue " + " ".join(sys.argv[1:]) + "\\n")
if sys.argv[1:2] == ["-i"]:  # delivery asked for: nothing to list
    sys.exit(0)
assert sys.argv[1:] == ["-j"], sys.argv
for queue_id, queue in json.load(open(state)).items():
    print(json.dumps({{"queue_name": queue, "queue_id": queue_id, "sender": "x@example.net"}}))
"""
FAKE_POSTSUPER = """\
#!{python}
# postsuper -H ID: a held message moves to the deferred queue; anything else, nothing
import json, os, sys
state = os.environ["FAKE_QUEUE"]
with open(state + ".calls", "a") as calls:
    calls.write("postsuper " + " ".join(sys.argv[1:]) + "\\n")
assert len(sys.argv) == 3 and sys.argv[1] == "-H", sys.argv
queue = json.load(open(state))
if queue.get(sys.argv[2]) == "hold":
    queue[sys.argv[2]] = "deferred"
json.dump(queue, open(state, "w"))
"""


class FakeQueue:
    """A mail queue of {queue id: queue name} that the fake Postfix commands read."""

    def __init__(self, folder: Path, queue: dict):
        self.path = folder / "queue.json"
        self.bin = folder / "bin"
        self.bin.mkdir()
        for name, text in (("postqueue", FAKE_POSTQUEUE), ("postsuper", FAKE_POSTSUPER)):
            (self.bin / name).write_text(text.format(python=sys.executable))
            (self.bin / name).chmod(0o755)
        self.path.write_text(json.dumps(queue))

    @property
    def queue(self) -> dict:
        return json.loads(self.path.read_text())

    @property
    def calls(self) -> list[str]:
        calls = Path(str(self.path) + ".calls")
        return calls.read_text().splitlines() if calls.exists() else []

    def environ(self) -> dict:
        return {"PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}",
                "FAKE_QUEUE": str(self.path)}


@pytest.fixture
def fake_queue(tmp_path, monkeypatch):
    queue = FakeQueue(tmp_path, {"3F1B42C1A58": "hold", "4AB17C2D9": "deferred",
                                 "3Pm6fd3Y5nz2cYr": "hold"})
    for key, value in queue.environ().items():
        monkeypatch.setenv(key, value)
    return queue


def run_release(*args):
    return subprocess.run([*RELEASE, *args], capture_output=True, text=True, cwd=PROJECT,
                          env={**os.environ, "PYTHONPATH": str(PROJECT)}, timeout=60)


# -- queue ids -----------------------------------------------------------------------------

@pytest.mark.parametrize("queue_id", [
    "3F1B42C1A58", "0A1B2C", "ABCDE0123456789ABCDEF",  # short: 5 hex of µs + the inode
    "3Pm6fd3Y5nz2cYr", "4Nbq7K2wK1z9", "3Pm6fdzY5nz2cYr",  # long ('z' may be in the time)
])
def test_postfix_queue_ids_short_and_long_are_valid(queue_id):
    assert valid_queue_id(queue_id)


@pytest.mark.parametrize("queue_id", [
    "", "ABCDE", "3f1b42c1a58", "3F1B42C1A5G", "-d", "-d ALL", "ALL", "3F1B42C1A58\n",
    "3F1B42C1A58 x", "../../etc", "3Pm6fd3Y5nz", "3Pm6fd3Yz2c",  # no inode / time too short
    "3Pm6fd3Y5nz2cYz", "3Pa6fd3Y5nz2cYr", "Ａ3F1B42C1A58", "٣F1B42C1A58", "A" * 22,
    None, 123,
])
def test_anything_else_is_not_a_queue_id(queue_id):
    assert not valid_queue_id(queue_id)


# -- the privileged command ----------------------------------------------------------------

def test_the_release_command_releases_what_is_on_hold(fake_queue):
    done = run_release("3F1B42C1A58")
    assert done.returncode == hold_queue.EXIT_RELEASED, done
    assert done.stdout.strip() == "3F1B42C1A58 released from hold"
    assert fake_queue.queue["3F1B42C1A58"] == "deferred"
    assert fake_queue.calls == ["postqueue -j", "postsuper -H 3F1B42C1A58", "postqueue -j",
                                "postqueue -i 3F1B42C1A58"]
    long_form = run_release("3Pm6fd3Y5nz2cYr")
    assert long_form.returncode == hold_queue.EXIT_RELEASED, long_form


def test_the_release_command_touches_nothing_not_on_hold(fake_queue):
    released = run_release("4AB17C2D9")  # in the deferred queue: released already
    assert released.returncode == hold_queue.EXIT_NOT_HELD
    assert "not on hold" in released.stdout and "deferred" in released.stdout
    gone = run_release("5BCDE0123")  # in no queue
    assert gone.returncode == hold_queue.EXIT_GONE and "not in the mail queue" in gone.stdout
    assert not any(call.startswith("postsuper") for call in fake_queue.calls)


@pytest.mark.parametrize("args", [(), ("-d", "ALL"), ("3F1B42C1A58", "4AB17C2D9"),
                                  ("-c",), ("3F1B42C1A58;id",), ("--help",)])
def test_the_release_command_refuses_anything_but_one_queue_id_before_running_postfix(
        fake_queue, args):
    done = run_release(*args)
    assert done.returncode == hold_queue.EXIT_USAGE and "usage: textnb-release" in done.stderr
    assert fake_queue.calls == [] and fake_queue.queue["3F1B42C1A58"] == "hold"


def test_the_release_command_says_when_postfix_fails(tmp_path, monkeypatch):
    (tmp_path / "bin").mkdir()
    failing = tmp_path / "bin" / "postqueue"
    failing.write_text("#!/bin/sh\necho 'postqueue: fatal: Queue report unavailable' >&2\n"
                       "exit 69\n")
    failing.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    done = run_release("3F1B42C1A58")
    assert done.returncode == hold_queue.EXIT_FAILED
    assert "Queue report unavailable" in done.stdout


def test_the_release_command_imports_nothing_but_the_standard_library():
    check = ("import sys; import textnb.delivery.hold_queue; "
             "print(sorted(m for m in sys.modules if m.startswith('textnb')))")
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                         cwd=PROJECT, check=True).stdout
    assert out.strip() == "['textnb', 'textnb.delivery', 'textnb.delivery.hold_queue']"


# -- the milter's record -------------------------------------------------------------------

def test_the_milter_records_what_it_held_with_its_queue_id(tmp_path, sample_model_file):
    Milter = pytest.importorskip("Milter", reason="pymilter is absent: pip install -e '.[milter]'")
    from textnb.delivery.milter import MilterPolicy, MilterScorer, MilterSession, _InFlight
    from textnb.delivery.server import ResidentModel

    sample = PROJECT / "corpora" / "sample"
    spam = (sample / "spam" / "001.eml").read_bytes()
    ham = (sample / "ham" / "001.eml").read_bytes()

    class Context:  # libmilter's side of one connection
        def __init__(self, queue_id):
            self.queue_id, self.done = queue_id, []

        def getsymval(self, name):
            return self.queue_id if name == "i" else None

        def __getattr__(self, name):  # addheader, chgheader, quarantine, setreply
            return lambda *args: self.done.append(name)

    db = tmp_path / "verdicts.db"
    recorder = VerdictRecorder(db, default_user="mail").start()
    policy = MilterPolicy(timeout=60, quarantine_above=0.9)
    scorer = MilterScorer(ResidentModel(sample_model_file), policy, recorder=recorder)
    contexts = []
    try:
        for raw, queue_id in ((spam, "3F1B42C1A58"), (ham, "4AB17C2D9"),
                              (spam, "-d ALL")):  # not a queue id: not recorded
            session = MilterSession(scorer, policy, _InFlight())
            session._ctx = contexts.append(Context(queue_id)) or contexts[-1]
            session._actions = Milter.ADDHDRS | Milter.CHGHDRS | Milter.QUARANTINE
            session.header("Subject", "x")
            session.body(raw.partition(b"\n\n")[2])
            session.eom()
    finally:
        scorer.close()
        recorder.close()
    rows = VerdictStore(db).history(None)[::-1]
    assert [(r.source, r.label, r.action, r.queue_id) for r in rows] == [
        ("milter", "spam", "quarantined", "3F1B42C1A58"),
        ("milter", "ham", "delivered", "4AB17C2D9"),
        ("milter", "spam", "quarantined", None)]
    assert "quarantine" in contexts[0].done and "quarantine" not in contexts[1].done
