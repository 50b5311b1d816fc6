"""A real Postfix delivers through `textnb milter` on loopback: docs/milter.md's recipe.

A private Postfix instance (its own configuration, queue and Maildirs in a temporary
folder, smtpd on a free 127.0.0.1 port, no chroot) with the recipe's ``smtpd_milters``,
``non_smtpd_milters`` and ``milter_default_action = accept``; virtual delivery into a
Maildir per recipient. Needs Postfix (apt-get install postfix) and root (its master
starts as root and delivers as nobody); skipped otherwise. The system's own Postfix, if
configured, is left alone: the instance has its own queue and master.
"""

import os
import pwd
import shutil
import smtplib
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from textnb.delivery.verdict_headers import score_with, verdict_fields

from test_milter import HAM, SPAM, MilterProcess, free_port, local, model_file, user_models  # noqa: F401

POSTFIX = shutil.which("postfix") or (Path("/usr/sbin/postfix") if Path("/usr/sbin/postfix").exists()
                                      else None)


def _has_postfix_user() -> bool:
    try:
        pwd.getpwnam("postfix")
    except KeyError:
        return False
    return True


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(POSTFIX is None or not _has_postfix_user(),
                       reason="Postfix is not installed (apt-get install postfix)"),
    pytest.mark.skipif(os.getuid() != 0, reason="a Postfix instance's master must start as root"),
]

USERS = ("alice", "bob", "carol")
# Fields the delivery adds after the milter has seen the message (virtual(8)).
DELIVERY_FIELDS = (b"Return-Path:", b"X-Original-To:", b"Delivered-To:")


class PostfixInstance:
    """A Postfix of our own on 127.0.0.1:smtp_port, asking the milter at milter_port."""

    def __init__(self, milter_port: int):
        self.root = Path(tempfile.mkdtemp(prefix="textnb-postfix-"))
        self.root.chmod(0o755)  # its daemons run as postfix and nobody
        self.etc, self.mail = self.root / "etc", self.root / "mail"
        for folder in ("etc", "queue", "data", "mail"):
            (self.root / folder).mkdir()
        shutil.chown(self.root / "data", "postfix")
        shutil.chown(self.mail, "nobody")
        self.smtp_port = free_port()
        nobody = pwd.getpwnam("nobody")
        (self.etc / "main.cf").write_text(f"""\
compatibility_level = 3.6
queue_directory = {self.root}/queue
data_directory = {self.root}/data
maillog_file_prefixes = {self.root}
maillog_file = {self.root}/maillog
mail_owner = postfix
myhostname = mx.textnb.test
mydomain = textnb.test
myorigin = textnb.test
mydestination =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
smtpd_relay_restrictions = permit_mynetworks, reject_unauth_destination
alias_maps =
alias_database =
biff = no
virtual_mailbox_domains = example.org
virtual_mailbox_base = {self.mail}
virtual_mailbox_maps = texthash:{self.etc}/vmailbox
virtual_uid_maps = static:{nobody.pw_uid}
virtual_gid_maps = static:{nobody.pw_gid}
# docs/milter.md's recipe:
smtpd_milters = inet:127.0.0.1:{milter_port}
non_smtpd_milters = $smtpd_milters
milter_default_action = accept
milter_protocol = 6
""")
        (self.etc / "vmailbox").write_text("".join(f"{u}@example.org {u}/\n" for u in USERS))
        services = [f"127.0.0.1:{self.smtp_port} inet n - n - - smtpd",
                    "pickup unix n - n 60 1 pickup", "cleanup unix n - n - 0 cleanup",
                    "qmgr unix n - n 300 1 qmgr", "rewrite unix - - n - - trivial-rewrite",
                    "bounce unix - - n - 0 bounce", "defer unix - - n - 0 bounce",
                    "trace unix - - n - 0 bounce", "verify unix - - n - 1 verify",
                    "flush unix n - n 1000? 0 flush", "proxymap unix - - n - - proxymap",
                    "smtp unix - - n - - smtp", "showq unix n - n - - showq",
                    "error unix - - n - - error", "retry unix - - n - - error",
                    "discard unix - - n - - discard", "virtual unix - n n - - virtual",
                    "anvil unix - - n - 1 anvil", "scache unix - - n - 1 scache",
                    "postlog unix-dgram n - n - 1 postlogd"]
        (self.etc / "master.cf").write_text("\n".join(services) + "\n")

    def _postfix(self, command: str) -> None:
        done = subprocess.run([str(POSTFIX), "-c", str(self.etc), command], capture_output=True,
                              timeout=60)
        assert done.returncode == 0, f"postfix {command}: {done.stderr!r}\n{self.log()}"

    def log(self) -> str:
        path = self.root / "maillog"
        return path.read_text(errors="replace") if path.exists() else "(no maillog)"

    def __enter__(self):
        self._postfix("start")
        deadline = time.monotonic() + 60
        while True:
            try:
                smtplib.SMTP("127.0.0.1", self.smtp_port, timeout=5).quit()
                return self
            except OSError:
                assert time.monotonic() < deadline, "Postfix did not listen:\n" + self.log()
                time.sleep(0.2)

    def __exit__(self, *exc):
        try:
            self._postfix("stop")
            pid = self.root / "queue" / "pid" / "master.pid"
            deadline = time.monotonic() + 30
            while pid.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def send(self, recipients, raw: bytes) -> None:
        # In CRLF, as SMTP has it (smtplib adds a CRLF to data not ending in one: a line
        # the message did not have)
        crlf = raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        with smtplib.SMTP("127.0.0.1", self.smtp_port, timeout=60) as smtp:
            smtp.sendmail("sender@example.net", [f"{r}@example.org" for r in recipients], crlf)

    def submit(self, recipient: str, raw: bytes) -> None:
        """Local submission with Postfix's sendmail(1): the non_smtpd_milters path."""
        sendmail = subprocess.run(["postconf", "-c", str(self.etc), "-h", "sendmail_path"],
                                  capture_output=True, text=True, timeout=30).stdout.strip()
        done = subprocess.run([sendmail, "-C", str(self.etc), "-f", "sender@example.net",
                               f"{recipient}@example.org"], input=raw, capture_output=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr

    def delivered(self, user: str, n: int = 1, seconds: float = 60.0) -> list[bytes]:
        """The messages in the user's Maildir, once there are n (in delivery order)."""
        new = self.mail / user / "new"
        deadline = time.monotonic() + seconds
        while not (new.exists() and len(list(new.iterdir())) >= n):
            assert time.monotonic() < deadline, f"nothing delivered to {user}:\n{self.log()}"
            time.sleep(0.1)
        files = sorted(new.iterdir(), key=lambda p: p.stat().st_mtime_ns)
        return [p.read_bytes() for p in files]


def split_delivered(raw: bytes):
    """(what the milter saw, the X-TextNB fields it added): the delivered message without
    the fields delivery added after it (the first Delivered-To only: a later one is the
    message's own) and without the milter's own."""
    head, _, body = raw.partition(b"\n\n")
    kept, added, delivery_done = [], [], set()
    target = kept  # where the current field's lines go (None: dropped)
    for line in head.split(b"\n"):
        if line[:1] not in (b" ", b"\t"):  # a new field; else a folded line of the last
            name = line.split(b":", 1)[0] + b":"
            if line.startswith(b"X-TextNB-"):
                target = added
            elif name in DELIVERY_FIELDS and name not in delivery_done:
                delivery_done.add(name)
                target = None
            else:
                target = kept
        if target is not None:
            target.append(line)
    return b"\n".join(kept) + b"\n\n" + body, added


def fields_as_lines(verdict, spamassassin=False):
    return [name + b": " + value for name, value in verdict_fields(verdict, spamassassin)]


def original_body(raw: bytes) -> bytes:
    return raw.replace(b"\r\n", b"\n").partition(b"\n\n")[2]


def test_postfix_delivers_through_the_milter_and_accepts_when_it_is_down(tmp_path, model_file,
                                                                         local):
    milter_port = free_port()
    spec = f"inet:{milter_port}@127.0.0.1"
    with PostfixInstance(milter_port) as postfix:
        with MilterProcess(tmp_path, model_file, spec=spec):
            postfix.send(["bob"], SPAM)
            postfix.send(["carol"], HAM)
            postfix.submit("bob", HAM)  # sendmail(1): non_smtpd_milters
            bob = postfix.delivered("bob", 2)
            carol = postfix.delivered("carol", 1)
        postfix.send(["carol"], SPAM)  # the milter is down: milter_default_action = accept
        carol_later = postfix.delivered("carol", 2)[1]
        log = postfix.log()
    for delivered, original, label in ((bob[0], SPAM, "spam"), (carol[0], HAM, "ham"),
                                       (bob[1], HAM, "ham")):
        seen, added = split_delivered(delivered)
        verdict = score_with(local, seen)
        assert verdict.label == label
        assert added == fields_as_lines(verdict)  # filter's fields, values and order
        assert original_body(delivered) == original_body(original)  # body untouched
    seen, added = split_delivered(carol_later)
    assert added == [] and original_body(carol_later) == original_body(SPAM)
    # Postfix says it went without:
    assert f"connect to Milter service inet:127.0.0.1:{milter_port}: Connection refused" in log


def test_postfix_per_user_verdicts_by_recipient(tmp_path, model_file, local):
    folder, swapped = user_models(tmp_path, model_file)
    milter_port = free_port()
    spec = f"inet:{milter_port}@127.0.0.1"
    with PostfixInstance(milter_port) as postfix:
        with MilterProcess(tmp_path, folder / "_shared" / "model.tnb", "--models", str(folder),
                           spec=spec):
            postfix.send(["alice"], SPAM)
            alice = postfix.delivered("alice", 1)
            postfix.send(["alice", "bob"], SPAM)  # one transaction, two users
            alice += postfix.delivered("alice", 2)[1:]
            bob = postfix.delivered("bob", 1)
    own_seen, own_added = split_delivered(alice[0])
    assert own_added == fields_as_lines(score_with(swapped, own_seen))
    assert b"X-TextNB-Status: ham" in own_added  # Alice taught her model the opposite
    for delivered in (alice[1], bob[0]):  # both copies: the shared model's verdict
        seen, added = split_delivered(delivered)
        assert added == fields_as_lines(score_with(local, seen))
        assert b"X-TextNB-Status: spam" in added


def test_a_held_spam_is_released_from_the_review_page_and_delivered(tmp_path, model_file,
                                                                    monkeypatch):
    """The milter holds bob's spam (--quarantine-above) and records it with its queue id;
    bob's review page shows it held and releases it through textnb-release (the real
    postqueue and postsuper, on this instance by MAIL_CONFIG); Postfix delivers it."""
    pytest.importorskip("starlette", reason="the review page's libraries")
    pytest.importorskip("argon2", reason="the review page's libraries")
    from starlette.testclient import TestClient

    from textnb.delivery.hold_queue import held_in, valid_queue_id
    from textnb.review.accounts import Accounts
    from textnb.review.store import VerdictStore
    from textnb.review.web import make_app

    from test_release import RELEASE
    from test_review_web import PASSWORDS, FakeScorer, log_in

    users = tmp_path / "users.json"
    Accounts(users).add("bob", PASSWORDS["bob"])
    folder, _ = user_models(tmp_path, model_file)  # bob has no model: the shared one
    db, milter_port = tmp_path / "verdicts.db", free_port()
    with PostfixInstance(milter_port) as postfix:
        monkeypatch.setenv("MAIL_CONFIG", str(postfix.etc))
        with MilterProcess(tmp_path, folder / "_shared" / "model.tnb", "--models", str(folder),
                           "--quarantine-above", "0.9", "--record", str(db),
                           spec=f"inet:{milter_port}@127.0.0.1"):
            postfix.send(["bob"], SPAM)  # accepted (on hold) once this returns
        [row] = VerdictStore(db).history("bob")  # the milter wrote its queue at SIGTERM
        assert (row.action, row.label, row.source) == ("quarantined", "spam", "milter")
        assert valid_queue_id(row.queue_id) and held_in(row.queue_id) == "hold"
        assert not (postfix.mail / "bob" / "new").exists()
        client = TestClient(make_app(db, users, "unused.sock", learn=FakeScorer().learn,
                                     release_command=RELEASE), base_url="http://127.0.0.1")
        csrf = log_in(client, "bob")
        shown = client.get(f"/message/{row.id}").text
        assert 'id="release"' in shown and row.queue_id in shown
        page = client.post(f"/message/{row.id}/teach", data={"csrf": csrf, "action": "release"})
        assert page.status_code == 200 and "released" in page.text and "not done" not in page.text
        [delivered] = postfix.delivered("bob", 1)
        assert b"X-TextNB-Status: spam" in delivered
        assert original_body(delivered) == original_body(SPAM)
        assert VerdictStore(db).get(row.id, None).action == "released"
        again = client.post(f"/message/{row.id}/teach", data={"csrf": csrf, "action": "release"})
        assert "not done: already released" in again.text
