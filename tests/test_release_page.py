"""Releasing held mail from the review page: Release and Release-and-teach-as-ham, one
message from its page or a selection from the held queue, through Starlette's
TestClient and textnb-release with a fake postqueue and postsuper on PATH
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


# -- releasing a selection from the held queue ----------------------------------------------

def release_selected(client, csrf, ids, action="release", status=200, **extra):
    """POST the held queue's bulk form; RETURNS the answer's page."""
    data = {"action": action, "ids": [str(i) for i in ids], **extra}
    if csrf is not None:
        data["csrf"] = csrf
    reply = client.post("/review/release?held=1", data=data, follow_redirects=False)
    assert reply.status_code == status, reply.text
    return reply.text


def outcomes(page) -> list[tuple[str, str]]:
    """(outcome, what happened) of each row of the result page, in the selection's order."""
    return [(re.search(r'<td class="c-outcome">(.*?)</td>', row).group(1),
             re.search(r'<td class="c-said">(.*?)</td>', row, re.S).group(1))
            for row in re.findall(r'<tr class="outcome".*?</tr>', page, re.S)]


def test_the_held_queue_offers_release_of_the_selected_and_says_the_bound(held_site):
    client, _, ids, _ = held_site
    log_in(client, "alice")
    held = client.get("/review?held=1").text
    assert 'id="bulk-release"' in held and 'id="bulk-release-ham"' in held
    assert 'formaction="/review/release?held=1"' in held and "at most 100 at a time" in held
    assert held.count('name="ids"') == 3  # a box on each held row
    whole = client.get("/review").text  # the whole queue: teach, and a hint where to release
    assert 'id="bulk-release"' not in whole and 'id="release-hint"' in whole


def test_a_mixed_selection_releases_what_is_held_and_says_why_not_for_the_rest(
        held_site, fake_queue):
    client, scorer, ids, db = held_site
    csrf = log_in(client, "alice")
    asked = [ids["alice", "1"], ids["alice", "2"], ids["alice", "3"], ids["alice", "4"],
             ids["bob", "1"], 99999, "1 OR 1=1"]
    page = release_selected(client, csrf, asked)
    assert [outcome for outcome, _ in outcomes(page)] == [
        "released", "already released", "not held", "not held", "not yours", "not yours",
        "not yours"]
    said = dict(zip(map(str, asked), (s for _, s in outcomes(page))))
    assert "no longer on hold: released already" in said[str(ids["alice", "2"])]
    assert "no longer in the mail queue" in said[str(ids["alice", "3"])]
    assert "rejected this message in SMTP" in said[str(ids["alice", "4"])]
    # bob's message answers as one that does not exist, and shows nothing of it
    assert said[str(ids["bob", "1"])] == said["99999"] and "bob" not in page
    assert 'id="summary">1 released, 1 already released, 2 not held, 3 not yours<' in page
    assert fake_queue.queue == {"3F1B42C1A58": "deferred", "4AB17C2D9": "deferred",
                                "3Pm6fd3Y5nz2cYr": "hold"}
    assert [c for c in fake_queue.calls if c.startswith("postsuper")] == [
        "postsuper -H 3F1B42C1A58"]
    assert [row_of(db, ids["alice", n]).action for n in "1234"] == [
        "released", "quarantined", "quarantined", "rejected"]
    assert row_of(db, ids["bob", "1"]).action == "quarantined" and scorer.calls == []
    again = release_selected(client, csrf, [ids["alice", "1"], ids["alice", "1"]])
    assert outcomes(again) == [("already released", "not done: already released")]
    assert fake_queue.calls.count("postsuper -H 3F1B42C1A58") == 1


def test_release_and_teach_as_ham_in_bulk_takes_back_the_lesson_of_each_that_fails(
        held_site, fake_queue):
    """root (an admin) releases alice's and bob's held mail, with alice's released-already
    message between them: its lesson is given, its release fails, and that message alone
    is put back, lesson and log record; the ones either side are released and taught."""
    client, scorer, ids, db = held_site
    csrf = log_in(client, "root")
    page = release_selected(client, csrf, [ids["alice", "1"], ids["alice", "2"],
                                           ids["bob", "1"]], action="release-ham")
    assert [outcome for outcome, _ in outcomes(page)] == [
        "released and taught as ham", "already released", "released and taught as ham"]
    assert "the scorer was put back: nothing changed" in outcomes(page)[1][1]
    assert '<td class="c-user">bob</td>' in page  # an admin sees whose each one was
    assert fake_queue.queue["3F1B42C1A58"] == fake_queue.queue["3Pm6fd3Y5nz2cYr"] == "deferred"
    assert scorer.calls == [("ham", "alice"), ("ham", "alice"), (None, "alice"), ("ham", "bob")]
    assert [(r.action, r.taught) for r in (row_of(db, ids[k]) for k in
                                           (("alice", "1"), ("alice", "2"), ("bob", "1")))] == [
        ("released", "ham"), ("quarantined", None), ("released", "ham")]
    assert 'href="/review?held=1" id="back"' in page


def test_a_release_command_that_fails_for_one_message_leaves_the_others(
        held_site, fake_queue, tmp_path, users_file):  # noqa: F811
    """The command fails (status 1) for alice's message: the page says why, and bob's
    and the one with a hostile queue id in the log are each answered on their own."""
    _, scorer, ids, db = held_site
    failing = tmp_path / "release-or-fail"
    failing.write_text(f"#!/bin/sh\nif [ \"$1\" = 3F1B42C1A58 ]; then\n"
                       f"  echo 'postsuper -H failed: queue file is locked'; exit 1\nfi\n"
                       f"exec {' '.join(RELEASE)} \"$1\"\n")
    failing.chmod(0o755)
    with sqlite3.connect(db) as raw_db:
        raw_db.execute("UPDATE verdicts SET queue_id = '-d ALL' WHERE id = ?",
                       (ids["alice", "3"],))
    client = TestClient(make_app(db, users_file, "unused.sock", learn=scorer.learn,
                                 release_command=[str(failing)]), base_url="http://127.0.0.1")
    csrf = log_in(client, "root")
    page = release_selected(client, csrf, [ids["alice", "1"], ids["alice", "3"],
                                           ids["bob", "1"]], action="release-ham")
    assert outcomes(page) == [
        ("failed", "not done: the release command failed (status 1): postsuper -H failed: "
                   "queue file is locked; the scorer was put back: nothing changed"),
        ("failed", "not done: no Postfix queue id was recorded for this message; release "
                   "it with postsuper -H"),
        ("released and taught as ham", "released; taught as ham")]
    assert fake_queue.queue["3F1B42C1A58"] == "hold"
    assert fake_queue.queue["3Pm6fd3Y5nz2cYr"] == "deferred"
    assert (row_of(db, ids["alice", "1"]).action, row_of(db, ids["alice", "1"]).taught) == (
        "quarantined", None)
    assert scorer.state == {("bob", held_message("bob", 1)): "ham"}


def test_a_user_cannot_release_anothers_mail_in_bulk(held_site, fake_queue):
    client, scorer, ids, db = held_site
    csrf = log_in(client, "alice")
    page = release_selected(client, csrf, [ids["bob", "1"]], action="release-ham")
    assert outcomes(page) == [("not yours", "not done: no message of yours has this id")]
    assert fake_queue.calls == [] and scorer.calls == []
    assert row_of(db, ids["bob", "1"]).action == "quarantined"
    assert "statement" not in page.split('id="outcomes"')[1]  # not even its subject


def test_a_bulk_release_without_the_csrf_token_or_from_another_site_is_refused(
        held_site, fake_queue):
    client, _, ids, db = held_site
    csrf = log_in(client, "alice")
    assert "CSRF token missing" in release_selected(client, None, [ids["alice", "1"]],
                                                    status=403)
    assert "CSRF token missing" in release_selected(client, "forged", [ids["alice", "1"]],
                                                    status=403)
    reply = client.post("/review/release", data={"csrf": csrf, "action": "release",
                                                 "ids": [ids["alice", "1"]]},
                        headers={"Sec-Fetch-Site": "cross-site"})
    assert reply.status_code == 403
    client.cookies.clear()  # signed out: the login page, and nothing released
    reply = client.post("/review/release", data={"csrf": csrf, "action": "release",
                                                 "ids": [ids["alice", "1"]]},
                        follow_redirects=False)
    assert reply.status_code == 303 and reply.headers["location"] == "/login"
    assert fake_queue.calls == [] and row_of(db, ids["alice", "1"]).action == "quarantined"


def test_more_than_a_hundred_messages_at_once_are_refused_whole(held_site, fake_queue):
    client, _, ids, _ = held_site
    csrf = log_in(client, "root")
    many = [ids["alice", "1"]] + list(range(10_000, 10_100))
    page = release_selected(client, csrf, many, status=400)
    assert ("101 messages were selected, and at most 100 are released at a time: nothing "
            "was released") in page
    assert fake_queue.calls == []
    page = release_selected(client, csrf, many[:100])  # a hundred is within the bound
    assert [outcome for outcome, _ in outcomes(page)] == ["released"] + ["no such message"] * 99


def test_an_empty_selection_or_an_unknown_action_releases_nothing(held_site, fake_queue):
    client, _, ids, _ = held_site
    csrf = log_in(client, "alice")
    reply = client.post("/review/release?held=1", data={"csrf": csrf, "action": "release"},
                        follow_redirects=False)
    assert reply.status_code == 303
    assert reply.headers["location"].startswith("/review?notice=nothing%20selected")
    assert reply.headers["location"].endswith("&held=1")
    release_selected(client, csrf, [ids["alice", "1"]], action="spam", status=400)
    assert fake_queue.calls == []


def test_a_bulk_lesson_to_the_shared_model_asks_to_confirm_first(tmp_path, users_file,  # noqa: F811
                                                                 fake_queue):
    db = tmp_path / "verdicts.db"
    recorder = VerdictRecorder(db).start()
    recorder.submit(held_message("list", 1), SPAM, user="", model="shared", source="milter",
                    action="quarantined", queue_id="3F1B42C1A58")
    recorder.submit(held_message("alice", 2), SPAM, user="alice", model="user",
                    source="milter", action="quarantined", queue_id="3Pm6fd3Y5nz2cYr")
    recorder.close()
    scorer = FakeScorer()
    client = TestClient(make_app(db, users_file, "unused.sock", learn=scorer.learn,
                                 release_command=RELEASE), base_url="http://127.0.0.1")
    csrf = log_in(client, "root")
    shared, alices = sorted(row.id for row in VerdictStore(db).history(None))
    page = release_selected(client, csrf, [shared, alices], action="release-ham")
    assert 'id="confirm-shared"' in page and "list&#39;s statement 1" in page
    assert "alice&#39;s statement 2" not in page  # only the shared model's are listed
    assert f'name="ids" value="{shared}"' in page and f'name="ids" value="{alices}"' in page
    assert fake_queue.calls == [] and scorer.calls == []
    page = release_selected(client, csrf, [shared, alices], action="release-ham",
                            confirm="shared")
    assert [outcome for outcome, _ in outcomes(page)] == ["released and taught as ham"] * 2
    assert scorer.calls == [("ham", None), ("ham", "alice")]


def test_releasing_a_shared_models_verdict_without_a_lesson_asks_nothing(
        tmp_path, users_file, fake_queue):  # noqa: F811
    db = tmp_path / "verdicts.db"
    recorder = VerdictRecorder(db).start()
    recorder.submit(held_message("list", 1), SPAM, user="", model="shared", source="milter",
                    action="quarantined", queue_id="3F1B42C1A58")
    recorder.close()
    client = TestClient(make_app(db, users_file, "unused.sock", learn=FakeScorer().learn,
                                 release_command=RELEASE), base_url="http://127.0.0.1")
    csrf = log_in(client, "root")
    page = release_selected(client, csrf, [VerdictStore(db).history(None)[0].id])
    assert outcomes(page) == [("released", "released")]


# -- the bulk release's loop, on its own -----------------------------------------------------

def _released_all(queue_id):
    return 0, f"{queue_id} released from hold"


def test_a_log_that_fails_for_one_message_leaves_the_others(held_site):
    from contextlib import contextmanager

    from textnb.review.clicks import Clicks, release_selection
    from textnb.review.store import StoreError

    _, scorer, ids, db = held_site
    store, uses = VerdictStore(db), []

    @contextmanager
    def open_log():
        uses.append(1)
        if len(uses) == 2:
            raise StoreError("the verdict log is locked by another program")
        yield store

    selection = release_selection([ids["alice", "1"], ids["alice", "2"], ids["bob", "1"],
                                   ids["alice", "1"]])
    assert [number for _, number in selection] == [ids["alice", "1"], ids["alice", "2"],
                                                   ids["bob", "1"]]  # each message once
    found = Clicks(scorer.learn, release_run=_released_all).release_many(
        open_log, selection, None, teach_too=False)
    assert [(f.outcome, f.said) for f in found] == [
        ("released", "released"),
        ("failed", "not done: the verdict log is locked by another program"),
        ("released", "released")]
    assert [f.row.id if f.row else None for f in found] == [ids["alice", "1"], None,
                                                            ids["bob", "1"]]
    assert [store.get(ids[k], None).action for k in (("alice", "1"), ("alice", "2"),
                                                     ("bob", "1"))] == [
        "released", "quarantined", "released"]


def test_no_message_is_begun_past_the_time_limit(held_site):
    from contextlib import nullcontext

    from textnb.review.clicks import Clicks, release_selection

    _, scorer, ids, db = held_site
    store, now = VerdictStore(db), iter([0.0, 1.0, 46.0])
    clicks = Clicks(scorer.learn, release_run=_released_all, clock=lambda: next(now))
    found = clicks.release_many(lambda: nullcontext(store),
                                release_selection([ids["alice", "1"], ids["bob", "1"]]), None,
                                teach_too=False, seconds=45.0)
    assert [(f.outcome, f.said) for f in found] == [
        ("released", "released"),
        ("not tried", "not tried: the request ran out of its 45 s; select it again")]
    assert store.get(ids["bob", "1"], None).action == "quarantined"
