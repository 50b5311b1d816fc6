"""A lesson whose reply was lost: the scorer learned, the connection dropped before its
answer. The page asks the scorer (STATE) how the model has the message before saying
anything, so the log and the model agree: fakes that drop the reply after learning, or
before, and a real scorer behind a proxy that drops every reply."""

import socket
import threading

import pytest

pytest.importorskip("starlette", reason="the review page's libraries: pip install -e '.[web]'")
pytest.importorskip("argon2", reason="the review page's libraries: pip install -e '.[web]'")

from starlette.testclient import TestClient  # noqa: E402

from textnb.delivery.client import NoAnswer, learn_remote, learned_as, score_remote  # noqa: E402
from textnb.review.store import VerdictStore  # noqa: E402
from textnb.review.web import make_app  # noqa: E402
from helpers import read_request  # noqa: E402

from _wire import wait_for  # noqa: E402
from test_review_web import (UNSURE, FakeScorer, PerUserScorer, log_in, record,  # noqa: E402,F401
                             unsure_message, unsure_model_file, users_file)


class DroppingScorer(FakeScorer):
    """Learns (or not, with ``applies`` False), then loses the reply; STATE answers from
    the same ledger until ``state_down``."""

    def __init__(self, applies: bool = True):
        super().__init__()
        self.applies, self.state_down = applies, False

    def learn(self, raw, label, user):
        if self.applies:
            super().learn(raw, label, user)
        else:
            self.calls.append((label, user))
        raise NoAnswer("scorer.sock: the connection closed without a reply")

    def learned(self, raw, user):
        if self.state_down:
            raise ConnectionRefusedError("scorer.sock: connection refused")
        return self.state.get((user, raw), "absent")


@pytest.fixture
def dropping(tmp_path, users_file):  # noqa: F811
    def site(scorer):
        db = tmp_path / "verdicts.db"
        record(db, [(unsure_message("alice"), UNSURE, "alice", "user")])
        app = make_app(db, users_file, "unused.sock", learn=lambda *a: scorer.learn(*a),
                       ping=scorer.ping, state=lambda *a: scorer.learned(*a))
        client = TestClient(app, base_url="http://127.0.0.1")
        (row,) = VerdictStore(db).history("alice")
        return client, log_in(client, "alice"), row.id, db
    return site


def teach(client, csrf, verdict_id, action):
    return client.post(f"/message/{verdict_id}/teach", data={"action": action, "csrf": csrf}).text


def test_a_lesson_learned_whose_reply_was_lost_is_marked_as_taught(dropping):
    scorer = DroppingScorer()
    client, csrf, verdict_id, db = dropping(scorer)
    page = teach(client, csrf, verdict_id, "spam")
    assert "taught as spam" in page and "not done" not in page
    row = VerdictStore(db).get(verdict_id, None)
    assert (row.taught, row.before) == ("spam", "absent")
    assert scorer.state == {("alice", unsure_message("alice")): "spam"}
    page = teach(client, csrf, verdict_id, "undo")  # its reply lost too
    assert "undone: forgotten again" in page and scorer.state == {}
    assert VerdictStore(db).get(verdict_id, None).taught is None


def test_a_lesson_not_made_whose_reply_was_lost_says_nothing_changed(dropping):
    scorer = DroppingScorer(applies=False)
    client, csrf, verdict_id, db = dropping(scorer)
    page = teach(client, csrf, verdict_id, "ham")
    assert "not done: the scorer did not answer" in page and "nothing changed" in page
    assert VerdictStore(db).get(verdict_id, None).taught is None and scorer.state == {}


def test_a_lost_reply_the_scorer_cannot_account_for_says_so(dropping):
    scorer = DroppingScorer()
    client, csrf, verdict_id, db = dropping(scorer)
    learned = scorer.learned

    def down_once_asked_again(raw, user):  # up before the lesson, down after it
        if scorer.calls:
            scorer.state_down = True
        return learned(raw, user)

    scorer.learned = down_once_asked_again  # the app calls it through this attribute
    page = teach(client, csrf, verdict_id, "spam")
    assert "not done: the scorer did not answer" in page and "cannot say" in page
    assert "may have it as spam" in page and "click it again" in page
    assert VerdictStore(db).get(verdict_id, None).taught is None


# -- a real scorer behind a proxy that drops every reply -----------------------------------

class DroppingProxy:
    """A Unix socket that passes each request to the scorer, reads its reply, and closes
    the client's connection without it: the reply lost after the update was made."""

    def __init__(self, path, scorer_address):
        self.path, self.scorer = str(path), scorer_address
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(8)
        self.listener.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(10)
        self.listener.close()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            with conn:
                conn.settimeout(10)
                head, body = read_request(conn)
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as upstream:
                    upstream.settimeout(10)
                    upstream.connect(self.scorer)
                    upstream.sendall(head + b"\n" + body)
                    while b"\n" not in upstream.recv(4096):
                        pass  # the scorer answered: the update is made; the reply is dropped


def test_with_a_real_scorer_whose_replies_are_dropped_the_model_and_the_log_agree(
        tmp_path, users_file, unsure_model_file):  # noqa: F811
    db = tmp_path / "verdicts.db"
    with PerUserScorer(tmp_path, unsure_model_file, db) as scorer:
        raw = unsure_message("alice")
        assert score_remote(scorer.address, raw, user="alice").label == "unsure"
        assert wait_for(lambda: len(VerdictStore(db).history(None)) == 1)
        assert learned_as(scorer.address, raw, user="alice") == "absent"
        before = scorer.counts("alice")
        with DroppingProxy(tmp_path / "proxy.sock", scorer.address) as proxy:
            with pytest.raises(NoAnswer):  # what the page meets
                learn_remote(proxy.path, unsure_message("bob"), "ham", user="bob")
            assert learned_as(scorer.address, unsure_message("bob"), user="bob") == "ham"

            def learn(raw, label, user):
                return learn_remote(proxy.path, raw, label, user=user)

            def state(raw, user):
                return learned_as(scorer.address, raw, user=user)

            client = TestClient(make_app(db, users_file, scorer.address, learn=learn,
                                         state=state), base_url="http://127.0.0.1")
            csrf = log_in(client, "alice")
            (row,) = VerdictStore(db).history("alice")
            page = teach(client, csrf, row.id, "spam")
            assert "taught as spam" in page and "not done" not in page
            assert scorer.counts("alice") == (before[0] + 1, before[1])
            assert learned_as(scorer.address, raw, user="alice") == "spam"
            row = VerdictStore(db).get(row.id, None)
            assert (row.taught, row.before) == ("spam", "absent")
            page = teach(client, csrf, row.id, "ham")  # moved, its reply lost too
            assert "taught as ham" in page and scorer.counts("alice") == (before[0],
                                                                         before[1] + 1)
            page = teach(client, csrf, row.id, "undo")
            assert "undone: forgotten again" in page and scorer.counts("alice") == before
            assert learned_as(scorer.address, raw, user="alice") == "absent"
