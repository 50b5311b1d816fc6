"""The review page against what was tried on it: each test repeats one attempt (a
locked or damaged log while teaching, a log moved aside, parallel guesses, a forged
X-Forwarded-For, a removed login, a login posted from another origin, huge ids, an
unsafe start, a large message, the message page's sum, the statistics' hours, mixed
encodings, the shared model) and checks what the page does now."""

import asyncio
import os
import re
import sqlite3
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the review page's libraries: pip install -e '.[web]'")
pytest.importorskip("argon2", reason="the review page's libraries: pip install -e '.[web]'")

from starlette.testclient import TestClient  # noqa: E402

from textnb.delivery.verdict_headers import Verdict  # noqa: E402
from textnb.review import web as web_module  # noqa: E402
from textnb.review.accounts import Accounts  # noqa: E402
from textnb.review.guard import MAX_FAILURES  # noqa: E402
from textnb.review.recorder import VerdictRecorder  # noqa: E402
from textnb.review.store import VerdictStore, headers_of  # noqa: E402
from textnb.review.web import make_app  # noqa: E402

from test_review_web import (PASSWORDS, UNSURE, FakeScorer, _wait, csrf_of, log_in,  # noqa: E402,F401
                             record, unsure_message, users_file)


@pytest.fixture
def site(tmp_path, users_file):
    db = tmp_path / "verdicts.db"
    record(db, [(unsure_message("alice"), UNSURE, "alice", "user"),
                (unsure_message("bob"), UNSURE, "bob", "user")])
    scorer = FakeScorer()
    client = TestClient(make_app(db, users_file, "-", learn=scorer.learn, ping=scorer.ping),
                        base_url="http://127.0.0.1")
    ids = {row.user: row.id for row in VerdictStore(db).history(None)}
    return client, scorer, ids, db


def _teach(client, verdict, action, token, **extra):
    return client.post(f"/message/{verdict}/teach",
                       data={"action": action, "csrf": token, **extra})


# -- teaching and its record are one operation ------------------------------------------


def test_p1_teaching_on_a_locked_log_changes_neither_the_model_nor_the_log(site):
    client, scorer, ids, db = site
    token = log_in(client, "alice")
    other = sqlite3.connect(db, isolation_level=None, timeout=5)
    other.execute("BEGIN IMMEDIATE")  # another program's write lock
    try:
        reply = _teach(client, ids["alice"], "spam", token)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert reply.status_code == 503
    assert "not done" in reply.text and "locked" in reply.text and "nothing was taught" in reply.text
    assert scorer.calls == [] and scorer.state == {}  # the scorer was never told
    assert VerdictStore(db).get(ids["alice"], None).taught is None
    assert "nothing to undo" in _teach(client, ids["alice"], "undo", token).text
    assert "taught as spam" in _teach(client, ids["alice"], "spam", token).text
    assert "undone: forgotten again" in _teach(client, ids["alice"], "undo", token).text
    assert scorer.state == {} and scorer.calls == [("spam", "alice"), (None, "alice")]


def test_p1_teaching_on_a_damaged_log_changes_nothing(site):
    client, scorer, ids, db = site
    token = log_in(client, "alice")
    assert client.get(f"/message/{ids['alice']}").status_code == 200  # the log is open
    with open(db, "r+b") as damaged:
        damaged.write(b"this is no longer an SQLite file" * 4)
    reply = _teach(client, ids["alice"], "spam", token)
    assert reply.status_code == 503 and "not done" in reply.text
    assert "damaged" in reply.text or "not a database" in reply.text
    assert scorer.calls == [] and scorer.state == {}


def test_p1_a_lesson_the_log_cannot_commit_is_taken_back_at_the_scorer(site, monkeypatch):
    """The log refuses the commit after the scorer learned (a full disk, an I/O error):
    the scorer is told the inverse, so the model is as it was and the row unmarked."""
    client, scorer, ids, db = site
    token = log_in(client, "alice")
    real_end = VerdictStore.end_lesson

    def end_lesson(self, commit):
        if commit:
            real_end(self, False)
            from textnb.review.store import StoreError
            raise StoreError("the disk of the verdict log is full (database or disk is full)")
        real_end(self, commit)

    monkeypatch.setattr(VerdictStore, "end_lesson", end_lesson)
    reply = _teach(client, ids["alice"], "spam", token)
    assert reply.status_code == 503 and "put back: nothing changed" in reply.text
    assert scorer.calls == [("spam", "alice"), (None, "alice")] and scorer.state == {}
    assert VerdictStore(db).get(ids["alice"], None).taught is None
    monkeypatch.setattr(VerdictStore, "end_lesson", real_end)
    assert "taught as spam" in _teach(client, ids["alice"], "spam", token).text
    assert list(scorer.state.values()) == ["spam"]


# -- a log moved aside or deleted while running -------------------------------------------


def _page_follows_a_replaced_log(client, scorer, db, replace):
    token = log_in(client, "alice")
    assert "alice&#x27;s offer 1" in client.get("/history").text  # the page has it open
    recorder = VerdictRecorder(db).start()
    try:
        assert recorder.submit(unsure_message("alice", 1), UNSURE, user="alice", model="user")
        assert _wait(lambda: recorder.counts["recorded"] == 1)
        replace()
        assert recorder.submit(unsure_message("alice", 2), UNSURE, user="alice", model="user")

        def page_shows_the_new_log():
            page = client.get("/history")
            return page.status_code == 200 and "alice&#x27;s offer 2" in page.text

        assert _wait(page_shows_the_new_log), client.get("/history").text
        page = client.get("/history").text
        assert "begun anew" in page and "alice&#x27;s offer 1" not in page
        (row,) = VerdictStore(db).history("alice")
        assert "taught as spam" in _teach(client, row.id, "spam", token).text
        assert scorer.calls == [("spam", "alice")]
        assert recorder.counts["recorded"] == 2
    finally:
        recorder.close()
    return row


def test_p2_a_log_moved_aside_while_running_is_left_whole_and_a_new_one_begins(site):
    client, scorer, ids, db = site
    aside = db.with_name("verdicts.db.damaged")
    _page_follows_a_replaced_log(client, scorer, db, lambda: os.rename(db, aside))
    old = sqlite3.connect(aside)
    assert old.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    # the moved file holds what was recorded before the move, and nothing after
    assert sorted(s for (s,) in old.execute("SELECT subject FROM verdicts")) == [
        "alice's offer 1", "alice's offer 1", "bob's offer 1"]
    assert VerdictStore(db).events()  # the new log says it was begun anew


def test_p2_a_deleted_log_begins_anew_and_says_so_after_a_restart(site, users_file):
    client, scorer, ids, db = site
    row = _page_follows_a_replaced_log(client, scorer, db, lambda: db.unlink())
    restarted = TestClient(make_app(db, users_file, "-", learn=scorer.learn, ping=scorer.ping))
    log_in(restarted, "alice")
    page = restarted.get("/history").text
    assert f'id="row-{row.id}"' in page and "begun anew" in page
    assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_p2_a_missing_log_is_named_and_not_created_by_the_page(site):
    client, scorer, ids, db = site
    token = log_in(client, "alice")
    client.get("/history")
    db.unlink()
    for reply in (client.get("/history"), _teach(client, ids["alice"], "spam", token)):
        assert reply.status_code == 503 and "missing" in reply.text
    assert not db.exists() and scorer.calls == []


# -- logins ------------------------------------------------------------------------------


def test_p3_thirty_wrong_passwords_at_once_are_throttled_before_hashing(site, monkeypatch):
    import httpx

    client, scorer, ids, db = site
    app = client.app
    checked, running, most = [], [0], [0]
    real_verify = Accounts.verify

    def verify(self, name, password):
        running[0] += 1
        most[0] = max(most[0], running[0])
        try:
            checked.append(name)
            return real_verify(self, name, password)
        finally:
            running[0] -= 1

    monkeypatch.setattr(Accounts, "verify", verify)

    async def guess_thirty(name_of):
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            forms = [await http.get("/login") for _ in range(30)]
            tokens = [csrf_of(form.text) for form in forms]
            return await asyncio.gather(*(
                http.post("/login", data={"csrf": t, "name": name_of(i), "password": "wrong"},
                          headers={"Cookie": f"textnb_login={t}"})
                for i, t in enumerate(tokens)))

    replies = asyncio.run(guess_thirty(lambda i: "alice"))  # one name
    codes = [r.status_code for r in replies]
    assert codes.count(429) == 30 - MAX_FAILURES and len(checked) == MAX_FAILURES, codes
    from textnb.review.guard import HASHES_AT_ONCE

    assert most[0] <= HASHES_AT_ONCE
    checked.clear()
    replies = asyncio.run(guess_thirty(lambda i: f"user{i}"))  # thirty names, one address
    assert [r.status_code for r in replies].count(429) == 30 and checked == []


def _serve(app, **options):
    import uvicorn

    from textnb.commands.daemons import server_options
    from helpers import free_port

    port = free_port()
    config = uvicorn.Config(app, **server_options("127.0.0.1", port, options.get("proxy")))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    assert _wait(lambda: server.started)
    return server, thread, f"http://127.0.0.1:{port}"


def _guess(http, name, forwarded):
    token = csrf_of(http.get("/login").text)
    return http.post("/login", data={"csrf": token, "name": name, "password": "wrong"},
                     headers={"X-Forwarded-For": forwarded}).status_code


@pytest.mark.parametrize("proxy", [None, "127.0.0.1"])
def test_p4_x_forwarded_for_names_the_client_only_from_the_named_proxy(site, proxy):
    import httpx

    client, _, _, _ = site
    server, thread, base = _serve(client.app, proxy=proxy)
    try:
        with httpx.Client(base_url=base) as http:
            codes = [_guess(http, f"name{i}", f"10.0.0.{i}") for i in range(MAX_FAILURES + 1)]
            if proxy is None:  # the header is ignored: all six from 127.0.0.1
                assert codes == [303] * MAX_FAILURES + [429]
            else:  # each client its own address: nobody else is locked out
                assert codes == [303] * (MAX_FAILURES + 1)
                assert [_guess(http, f"other{i}", "10.0.0.99")
                        for i in range(MAX_FAILURES + 1)] == [303] * MAX_FAILURES + [429]
                assert _guess(http, "another", "10.0.0.100") == 303
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_p5_removing_a_login_or_changing_its_password_ends_its_sessions(site, tmp_path):
    client, scorer, ids, db = site
    users = tmp_path / "own-users.json"
    accounts = Accounts(users)
    accounts.add("alice", PASSWORDS["alice"])
    accounts.add("bob", PASSWORDS["bob"])
    own = TestClient(make_app(db, users, "-", learn=scorer.learn, ping=scorer.ping))
    token = log_in(own, "alice")
    accounts.add("alice", "a-new-password")  # a new password
    assert own.get("/history").url.path == "/login"
    reply = own.post(f"/message/{ids['alice']}/teach", data={"action": "spam", "csrf": token},
                     follow_redirects=False)
    assert reply.headers["location"] == "/login" and scorer.calls == []
    token = log_in(own, "bob")
    accounts.remove("bob")  # the login removed
    assert own.get("/review").url.path == "/login"
    assert own.post(f"/message/{ids['bob']}/teach", data={"action": "spam", "csrf": token},
                    follow_redirects=False).headers["location"] == "/login"
    assert scorer.calls == []


def test_p6_a_login_posted_from_another_origin_is_refused(site):
    client, _, _, _ = site
    for headers in ({"Origin": "http://127.0.0.1:8080", "Sec-Fetch-Site": "same-site"},
                    {"Origin": "http://127.0.0.1:8080"}, {"Sec-Fetch-Site": "cross-site"},
                    {"Origin": "null"}):
        token = csrf_of(client.get("/login").text)
        reply = client.post("/login", data={"csrf": token, "name": "bob",
                                            "password": PASSWORDS["bob"]},
                            headers=headers, follow_redirects=False)
        assert reply.status_code == 403, headers
        assert "textnb_session" not in reply.headers.get("set-cookie", "")
    # a token this server never issued, set as the cookie by another page of the host
    reply = client.post("/login", data={"csrf": "made-up", "name": "bob",
                                        "password": PASSWORDS["bob"]},
                        headers={"Cookie": "textnb_login=made-up"}, follow_redirects=False)
    assert reply.status_code == 403
    token = csrf_of(client.get("/login").text)
    reply = client.post("/login", data={"csrf": token, "name": "bob",
                                        "password": PASSWORDS["bob"]},
                        headers={"Origin": "http://127.0.0.1", "Sec-Fetch-Site": "same-origin"},
                        follow_redirects=False)
    assert reply.status_code == 303 and reply.headers["location"] == "/history"


# -- what a request may carry --------------------------------------------------------------


def test_p7_huge_ids_are_a_404_not_a_500(site):
    client, scorer, ids, db = site
    token = log_in(client, "root")
    for huge in (str(2**63), str(2**64 + 1), "9" * 40):
        assert client.get(f"/message/{huge}").status_code == 404
        assert _teach(client, huge, "spam", token).status_code == 404
        assert client.get(f"/history?before={huge}").status_code == 200
        assert client.get(f"/review?before={huge}").status_code == 200
    for odd in ("²", "١٢", "-1", "0", "1e3", " 1"):
        assert client.get(f"/message/{odd}").status_code == 404
    reply = client.post("/review", data={"action": "spam", "csrf": token,
                                         "ids": [str(2**63), "²", "١", str(2**70)]})
    assert reply.status_code == 200 and "0 taught as spam" in reply.text
    assert scorer.calls == []


def test_p8_an_unsafe_start_is_refused_naming_the_fix(tmp_path):
    from typer.testing import CliRunner

    from textnb.cli import app

    def said(result):
        return " ".join(result.output.replace("│", " ").split())

    db = tmp_path / "v.db"
    VerdictStore(db).close()
    users = tmp_path / "users.json"
    runner = CliRunner()
    result = runner.invoke(app, ["web", "--record", str(db), "--users", str(users),
                                 "--host", "0.0.0.0", "--allow-remote"])
    assert result.exit_code == 2 and "--secure-cookies" in said(result)
    result = runner.invoke(app, ["web", "--record", str(db), "--users", str(users)])
    assert result.exit_code != 0 and "does not exist" in said(result)
    assert f"textnb web-user add NAME --users {users}" in said(result)
    Accounts(users).add("alice", PASSWORDS["alice"])
    users.chmod(0o644)
    result = runner.invoke(app, ["web", "--record", str(db), "--users", str(users)])
    assert result.exit_code != 0 and f"chmod 600 {users}" in said(result)


# -- what the pages show ---------------------------------------------------------------------


def _big_message(size: int) -> bytes:
    head = b"From: Big <big@example.org>\nSubject: a large one\n\n"
    line = b"the quick brown fox jumps over the lazy dog again and again\n"
    return (head + line * (size // len(line) + 1))[:size]


def test_p9_a_large_message_is_parsed_once_off_the_event_loop_and_its_cut_is_shown(
        tmp_path, users_file, monkeypatch):
    db = tmp_path / "v.db"
    record(db, [(_big_message(10_000_001), UNSURE, "alice", "user"),
                (unsure_message("alice"), UNSURE, "alice", "user")])
    parsed, threads = [], []
    real = web_module.inert_text

    def counted(raw):
        parsed.append(len(raw))
        threads.append(threading.current_thread().name)
        return real(raw)

    monkeypatch.setattr(web_module, "inert_text", counted)
    client = TestClient(make_app(db, users_file, "-", learn=FakeScorer().learn,
                                 ping=FakeScorer().ping))
    log_in(client, "alice")
    big = max(VerdictStore(db).history("alice"), key=lambda row: row.size)
    for _ in range(3):
        page = client.get(f"/message/{big.id}").text
    assert parsed == [10_000_001]  # once, however often it is reloaded
    assert 'id="cut"' in page and "10,000,001" in page and 'id="body-cut"' in page
    assert all(name.startswith("AnyIO worker thread") for name in threads), threads


def test_p11_the_message_page_adds_prior_clues_and_rest_up_to_the_score(tmp_path, users_file):
    db = tmp_path / "v.db"
    record(db, [(unsure_message("alice"), Verdict("unsure", 0.78, 0.69, 0.0), "alice", "user")])
    store = VerdictStore(db)
    (row,) = store.history("alice")
    clues = [["token:a", 1.5], ["token:b", 1.0], ["token:c", 0.9], ["token:d", 0.6],
             ["token:e", 0.4], ["token:f", 0.3], ["token:g", 0.2], ["token:h", 0.1]]
    store.set_clues(row.id, clues, -0.35)
    client = TestClient(make_app(db, users_file, "-", learn=FakeScorer().learn,
                                 ping=FakeScorer().ping))
    log_in(client, "alice")
    page = client.get(f"/message/{row.id}").text
    table = page[page.index('id="clues"'):page.index("</table>", page.index('id="clues"'))]
    parts = [float(x) for x in re.findall(r'class="num[^"]*"[^>]*>([+-]\d+\.\d+)<', table)]
    assert len(parts) == 1 + 8 + 1 + 1  # prior, clues, rest; the sum
    assert "prior" in table and "rest of the evidence" in table
    assert parts[-1] == 0.78 and abs(sum(parts[:-1]) - 0.78) < 0.005
    assert parts[0] == -0.35 and parts[-2] == round(0.78 + 0.35 - 5.0, 3)


def test_p12_statistics_label_each_bar_with_the_hour_and_day_it_counts(tmp_path, users_file):
    def at(text):
        return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()

    db = tmp_path / "v.db"
    recorder = VerdictRecorder(db, clock=lambda: at("2026-12-07T06:05:00")).start()
    recorder.submit(unsure_message("alice"), UNSURE, user="alice", model="user")
    recorder.close()
    for now in ("2026-12-07T06:06:00", "2026-12-07T08:30:00", "2026-12-08T05:59:00"):
        client = TestClient(make_app(db, users_file, "-", learn=FakeScorer().learn,
                                     ping=FakeScorer().ping, clock=lambda: at(now)))
        log_in(client, "alice")
        page = client.get("/stats").text
        assert "<title>07 06h: 1 unsure</title>" in page, now
        assert "<title>12-07: 1 unsure</title>" in page, now


MIXED = [
    (b"Subject: \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e =?UTF-8?Q?M=C3=A4rz?=", "日本語 März"),
    (b"Subject: =?UTF-8?B?5pel5pys6Kqe?= und M\xc3\xa4rz", "日本語 und März"),
    (b"Subject: Re: =?iso-8859-1?q?M=E4rz?= =?utf-8?q?_2026?= Gr\xc3\xbc\xc3\x9fe",
     "Re: März 2026 Grüße"),
    (b"Subject: =?utf-8?q?caf=C3=A9?=\n =?utf-8?b?IGF1IGxhaXQ=?=", "café au lait"),
    (b"Subject: =?no-such-charset?q?abc?= stays", "=?no-such-charset?q?abc?= stays"),
]


@pytest.mark.parametrize("header, shown", MIXED)
def test_p13_subjects_mixing_raw_utf8_and_encoded_words_are_decoded(header, shown):
    assert headers_of(b"From: a@b\n" + header + b"\n\nbody\n")[1] == shown


def test_p13_the_page_shows_a_mixed_subject_decoded(tmp_path, users_file):
    db = tmp_path / "v.db"
    record(db, [(b"From: x@y\n" + MIXED[0][0] + b"\n\nhello\n", UNSURE, "alice", "user")])
    client = TestClient(make_app(db, users_file, "-", learn=FakeScorer().learn,
                                 ping=FakeScorer().ping))
    log_in(client, "alice")
    assert "日本語 März" in client.get("/history").text


def test_p14_an_admin_is_asked_to_confirm_teaching_the_shared_model(tmp_path, users_file):
    db = tmp_path / "v.db"
    record(db, [(unsure_message("nobody"), UNSURE, None, "shared"),
                (unsure_message("alice"), UNSURE, "alice", "shared")])
    scorer = FakeScorer()
    client = TestClient(make_app(db, users_file, "-", learn=scorer.learn, ping=scorer.ping))
    token = log_in(client, "root")
    rows = {row.user: row.id for row in VerdictStore(db).history(None)}
    page = client.get(f"/message/{rows['']}").text
    assert 'id="shared-warning"' in page and "_shared" in page
    assert 'id="shared-warning"' not in client.get(f"/message/{rows['alice']}").text
    asked = _teach(client, rows[""], "spam", token)
    assert asked.status_code == 200 and 'id="confirm-shared"' in asked.text
    assert "every new user" in asked.text and scorer.calls == []
    bulk = client.post("/review", data={"action": "ham", "csrf": token,
                                        "ids": [str(rows[""]), str(rows["alice"])]}).text
    assert "1 taught as ham" in bulk and "1 not done: verdicts of the shared model" in bulk
    assert scorer.calls == [("ham", "alice")]  # alice's own lesson goes to her model
    done = _teach(client, rows[""], "spam", token, confirm="shared")
    assert "taught as spam" in done.text and scorer.calls[-1] == ("spam", None)


# -- the review queue as peers' users expect it ------------------------------------------


def _queue_ids(html):
    return [int(i) for i in re.findall(r'name="ids" value="(\d+)"', html)]


def test_the_queue_comes_closest_to_the_threshold_first_and_pages_on(tmp_path, users_file,
                                                                     monkeypatch):
    monkeypatch.setattr(web_module, "PAGE_ROWS", 4)
    db = tmp_path / "v.db"
    odds = [3.5, -0.2, 1.9, 0.05, -1.5, 0.7, 6.0, -0.7]
    record(db, [(unsure_message("alice", n), Verdict("spam" if lo > 0 else "unsure", lo, 0.5, 0.0),
                 "alice", "user") for n, lo in enumerate(odds)])
    client = TestClient(make_app(db, users_file, "-", learn=FakeScorer().learn,
                                 ping=FakeScorer().ping))
    log_in(client, "alice")
    by_id = {row.id: row.log_odds for row in VerdictStore(db).history("alice")}
    page = client.get("/review").text
    first = _queue_ids(page)
    more = re.search(r'href="(/review\?after=[^"]+)" id="older"', page).group(1)
    second = _queue_ids(client.get(more.replace("&amp;", "&")).text)
    shown = [abs(by_id[i]) for i in first + second]
    assert shown == sorted(abs(lo) for lo in odds) and len(set(first + second)) == 8


def test_the_queue_filters_by_sender_subject_verdict_and_day(tmp_path, users_file):
    def at(text):
        return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()

    db = tmp_path / "v.db"
    for when, sender, subject, label in (
            ("2026-12-01T10:00:00", "shop@a.example", "invoice 1", "spam"),
            ("2026-12-02T10:00:00", "news@b.example", "invoice 2", "unsure"),
            ("2026-12-03T10:00:00", "shop@a.example", "meeting", "unsure")):
        recorder = VerdictRecorder(db, clock=lambda w=when: at(w)).start()
        raw = f"From: {sender}\nSubject: {subject}\n\nhello\n".encode()
        recorder.submit(raw, Verdict(label, 0.5, 0.6, 0.0), user="alice", model="user")
        recorder.close()
    client = TestClient(make_app(db, users_file, "-", learn=FakeScorer().learn,
                                 ping=FakeScorer().ping))
    log_in(client, "alice")

    def subjects(query):
        page = client.get("/review?" + query).text
        return sorted(re.findall(r'<td class="c-subject"><a href="/message/\d+">([^<]+)</a>',
                                 page.split("Recently taught")[0]))

    assert subjects("") == ["invoice 1", "invoice 2", "meeting"]
    assert subjects("sender=shop%40a") == ["invoice 1", "meeting"]
    assert subjects("subject=invoice&verdict=unsure") == ["invoice 2"]
    assert subjects("since=2026-12-02&until=2026-12-02") == ["invoice 2"]
    assert subjects("since=2026-12-02") == ["invoice 2", "meeting"]
    assert subjects("verdict=nonsense&since=yesterday") == ["invoice 1", "invoice 2", "meeting"]
    assert subjects("after=nonsense") == ["invoice 1", "invoice 2", "meeting"]


def test_the_queue_teaches_all_on_a_page_and_undoes_in_bulk(tmp_path, users_file):
    db = tmp_path / "v.db"
    record(db, [(unsure_message("alice", n), UNSURE, "alice", "user") for n in range(3)]
           + [(unsure_message("bob", 9), UNSURE, "bob", "user")])
    scorer = FakeScorer()
    client = TestClient(make_app(db, users_file, "-", learn=scorer.learn, ping=scorer.ping))
    token = log_in(client, "alice")
    page = client.get("/review").text
    shown = re.findall(r'name="shown" value="(\d+)"', page)
    bobs = str(VerdictStore(db).history("bob")[0].id)
    page = client.post("/review", data={"csrf": token, "all": "ham",
                                        "shown": shown + [bobs]}).text
    assert "3 taught as ham" in page and _queue_ids(page) == []
    assert scorer.calls == [("ham", "alice")] * 3  # bob's id, slipped in, is not hers
    undo = re.findall(r'name="undo_ids" value="(\d+)"', page)
    assert len(undo) == 3
    page = client.post("/review", data={"csrf": token, "action": "undo",
                                        "undo_ids": undo[:2]}).text
    assert "2 undone" in page and len(_queue_ids(page)) == 2
    page = client.post("/review", data={"csrf": token, "one": undo[2]}).text
    assert "1 undone" in page and len(_queue_ids(page)) == 3 and scorer.state == {}


def test_the_pages_show_local_time_and_count_its_hours_and_days(tmp_path, users_file):
    from zoneinfo import ZoneInfo

    def at(text):
        return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()

    db = tmp_path / "v.db"
    for n, when in enumerate(("2026-12-06T23:30:00", "2026-12-07T06:05:00")):
        recorder = VerdictRecorder(db, clock=lambda w=when: at(w)).start()
        recorder.submit(unsure_message("alice", n), UNSURE, user="alice", model="user")
        recorder.close()
    client = TestClient(make_app(db, users_file, "-", learn=FakeScorer().learn,
                                 ping=FakeScorer().ping, zone=ZoneInfo("Europe/Berlin"),
                                 clock=lambda: at("2026-12-07T08:30:00")))
    log_in(client, "alice")
    history = client.get("/history").text
    assert "Time (CET)" in history
    assert "2026-12-07 07:05:00" in history and "2026-12-07 00:30:00" in history
    stats = client.get("/stats").text
    assert "<title>07 07h: 1 unsure</title>" in stats and "<title>07 00h: 1 unsure</title>" in stats
    assert "<title>12-07: 2 unsure</title>" in stats  # both on the 7th by the local clock
    queue = client.get("/review?since=2026-12-07&until=2026-12-07").text
    assert len(_queue_ids(queue)) == 2
    message = client.get(f"/message/{VerdictStore(db).history('alice')[0].id}").text
    assert "2026-12-07 07:05:00 CET" in message
