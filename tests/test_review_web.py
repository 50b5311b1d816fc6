"""textnb web's security and teaching, through Starlette's TestClient: no session -> the
login page; a POST without the CSRF token refused; another user's message -> 404; every
message of the hostile catalogue shown inert; logins rate-limited; and teaching through
a real scorer changes a user's model by exactly the message, once, with undo."""

import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the review page's libraries: pip install -e '.[web]'")
pytest.importorskip("argon2", reason="the review page's libraries: pip install -e '.[web]'")

from starlette.testclient import TestClient  # noqa: E402

from textnb.delivery.client import ping  # noqa: E402
from textnb.delivery.users import ModelSet  # noqa: E402
from textnb.delivery.verdict_headers import Verdict  # noqa: E402
from textnb.review.accounts import Accounts  # noqa: E402
from textnb.review.guard import MAX_FAILURES  # noqa: E402
from textnb.review.recorder import VerdictRecorder  # noqa: E402
from textnb.review.store import VerdictStore  # noqa: E402
from textnb.review.web import make_app  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import hostile_cases  # noqa: E402
from test_server import Running  # noqa: E402
from _wire import wait_for as _wait  # noqa: E402

PASSWORDS = {"alice": "alice-password", "bob": "bob-password", "root": "root-password"}
UNSURE = Verdict("unsure", 0.4, 0.6, 0.0)


def unsure_message(user: str, n: int = 1) -> bytes:
    return (f"From: Shop <offers@shop.example>\nSubject: {user}'s offer {n}\n\n"
            f"Dear {user}, a cheap meeting about the project, click now {n}\n").encode()


@pytest.fixture(scope="module")
def users_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("web") / "users.json"
    accounts = Accounts(path)
    for name, password in PASSWORDS.items():
        accounts.add(name, password, admin=(name == "root"))
    return path


def record(db: Path, entries) -> None:
    """Record (raw, verdict, user, model) through the recorder, as the scorer does."""
    recorder = VerdictRecorder(db).start()
    for raw, verdict, user, model in entries:
        assert recorder.submit(raw, verdict, user=user, model=model)
    recorder.close()


class FakeScorer:
    """learn_remote's stand-in: a ledger of digests per user, answering as the scorer does."""

    def __init__(self):
        self.calls, self.state = [], {}

    def learn(self, raw, label, user):
        self.calls.append((label, user))
        key = (user, raw)
        had = self.state.get(key)
        if label is None:
            self.state.pop(key, None)
            return had or "not-found"
        self.state[key] = label
        return f"{label} {'new' if had is None else 'known' if had == label else 'moved'}"

    def ping(self, user):
        return {"spam": "3", "ham": "250", "model": "user"}


@pytest.fixture
def site(tmp_path, users_file):
    db = tmp_path / "verdicts.db"
    record(db, [(unsure_message("alice"), UNSURE, "alice", "user"),
                (unsure_message("bob"), UNSURE, "bob", "user")])
    scorer = FakeScorer()
    app = make_app(db, users_file, "unused.sock", learn=scorer.learn, ping=scorer.ping)
    ids = {row.user: row.id for row in VerdictStore(db).history(None)}
    return TestClient(app, base_url="http://127.0.0.1"), scorer, ids, db


def log_in(client, name):
    page = client.get("/login")
    token = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
    reply = client.post("/login", data={"csrf": token, "name": name,
                                        "password": PASSWORDS[name]}, follow_redirects=False)
    assert reply.status_code == 303 and reply.headers["location"] == "/history", reply.text
    return csrf_of(client.get("/history").text)


def csrf_of(html: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', html).group(1)


def test_without_a_session_every_page_is_the_login_page(site):
    client, scorer, ids, _ = site
    for path in ("/", "/history", "/review", "/stats", f"/message/{ids['alice']}"):
        reply = client.get(path)
        assert reply.url.path == "/login" and 'type="password"' in reply.text, path
    reply = client.post(f"/message/{ids['alice']}/teach", data={"action": "spam", "csrf": "x"},
                        follow_redirects=False)
    assert reply.status_code == 303 and reply.headers["location"] == "/login"
    assert scorer.calls == []


def test_cookies_headers_and_no_outside_resource(site):
    client, _, _, _ = site
    log_in(client, "alice")
    page = client.get("/login")
    cookies = page.headers.get_list("set-cookie")
    assert all("httponly" in c.lower() and "samesite=strict" in c.lower() for c in cookies)
    for path in ("/history", "/review", "/stats"):
        reply = client.get(path)
        csp = reply.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src" not in csp and "'unsafe" not in csp
        assert reply.headers["x-frame-options"] == "DENY"
        assert "<script" not in reply.text.lower()
        for url in re.findall(r'(?:href|src|action)="([^"]*)"', reply.text):
            assert url.startswith("/"), (path, url)  # nothing from another site


def test_a_post_without_the_csrf_token_is_refused(site):
    client, scorer, ids, _ = site
    token = log_in(client, "alice")
    for data in ({"action": "spam"}, {"action": "spam", "csrf": "forged"}):
        reply = client.post(f"/message/{ids['alice']}/teach", data=data)
        assert reply.status_code == 403
        reply = client.post("/review", data={**data, "ids": [str(ids["alice"])]})
        assert reply.status_code == 403
    assert client.post("/logout", data={}).status_code == 403
    assert scorer.calls == []
    page = client.get("/login")
    assert client.post("/login", data={"name": "alice", "password": PASSWORDS["alice"],
                                       "csrf": "forged"}).status_code == 403
    assert csrf_of(page.text)
    reply = client.post(f"/message/{ids['alice']}/teach", data={"action": "spam", "csrf": token})
    assert reply.status_code == 200 and scorer.calls == [("spam", "alice")]


def test_another_users_message_is_not_found(site):
    client, scorer, ids, _ = site
    token = log_in(client, "bob")
    mine, hers = client.get(f"/message/{ids['bob']}"), client.get(f"/message/{ids['alice']}")
    assert mine.status_code == 200 and "bob&#39;s offer 1" in mine.text
    nowhere = client.get("/message/999999")
    assert hers.status_code == 404 == nowhere.status_code and hers.text == nowhere.text
    assert client.post(f"/message/{ids['alice']}/teach",
                       data={"action": "spam", "csrf": token}).status_code == 404
    client.post("/review", data={"action": "spam", "csrf": token, "ids": [str(ids["alice"])]})
    assert "alice" not in client.get("/history").text + client.get("/review").text
    assert "alice" not in client.get("/history?user=alice").text  # only an admin picks
    assert scorer.calls == []
    log_in(client, "root")  # the admin sees both
    assert client.get(f"/message/{ids['alice']}").status_code == 200
    assert "alice&#x27;s offer" in client.get("/history").text


def test_teach_repeat_relabel_forget_and_undo_follow_the_ledger(site):
    client, scorer, ids, db = site
    token = log_in(client, "alice")
    url = f"/message/{ids['alice']}"

    def click(action):
        return client.post(url + "/teach", data={"action": action, "csrf": token}).text

    assert "taught as spam" in click("spam")
    assert "already taught as spam" in click("spam")  # nothing sent
    assert "taught as ham" in click("ham")  # moved
    page = click("undo")
    assert "undone: forgotten again" in page and 'id="teach-undo"' not in page
    assert scorer.calls == [("spam", "alice"), ("ham", "alice"), (None, "alice")]
    assert scorer.state == {}
    row = VerdictStore(db).get(ids["alice"], "alice")
    assert (row.taught, row.before) == (None, None)


def test_bulk_teaching_from_the_review_queue(tmp_path, users_file):
    db = tmp_path / "v.db"
    record(db, [(unsure_message("alice", n), UNSURE, "alice", "user") for n in range(5)])
    scorer = FakeScorer()
    client = TestClient(make_app(db, users_file, "-", learn=scorer.learn, ping=scorer.ping))
    token = log_in(client, "alice")
    queue = client.get("/review").text
    ids = re.findall(r'name="ids" value="(\d+)"', queue)
    assert len(ids) == 5
    page = client.post("/review", data={"action": "ham", "csrf": token, "ids": ids[:3]}).text
    assert "3 taught as ham" in page
    assert len(re.findall(r'name="ids" value="(\d+)"', page)) == 2  # the rest still queued
    assert "Recently taught" in page and len(scorer.calls) == 3


def test_a_body_larger_than_any_form_is_refused_unread(site):
    client, scorer, ids, _ = site
    reply = client.post("/login", content=b"name=" + b"a" * 100_000,
                        headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert reply.status_code == 413 and scorer.calls == []


def test_a_chunked_body_larger_than_any_form_is_refused_on_every_post(site):
    """No Content-Length (Transfer-Encoding: chunked): the body is counted as it comes."""
    client, scorer, ids, _ = site
    token = log_in(client, "alice")

    def chunks(total):
        yield f"csrf={token}&action=spam&ids={ids['alice']}&x=".encode()
        for _ in range(total // 4096):
            yield b"a" * 4096

    for path in ("/login", "/review", f"/message/{ids['alice']}/teach", "/logout"):
        reply = client.post(path, content=chunks(200_000), follow_redirects=False,
                            headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert reply.status_code == 413, path
        assert reply.headers["content-security-policy"]  # still the page's headers
        small = client.post(path, content=chunks(4096), follow_redirects=False,
                            headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert small.status_code != 413, path  # a chunked form of a normal size is read
    assert scorer.calls == [("spam", "alice")]  # the small ones: taught once, then known


def test_the_page_says_how_many_verdicts_were_not_recorded(tmp_path, users_file):
    db = tmp_path / "v.db"
    recorder = VerdictRecorder(db, queue_size=2)  # not started yet: the queue fills
    for n in range(5):
        recorder.submit(unsure_message("alice", n), UNSURE, user="alice", model="user")
    recorder.start()
    recorder.close()
    scorer = FakeScorer()
    client = TestClient(make_app(db, users_file, "-", learn=scorer.learn, ping=scorer.ping))
    log_in(client, "alice")
    for path in ("/history", "/review"):
        page = client.get(path).text
        assert "3 verdicts could not be recorded (the recorder&#39;s queue was full: 3)" in page


def test_a_verdict_of_one_model_or_without_a_user_is_taught_without_a_user(tmp_path,
                                                                         users_file):
    db = tmp_path / "v.db"
    record(db, [(unsure_message("alice", 1), UNSURE, "alice", "model"),
                (unsure_message("alice", 2), UNSURE, None, "shared")])
    scorer = FakeScorer()
    client = TestClient(make_app(db, users_file, "-", learn=scorer.learn, ping=scorer.ping))
    token = log_in(client, "root")  # only the admin sees the verdict without a user
    for row in VerdictStore(db).history(None):
        client.post(f"/message/{row.id}/teach", data={"action": "ham", "csrf": token,
                                                      "confirm": "shared"})
    assert scorer.calls == [("ham", None), ("ham", None)]


def test_web_listens_on_loopback_unless_told_and_needs_the_log():
    from typer.testing import CliRunner

    from textnb.cli import app

    def said(result):  # rich's box around the error, unwrapped
        return " ".join(result.output.replace("│", " ").split())

    runner = CliRunner()
    result = runner.invoke(app, ["web", "--record", "/nonexistent/v.db", "--host", "0.0.0.0"])
    assert result.exit_code == 2 and "not a loopback address" in said(result)
    result = runner.invoke(app, ["web", "--record", "/nonexistent/v.db"])
    assert result.exit_code == 2 and "textnb serve --record" in said(result)


def test_logins_are_rate_limited(site):
    client, _, _, _ = site
    for _ in range(MAX_FAILURES):
        token = csrf_of(client.get("/login").text)
        reply = client.post("/login", data={"csrf": token, "name": "alice", "password": "wrong"})
        assert "wrong name or password" in reply.text
    token = csrf_of(client.get("/login").text)
    reply = client.post("/login", data={"csrf": token, "name": "alice",
                                        "password": PASSWORDS["alice"]})
    assert reply.status_code == 429  # even the right password, until the window passes


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.attrs = set(), []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attrs += attrs


# Every tag the page's own templates use: a message's markup adds none.
OWN_TAGS = {"html", "head", "meta", "title", "link", "body", "nav", "a", "span", "form", "input",
            "button", "main", "p", "h1", "h2", "dl", "dt", "dd", "table", "thead", "tbody", "tr",
            "th", "td", "code", "pre", "ul", "li", "label", "tfoot", "div", "select", "option"}
ATTACKS = [
    b"From: <script>alert(1)</script> <x@evil.example>\nSubject: <img src=http://evil.example/t.png>"
    b"\nContent-Type: text/html\n\n<html><body><script>alert(2)</script><img src='http://evil.example/p.gif'>"
    b"<a href='javascript:alert(3)'>click</a><iframe src='http://evil.example/'></iframe>"
    b"<style>body{background:url(http://evil.example/b)}</style><p onclick='alert(4)'>cheap</p></body></html>\n",
    b"Subject: =?utf-8?b?PHNjcmlwdD5hbGVydCg1KTwvc2NyaXB0Pg==?=\nFrom: a@b\n\n</pre><script>alert(6)</script>\n",
]


def test_hostile_messages_are_shown_inert(tmp_path, users_file):
    cases = [c.build() for c in hostile_cases.CASES if c.kind == "message"]
    raws = [raw for raw in cases if len(raw) <= 2_000_000] + ATTACKS
    db = tmp_path / "v.db"
    record(db, [(raw, UNSURE, "alice", "user") for raw in raws])
    scorer = FakeScorer()
    client = TestClient(make_app(db, users_file, "-", learn=scorer.learn, ping=scorer.ping))
    log_in(client, "alice")
    ids = [row.id for row in VerdictStore(db).history("alice", limit=1000)]
    assert len(ids) == len(raws)
    pages = [client.get(f"/message/{i}") for i in ids]
    pages += [client.get(f"/history?before={i + 1}") for i in ids[::10]]
    pages += [client.get(f"/review?before={i + 1}") for i in ids[::10]]
    for reply in pages:
        assert reply.status_code == 200
        tags = _Tags()
        tags.feed(reply.text)
        assert tags.tags <= OWN_TAGS, tags.tags - OWN_TAGS
        for name, value in tags.attrs:
            assert not name.startswith("on"), name
            if name in ("href", "src", "action"):
                assert value.startswith("/"), value
    shown = client.get(f"/message/{ids[0]}").text  # the last attack, newest first
    assert "&lt;/pre&gt;&lt;script&gt;alert(6)&lt;/script&gt;" in shown


def test_statistics_draw_inline_svg_with_the_threshold(site):
    client, _, _, _ = site
    log_in(client, "alice")
    page = client.get("/stats").text
    assert page.count("<svg") == 3 and "threshold 0.00" in page
    assert "only 3 spam messages learned" in page  # the training health, from PING


def test_a_damaged_store_is_named_on_the_page(tmp_path, users_file):
    db = tmp_path / "v.db"
    db.write_bytes(b"this is not a database at all" * 200)
    client = TestClient(make_app(db, users_file, "-", learn=None, ping=lambda u: {}))
    log_in(client, "alice")
    reply = client.get("/history")
    assert reply.status_code == 503 and "damaged" in reply.text and "move it aside" in reply.text


def test_a_locked_store_is_named_on_the_page_and_the_page_comes_back(site):
    """Another program holding the log exclusively (so that even a WAL reader waits):
    the page says so (its reads wait only READ_WAIT_MS, in the event loop); then it
    reads again."""
    import sqlite3

    client, _, ids, db = site
    page = client.get("/login")  # logged in, no page of the log read yet
    client.post("/login", data={"csrf": csrf_of(page.text), "name": "alice",
                                "password": PASSWORDS["alice"]}, follow_redirects=False)
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("PRAGMA locking_mode = EXCLUSIVE")
    other.execute("BEGIN EXCLUSIVE")
    try:
        for path in ("/history", "/review", f"/message/{ids['alice']}"):
            reply = client.get(path)
            assert reply.status_code == 503 and "locked" in reply.text, path
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert "alice&#x27;s offer" in client.get("/history").text


def test_the_users_file_is_written_atomically_owner_only(tmp_path):
    from typer.testing import CliRunner

    from textnb.cli import app

    path = tmp_path / "users.json"
    runner = CliRunner()
    result = runner.invoke(app, ["web-user", "add", "carol", "--users", str(path),
                                 "--password-stdin", "--admin"], input="carol-password\n")
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    entry = json.loads(path.read_text())["users"]["carol"]
    assert entry["admin"] is True and entry["hash"].startswith("$argon2id$")
    assert "carol-password" not in path.read_text()
    assert Accounts(path).verify("carol", "carol-password") == {"name": "carol", "admin": True}
    assert Accounts(path).verify("carol", "wrong") is None
    assert runner.invoke(app, ["web-user", "list", "--users", str(path)]).output == "carol (admin)\n"
    bad = runner.invoke(app, ["web-user", "add", "../x", "--users", str(path), "--password-stdin"],
                        input="long-enough\n")
    assert bad.exit_code != 0 and "not allowed" in bad.output
    assert runner.invoke(app, ["web-user", "remove", "carol", "--users", str(path)]).exit_code == 0
    assert Accounts(path).list() == [] and list(tmp_path.iterdir()) == [path]


# -- through a real scorer ------------------------------------------------------------


@pytest.fixture(scope="module")
def unsure_model_file(tmp_path_factory):
    """The sample model with an unsure band of 4 log-odds: unsure_message() falls in it."""
    import dataclasses

    from textnb.config import FilterConfig
    from textnb.mail.sources import iter_index
    from textnb.modelfile import store
    from textnb.spamfilter import SpamFilter

    from conftest import SAMPLE_INDEX

    config = FilterConfig()
    config = dataclasses.replace(config, decision=dataclasses.replace(config.decision,
                                                                      unsure_band=4.0))
    path = tmp_path_factory.mktemp("unsure-model") / "shared.tnb"
    store.save(SpamFilter(config).fit(iter_index(SAMPLE_INDEX)), path)
    return path


class PerUserScorer(Running):
    """A scorer with a model per user (ModelSet) recording into ``db``, on a thread."""

    def __init__(self, folder: Path, shared_model: Path, db: Path):
        (folder / "models").mkdir()
        self.recorder = VerdictRecorder(db).start()
        super().__init__(ModelSet(folder / "models", shared_model, flush_seconds=0.2),
                         str(folder / "scorer.sock"), timeout=5.0, reload_interval=0,
                         recorder=self.recorder)

    def __exit__(self, *exc):
        try:
            super().__exit__(*exc)
        finally:
            self.recorder.close()

    def counts(self, user):
        answer = ping(self.address, user=user)
        return int(answer["spam"]), int(answer["ham"])


def test_teaching_through_the_scorer_changes_the_model_by_that_message_once(
        tmp_path, users_file, unsure_model_file):
    from textnb.delivery.client import score_remote

    db = tmp_path / "verdicts.db"
    with PerUserScorer(tmp_path, unsure_model_file, db) as scorer:
        for user in ("alice", "bob"):
            assert score_remote(scorer.address, unsure_message(user), user=user).label == "unsure"
        assert _wait(lambda: len(VerdictStore(db).history(None)) == 2)
        before = {u: scorer.counts(u) for u in ("alice", "bob")}
        client = TestClient(make_app(db, users_file, scorer.address))
        token = log_in(client, "alice")
        (row,) = VerdictStore(db).history("alice")
        assert row.has_raw and row.label == "unsure"
        url = f"/message/{row.id}/teach"
        for _ in range(2):  # a second click changes nothing
            page = client.post(url, data={"action": "spam", "csrf": token}).text
            assert "taught as spam" in page and "not done" not in page
            spam, ham = before["alice"]
            assert scorer.counts("alice") == (spam + 1, ham)
        assert 'id="taught">as spam' in page and "already taught as spam" in page
        client.get(f"/message/{row.id}")  # nor does a reload
        assert scorer.counts("alice") == (spam + 1, ham)
        client.post(url, data={"action": "undo", "csrf": token})
        assert scorer.counts("alice") == before["alice"]
        assert scorer.counts("bob") == before["bob"]




DOVECOT_IMAP = Path("/usr/lib/dovecot/imap")


@pytest.mark.system  # a real Dovecot
@pytest.mark.slow
@pytest.mark.skipif(not (DOVECOT_IMAP.exists() and shutil.which("dovecot")),
                    reason="needs Dovecot's IMAP server: apt-get install dovecot-imapd")
@pytest.mark.skipif(os.getuid() != 0, reason="Dovecot's master must start as root")
def test_a_mail_password_logs_in_through_a_real_dovecot(users_file):
    """textnb web --imap: a name the users file lacks logs in with the password the IMAP
    server takes (a private Dovecot whose users all have the password 'secret'), sees
    only its own verdicts, and is no admin; a name in the users file is not asked of IMAP."""
    from helpers import free_port
    from test_learning_docs import dovecot_base_config

    root = Path(tempfile.mkdtemp(prefix="textnb-web-dovecot-"))
    try:
        root.chmod(0o755)
        for path in (root / "mail", root / "state"):
            path.mkdir(mode=0o755)
        shutil.chown(root / "mail", "nobody")
        port = free_port()
        config = root / "dovecot.conf"
        config.write_text(dovecot_base_config(root, port))
        db = root / "verdicts.db"
        record(db, [(unsure_message("carol"), UNSURE, "carol", "user"),
                    (unsure_message("alice"), UNSURE, "alice", "user")])
        subprocess.run(["dovecot", "-c", str(config)], check=True, timeout=60)
        try:
            assert _wait(lambda: _accepts(port))
            client = TestClient(make_app(db, users_file, "-", learn=FakeScorer().learn,
                                         ping=FakeScorer().ping, imap=("127.0.0.1", port)))

            def attempt(name, password):
                token = csrf_of(client.get("/login").text)
                return client.post("/login", data={"csrf": token, "name": name,
                                                   "password": password},
                                   follow_redirects=False)

            assert attempt("carol", "wrong").headers["location"].startswith("/login?error")
            assert attempt("alice", "secret").headers["location"].startswith("/login?error")
            reply = attempt("carol", "secret")
            assert reply.status_code == 303 and reply.headers["location"] == "/history"
            page = client.get("/history").text
            assert "carol&#x27;s offer" in page and "alice" not in page
            assert "(admin)" not in page
        finally:
            subprocess.run(["doveadm", "-c", str(config), "stop"], timeout=60)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def test_teaching_on_a_locked_log_names_the_lock_and_a_second_click_finishes_it(site):
    """Another program holding the log's write lock while alice teaches: the page says
    the log is locked (not a server error); clicking again once the lock is gone records
    the lesson, learned under one label however many clicks reached the scorer."""
    import sqlite3

    client, scorer, ids, db = site
    token = log_in(client, "alice")
    url = f"/message/{ids['alice']}/teach"
    other = sqlite3.connect(db, isolation_level=None, timeout=5)
    other.execute("BEGIN IMMEDIATE")  # the write lock: WAL readers go on, writers wait
    try:
        reply = client.post(url, data={"action": "spam", "csrf": token})
        assert reply.status_code == 503 and "locked" in reply.text
    finally:
        other.execute("ROLLBACK")
        other.close()
    reply = client.post(url, data={"action": "spam", "csrf": token})
    assert reply.status_code == 200 and "spam" in reply.text
    assert VerdictStore(db).get(ids["alice"], None).taught == "spam"
    # learned under one label, by one user, however many clicks reached the scorer
    assert list(scorer.state.values()) == ["spam"] and set(scorer.calls) == {("spam", "alice")}


def test_recording_a_lesson_on_a_locked_log_is_a_store_error(site):
    """The lock may come between the lesson reaching the scorer and the page recording
    it: marking the row (and reading the kept message) then names the lock, which the
    page shows as such; the lesson is in the model, and a second click records it."""
    import sqlite3

    from textnb.review.store import StoreError

    _, _, ids, db = site
    store = VerdictStore(db, wait_ms=50)
    assert store.raw(ids["alice"])  # the store's connection is open before the lock
    other = sqlite3.connect(db, isolation_level=None, timeout=5)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreError, match="locked"):
            store.mark(ids["alice"], "spam", "absent")
    finally:
        other.execute("ROLLBACK")
        other.close()
    store.mark(ids["alice"], "spam", "absent")
    assert store.get(ids["alice"], None).taught == "spam"
