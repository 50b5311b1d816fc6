"""Releasing held mail: the privileged command (textnb-release) with a fake postqueue and
postsuper on PATH, the milter's record of what it held, and the review page's Release
and Release-and-teach-as-ham through Starlette's TestClient and that command."""

import json
import os
import re
import sqlite3
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


# -- the page ------------------------------------------------------------------------------

starlette = pytest.importorskip("starlette", reason="the review page's libraries")
pytest.importorskip("argon2", reason="the review page's libraries")

from test_review_web import FakeScorer, log_in, users_file  # noqa: E402,F401
from textnb.review.web import make_app  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402


def held_message(user: str, n: int) -> bytes:
    return (f"From: Bank <notice@bank.example>\nSubject: {user}'s statement {n}\n\n"
            f"Dear {user}, your statement {n} is ready.\n").encode()


@pytest.fixture
def held_site(tmp_path, users_file, fake_queue):  # noqa: F811
    """Alice's held message (3F1B42C1A58), her message released already (4AB17C2D9, in
    the deferred queue), one that vanished (5BCDE0123, in no queue), one the milter
    rejected, and bob's held one (3Pm6fd3Y5nz2cYr)."""
    db = tmp_path / "verdicts.db"
    recorder = VerdictRecorder(db).start()
    for user, n, action, queue_id in (("alice", 1, "quarantined", "3F1B42C1A58"),
                                      ("alice", 2, "quarantined", "4AB17C2D9"),
                                      ("alice", 3, "quarantined", "5BCDE0123"),
                                      ("alice", 4, "rejected", "6CDEF0123"),
                                      ("bob", 1, "quarantined", "3Pm6fd3Y5nz2cYr")):
        assert recorder.submit(held_message(user, n), SPAM, user=user, model="user",
                               source="milter", action=action, queue_id=queue_id)
    recorder.close()
    scorer = FakeScorer()
    app = make_app(db, users_file, "unused.sock", learn=scorer.learn, ping=scorer.ping,
                   release_command=RELEASE)
    ids = {(row.user, row.subject[-1]): row.id for row in VerdictStore(db).history(None)}
    return TestClient(app, base_url="http://127.0.0.1"), scorer, ids, db


def click(client, csrf, verdict_id, action, **extra):
    reply = client.post(f"/message/{verdict_id}/teach",
                        data={"csrf": csrf, "action": action, **extra})
    assert reply.status_code == 200, reply.text
    return reply.text


def row_of(db, verdict_id):
    return VerdictStore(db).get(verdict_id, None)


def test_held_mail_shows_as_held_with_release_buttons(held_site):
    client, _, ids, _ = held_site
    log_in(client, "alice")
    review = client.get("/review").text
    assert review.count('<td class="c-done">held</td>') == 3
    page = client.get(f"/message/{ids['alice', '1']}").text
    assert 'id="release"' in page and 'id="release-ham"' in page and "3F1B42C1A58" in page
    rejected = client.get(f"/message/{ids['alice', '4']}").text
    assert 'id="release"' not in rejected and 'id="rejected"' in rejected
    assert "nothing to release" in rejected


def test_release_releases_through_the_command_and_records_it(held_site, fake_queue):
    client, scorer, ids, db = held_site
    csrf = log_in(client, "alice")
    page = click(client, csrf, ids["alice", "1"], "release")
    assert "released" in page and "not done" not in page
    assert fake_queue.queue["3F1B42C1A58"] == "deferred"
    row = row_of(db, ids["alice", "1"])
    assert row.action == "released" and row.taught is None and scorer.calls == []
    again = click(client, csrf, ids["alice", "1"], "release")
    assert "not done: already released" in again
    assert fake_queue.calls.count("postsuper -H 3F1B42C1A58") == 1


def test_release_and_teach_as_ham_is_one_operation(held_site, fake_queue):
    client, scorer, ids, db = held_site
    csrf = log_in(client, "alice")
    page = click(client, csrf, ids["alice", "1"], "release-ham")
    assert "released; taught as ham" in page
    row = row_of(db, ids["alice", "1"])
    assert (row.action, row.taught, row.before) == ("released", "ham", "absent")
    assert scorer.calls == [("ham", "alice")] and fake_queue.queue["3F1B42C1A58"] == "deferred"


@pytest.mark.parametrize("which,said", [("2", "no longer on hold: released already"),
                                        ("3", "no longer in the mail queue")])
def test_a_release_that_fails_changes_nothing_and_takes_the_lesson_back(held_site, which, said):
    client, scorer, ids, db = held_site
    csrf = log_in(client, "alice")
    verdict_id = ids["alice", which]
    page = click(client, csrf, verdict_id, "release-ham")
    assert "not done: it is " + said in page and "the scorer was put back" in page
    row = row_of(db, verdict_id)
    assert (row.action, row.taught, row.before) == ("quarantined", None, None)
    assert scorer.calls == [("ham", "alice"), (None, "alice")] and scorer.state == {}


def test_mail_the_milter_rejected_cannot_be_released(held_site, fake_queue):
    client, scorer, ids, db = held_site
    csrf = log_in(client, "alice")
    page = click(client, csrf, ids["alice", "4"], "release-ham")
    assert "not done: the milter rejected this message in SMTP" in page
    assert fake_queue.calls == [] and scorer.calls == []
    assert row_of(db, ids["alice", "4"]).action == "rejected"


def test_a_user_releases_only_their_own_mail_and_an_admin_anyones(held_site, fake_queue):
    client, _, ids, db = held_site
    csrf = log_in(client, "alice")
    reply = client.post(f"/message/{ids['bob', '1']}/teach",
                        data={"csrf": csrf, "action": "release"})
    assert reply.status_code == 404 and fake_queue.queue["3Pm6fd3Y5nz2cYr"] == "hold"
    assert client.post(f"/message/{ids['alice', '1']}/teach",
                       data={"action": "release"}).status_code == 403  # no CSRF token
    assert fake_queue.calls == []
    client.cookies.clear()
    csrf = log_in(client, "root")
    assert "released" in click(client, csrf, ids["bob", "1"], "release")
    assert fake_queue.queue["3Pm6fd3Y5nz2cYr"] == "deferred"


def test_a_hostile_queue_id_in_the_log_never_reaches_a_command(held_site, fake_queue):
    client, _, ids, db = held_site
    with sqlite3.connect(db) as raw_db:
        raw_db.execute("UPDATE verdicts SET queue_id = '-d ALL' WHERE id = ?",
                       (ids["alice", "1"],))
    csrf = log_in(client, "alice")
    page = click(client, csrf, ids["alice", "1"], "release")
    assert "not done: no Postfix queue id was recorded" in page
    assert fake_queue.calls == [] and row_of(db, ids["alice", "1"]).action == "quarantined"


def test_without_a_release_command_held_mail_is_shown_not_released(tmp_path, users_file,  # noqa: F811
                                                                   fake_queue):
    db = tmp_path / "verdicts.db"
    recorder = VerdictRecorder(db).start()
    recorder.submit(held_message("alice", 1), SPAM, user="alice", model="user",
                    source="milter", action="quarantined", queue_id="3F1B42C1A58")
    recorder.submit(held_message("alice", 2), SPAM, user="alice", model="user",
                    source="milter", action="rejected", queue_id="4AB17C2D9")
    recorder.close()
    client = TestClient(make_app(db, users_file, "unused.sock", learn=FakeScorer().learn),
                        base_url="http://127.0.0.1")
    csrf = log_in(client, "alice")
    rejected, verdict_id = (row.id for row in VerdictStore(db).history(None))
    assert "not done: the milter rejected this message" in click(client, csrf, rejected,
                                                                  "release")
    page = client.get(f"/message/{verdict_id}").text
    assert 'id="release-off"' in page and 'id="release"' not in page
    assert "not done: releasing held mail is not set up" in click(client, csrf, verdict_id,
                                                                   "release")
    assert fake_queue.calls == []


def test_the_review_queue_filters_held_mail(held_site):
    client, _, ids, _ = held_site
    log_in(client, "alice")
    page = client.get("/review?held=1").text
    shown = {int(found) for found in re.findall(r'id="row-(\d+)"', page)}
    assert shown == {ids["alice", n] for n in "123"}  # not the rejected one
    assert 'id="held-only" checked' in page


def test_a_log_written_before_queue_ids_gets_the_column_when_opened(tmp_path):
    db = tmp_path / "verdicts.db"
    recorder = VerdictRecorder(db).start()
    recorder.submit(held_message("alice", 1), SPAM, user="alice", model="user")
    recorder.close()
    with sqlite3.connect(db) as raw_db:
        raw_db.execute("ALTER TABLE verdicts DROP COLUMN queue_id")
    store = VerdictStore(db, create=False)  # as the page opens it
    [row] = store.history(None)
    assert row.queue_id is None and row.action == "scored"


def test_releasing_and_teaching_a_shared_models_verdict_asks_to_confirm(tmp_path, users_file,  # noqa: F811
                                                                         fake_queue):
    db = tmp_path / "verdicts.db"
    recorder = VerdictRecorder(db).start()
    recorder.submit(held_message("list", 1), SPAM, user="", model="shared", source="milter",
                    action="quarantined", queue_id="3F1B42C1A58")
    recorder.close()
    scorer = FakeScorer()
    client = TestClient(make_app(db, users_file, "unused.sock", learn=scorer.learn,
                                 release_command=RELEASE), base_url="http://127.0.0.1")
    csrf = log_in(client, "root")
    verdict_id = VerdictStore(db).history(None)[0].id
    page = click(client, csrf, verdict_id, "release-ham")
    assert 'id="confirm-shared"' in page and "release and teach as ham" in page
    assert fake_queue.calls == [] and scorer.calls == []
    page = click(client, csrf, verdict_id, "release-ham", confirm="shared")
    assert "released; taught as ham" in page and scorer.calls == [("ham", None)]
    assert fake_queue.queue["3F1B42C1A58"] == "deferred"


def test_a_release_command_that_hangs_is_stopped_and_the_page_says_what_it_may_have_done(
        tmp_path):
    from textnb.review.release import ReleaseError, command_runner

    hang = tmp_path / "hang"
    hang.write_text("#!/bin/sh\nexec sleep 30\n")  # the kill reaches the sleep itself
    hang.chmod(0o755)
    with pytest.raises(ReleaseError, match="may have released the message"):
        command_runner([str(hang)], timeout=0.5)("3F1B42C1A58")
    with pytest.raises(ReleaseError, match="not a Postfix queue id"):
        command_runner([str(hang)])("-d ALL")
