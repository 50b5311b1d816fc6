"""Releasing held mail from the review page: Release and Release-and-teach-as-ham through
Starlette's TestClient and textnb-release with a fake postqueue and postsuper on PATH
(tests/test_release.py has the command and the milter's record)."""

import re
import sqlite3

import pytest

starlette = pytest.importorskip("starlette", reason="the review page's libraries: "
                                "pip install -e '.[web]'")
pytest.importorskip("argon2", reason="the review page's libraries: pip install -e '.[web]'")

from test_release import RELEASE, SPAM, fake_queue  # noqa: E402,F401  (a fixture)
from textnb.review.recorder import VerdictRecorder  # noqa: E402
from textnb.review.store import VerdictStore  # noqa: E402
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
