"""Recording the scorer's verdicts (textnb.review): what a row holds, the bounds after
10,000 verdicts, and a damaged, locked or full store that leaves scoring working and
is counted; nothing recorded is lost on a clean restart; and nothing of it is imported
unless recording is asked for."""

import json
import sqlite3
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from textnb.delivery.client import score_remote
from textnb.delivery.server import ResidentModel, ScorerServer
from textnb.delivery.verdict_headers import Verdict, score_with
from textnb.mail.sources import RawMessage
from textnb.modelfile import store
from textnb.review import recorder as recorder_module
from textnb.review.recorder import CLUES, VerdictRecorder
from textnb.review.store import FIELD_CHARS, VerdictStore, headers_of, in_review_band

from test_server import MESSAGES, Running, models, model_file  # noqa: F401
from _wire import wait_for as _wait_for  # noqa: E402


class Recording(Running):
    """A scorer on a thread with a recorder, both stopped (bounded waits) on exit."""

    def __init__(self, model_path, address, recorder):
        self.recorder = recorder.start()
        super().__init__(model_path, address, reload_interval=0, recorder=self.recorder)

    def __exit__(self, *exc):
        try:
            super().__exit__(*exc)
        finally:
            self.recorder.close()




def _rows(path):
    with sqlite3.connect(path) as db:
        return db.execute("SELECT user, label, log_odds, p_spam, threshold, clues, has_raw, "
                          "sender, subject, digest FROM verdicts ORDER BY id").fetchall()


def _message(i: int, size: int = 2000) -> bytes:
    return (f"From: sender{i} <s{i}@example.com>\nSubject: offer number {i}\n\n".encode()
            + b"cheap pills now " * (size // 16))


def _spam(log_odds=5.0):
    return Verdict("spam", log_odds, 0.99, 0.0)


def test_every_verdict_is_recorded_as_the_client_got_it(tmp_path, model_file, monkeypatch):
    monkeypatch.setattr(recorder_module, "EXPLAIN_SHARE", 1.0)  # every clue now, not paced
    local = store.load(model_file)
    db = tmp_path / "verdicts.db"
    with Recording(model_file, str(tmp_path / "s.sock"),
                   VerdictRecorder(db, default_user="me")) as running:
        replies = [score_remote(str(tmp_path / "s.sock"), raw) for raw in MESSAGES]
        kept = sum(in_review_band(r.label, r.log_odds, r.threshold) for r in replies)
        assert kept  # the scorer is idle now: the writer gives those their clues
        assert _wait_for(lambda: running.recorder.counts["explained"] == kept)
    rows = _rows(db)
    assert len(rows) == len(MESSAGES)
    for raw, reply, row in zip(MESSAGES, replies, rows):
        assert reply == score_with(local, raw)
        user, label, log_odds, p_spam, threshold, clues, has_raw, sender, subject, digest = row
        assert (user, label, log_odds, p_spam, threshold) == ("me", reply.label, reply.log_odds,
                                                              reply.p_spam, reply.threshold)
        assert (sender, subject) == headers_of(raw)
        kept = in_review_band(reply.label, reply.log_odds, reply.threshold)
        assert bool(has_raw) == kept and bool(digest) == kept
        if kept:  # explain's strongest clues, each with its contribution
            expected = local.explain(RawMessage("-", raw, None), k=CLUES).clues
            assert json.loads(clues) == [[t, round(c, 3)] for t, c, *_ in expected]
        else:
            assert clues is None
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert (db.stat().st_mode & 0o777) == 0o600


def test_headers_are_decoded_stripped_of_controls_and_cut():
    raw = (b"From: =?utf-8?q?Jos=C3=A9?= <j@example.com>\nSubject: a\x1b[31m" + b"x" * 500
           + b"\n\nbody\n")
    sender, subject = headers_of(raw)
    assert sender == "José <j@example.com>"
    assert "\x1b" not in subject and len(subject) == FIELD_CHARS
    assert headers_of(b"\xff\xfe not mail at all") == ("", "")


@pytest.mark.system  # load: 10,000 verdicts
def test_retention_and_size_cap_hold_after_10000_verdicts(tmp_path, monkeypatch):
    """10,000 spam verdicts (each keeping its 2 KB message: 20 MB) into a 2 MB cap; the
    first 2,000 are older than the retention days."""
    monkeypatch.setattr(recorder_module, "PRUNE_EVERY", 500)
    now = [time.time() - 40 * 86400]
    db = tmp_path / "verdicts.db"
    recorder = VerdictRecorder(db, days=30, max_bytes=2 * 2**20, clock=lambda: now[0]).start()
    sizes = []
    for i in range(10_000):
        if i == 2000:
            now[0] = time.time()
        while not recorder.submit(_message(i), _spam(), user="alice", model="user"):
            time.sleep(0.01)  # the test outruns the writer: wait, as mail would not
        if i % 1000 == 999:
            assert _wait_for(lambda: recorder.counts["recorded"] == i + 1)
            sizes.append(sum(f.stat().st_size for f in tmp_path.glob("verdicts.db*")
                             if not f.name.endswith("-shm")))
    recorder.close()
    assert recorder.counts["recorded"] == 10_000
    assert max(sizes) <= 2 * 2**20, sizes
    final = VerdictStore(db)
    final.prune()
    assert final.size() <= 2 * 2**20
    ats = [at for (at,) in final.db.execute("SELECT at FROM verdicts")]
    assert ats and min(ats) >= now[0] - 30 * 86400  # the old 2,000 are gone
    newest = final.history("alice", limit=1)[0]
    assert newest.subject == "offer number 9999" and final.raw(newest.id) == _message(9999)


def test_a_clean_restart_keeps_everything_recorded(tmp_path):
    db = tmp_path / "verdicts.db"
    for start in (0, 50):
        recorder = VerdictRecorder(db).start()
        for i in range(start, start + 50):
            recorder.submit(_message(i), _spam(), user="alice", model="user")
        recorder.close()
    subjects = [r.subject for r in VerdictStore(db).history("alice", limit=1000)]
    assert subjects == [f"offer number {i}" for i in reversed(range(100))]


def test_a_full_queue_drops_and_counts_without_waiting(tmp_path):
    recorder = VerdictRecorder(tmp_path / "v.db", queue_size=5)  # not started: nothing drains
    started = time.perf_counter()
    accepted = [recorder.submit(_message(i), _spam(), user="a", model="user") for i in range(20)]
    assert time.perf_counter() - started < 0.5
    assert accepted == [True] * 5 + [False] * 15 and recorder.counts["queue_full"] == 15
    small = VerdictRecorder(tmp_path / "w.db", queue_bytes=5000)  # two 2 KB messages fit
    assert [small.submit(_message(i), _spam(), user="a", model="user")
            for i in range(3)] == [True, True, False]


def _score_while_broken(tmp_path, model_file, db, outcome, break_it=None, monkeypatch=None):
    """Scoring answers every request while the store is broken; the drops are counted."""
    local = store.load(model_file)
    address = str(tmp_path / "s.sock")
    with Recording(model_file, address, VerdictRecorder(db)) as running:
        if break_it is not None:
            break_it()
        for raw in MESSAGES * 3:
            assert score_remote(address, raw, timeout=5.0) == score_with(local, raw)
        counts = running.recorder.counts
        assert _wait_for(lambda: counts[outcome] >= len(MESSAGES) * 3), counts
        assert counts["recorded"] == 0
    return running.recorder


def test_a_truncated_database_leaves_scoring_working_and_is_counted(tmp_path, model_file):
    db = tmp_path / "verdicts.db"
    recorder = VerdictRecorder(db).start()
    for i in range(300):
        recorder.submit(_message(i), _spam(), user="alice", model="user")
    recorder.close()
    data = db.read_bytes()
    db.write_bytes(data[:len(data) // 3] + b"\0" * 100)
    recorder = _score_while_broken(tmp_path, model_file, db, "damaged")
    assert "damaged" in recorder.problem and "move it aside" in recorder.problem


def test_a_locked_database_leaves_scoring_working_and_is_counted(tmp_path, model_file,
                                                                 monkeypatch):
    db = tmp_path / "verdicts.db"
    VerdictStore(db).close()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another program holds the write lock
    monkeypatch.setattr(recorder_module, "RETRY_SECONDS", 0.05)
    try:
        recorder = _score_while_broken(tmp_path, model_file, db, "locked")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert "locked" in recorder.problem


def test_a_full_disk_leaves_scoring_working_is_counted_and_recovers(tmp_path, model_file,
                                                                   monkeypatch):
    db = tmp_path / "verdicts.db"
    monkeypatch.setattr(recorder_module, "RETRY_SECONDS", 0.05)
    full = [True]
    real_add = VerdictStore.add_many

    def add_many(self, rows, dropped=None):
        if full[0]:
            raise sqlite3.OperationalError("database or disk is full")
        return real_add(self, rows, dropped)

    monkeypatch.setattr(VerdictStore, "add_many", add_many)
    local = store.load(model_file)
    address = str(tmp_path / "s.sock")
    with Recording(model_file, address, VerdictRecorder(db)) as running:
        for raw in MESSAGES:
            assert score_remote(address, raw) == score_with(local, raw)
        counts = running.recorder.counts
        assert _wait_for(lambda: counts["full"] == len(MESSAGES)), counts
        assert "full" in running.recorder.problem
        full[0] = False  # space freed: the next verdicts are recorded again
        time.sleep(0.1)
        for raw in MESSAGES:
            score_remote(address, raw)
        assert _wait_for(lambda: counts["recorded"] == len(MESSAGES)), counts
    assert running.recorder.problem is None
    # what was dropped is in the store now, for the page to say
    assert [(why, n) for why, n, _ in VerdictStore(db).dropped()] == [("full", len(MESSAGES))]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="tmpfs is Linux's")
def test_a_real_full_filesystem_drops_and_counts(tmp_path, model_file):
    """A 1 MB tmpfs (root only): SQLite's own 'disk is full' on a real filesystem."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
                          capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a 1 MB tmpfs (needs root): {done.stderr.decode().strip()}")
    try:
        recorder = VerdictRecorder(mount / "v.db", max_bytes=50 * 2**20).start()
        for i in range(2000):  # 2,000 kept 2 KB messages: 4 MB into 1 MB
            recorder.submit(_message(i), _spam(), user="a", model="user")
            if i % 200 == 0:
                time.sleep(0.05)
        assert _wait_for(lambda: recorder.counts["full"] > 0)
        recorder.close()
        assert recorder.counts["recorded"] > 0
        assert recorder.counts["recorded"] + recorder.counts["full"] \
            + recorder.counts["queue_full"] == 2000
        written = VerdictStore(mount / "v.db", readonly=True)
        assert written.history("a", limit=1)  # what was written stays
        written.close()
    finally:
        subprocess.run(["umount", "--lazy", str(mount)], check=False)


def test_metrics_count_recorded_and_dropped(tmp_path):
    from textnb.delivery.telemetry import Telemetry

    recorder = VerdictRecorder(tmp_path / "v.db", queue_size=1)
    telemetry = Telemetry(lambda: SimpleNamespace(path=tmp_path / "none", loads=1,
                                                  spam_filter=SimpleNamespace(n_learned={})))
    telemetry.recorder = recorder
    recorder.submit(_message(1), _spam(), user="a", model="user")
    recorder.submit(_message(2), _spam(), user="a", model="user")
    text = telemetry.render()
    assert 'textnb_recorded_verdicts_total{outcome="queue_full"} 1' in text
    assert 'textnb_recorded_verdicts_total{outcome="recorded"} 0' in text


def test_the_scorer_and_filter_import_neither_sqlite_nor_the_web_unless_recording():
    check = ("import sys, textnb.delivery.server, textnb.delivery.users, textnb.cli.serve, "
             "textnb.cli.filter; "
             "print(sorted(m for m in ('sqlite3', 'starlette', 'jinja2', 'argon2', "
             "'textnb.review.store') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_the_milter_records_its_verdicts_and_actions(tmp_path, model_file):
    pytest.importorskip("Milter", reason="pymilter is absent: pip install -e '.[milter]'")
    from textnb.delivery.milter import DONE, MilterScorer, action_for
    from textnb.delivery.milter_options import MilterPolicy

    local = store.load(model_file)
    policy = MilterPolicy(timeout=60, quarantine_above=0.9, reject_above=0.999999)
    db = tmp_path / "verdicts.db"
    recorder = VerdictRecorder(db, default_user="mail").start()
    scorer = MilterScorer(ResidentModel(model_file), policy, recorder=recorder)
    try:
        verdicts = [scorer.score(raw) for raw in MESSAGES]
    finally:
        scorer.close()
        recorder.close()
    rows = VerdictStore(db).history(None, limit=100)[::-1]
    assert [(r.source, r.user, r.label, r.log_odds) for r in rows] == [
        ("milter", "mail", v.label, v.log_odds) for v in verdicts]
    expected = [DONE[action_for(v, policy)] for v in verdicts]
    assert [r.action for r in rows] == expected and len(set(expected)) > 1
    assert verdicts == [score_with(local, raw) for raw in MESSAGES]


def test_serve_record_from_the_command_line_keeps_everything_at_sigterm(tmp_path, model_file):
    """textnb serve --record: the verdicts of one model are the OS user's; SIGTERM
    writes what is queued before the scorer exits."""
    import getpass
    import os
    import signal

    db, sock = tmp_path / "verdicts.db", tmp_path / "s.sock"
    process = subprocess.Popen(
        [sys.executable, "-m", "textnb", "serve", "--model", str(model_file), "--socket",
         str(sock), "--record", str(db), "--record-days", "7", "--record-max-mb", "5"],
        stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert _wait_for(sock.exists, 60)
        replies = [score_remote(str(sock), raw) for raw in MESSAGES]
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert b"recording verdicts in" in err
    rows = VerdictStore(db).history(getpass.getuser(), limit=100)[::-1]
    assert [(r.label, r.log_odds) for r in rows] == [(v.label, v.log_odds) for v in replies]


def test_one_users_flood_leaves_the_others_kept_messages(tmp_path):
    """3,000 spam verdicts for one user (6 MB of messages) into a 4 MB cap: whenever the
    writer is idle, their kept messages are under their share (a quarter), and alice's
    20 are all kept."""
    db = tmp_path / "verdicts.db"
    alice = [_message(i) for i in range(20)]
    for start in range(0, 3000, 500):  # the writer idle (closed) after every 500
        recorder = VerdictRecorder(db, max_bytes=4 * 2**20).start()
        for raw in alice if start == 0 else []:
            assert recorder.submit(raw, _spam(), user="alice", model="user")
        for i in range(start, start + 500):
            while not recorder.submit(_message(i), _spam(), user="flood", model="user"):
                time.sleep(0.01)  # the test outruns the writer: wait, as mail would not
        recorder.close()
        assert recorder.counts["recorded"] == 500 + (20 if start == 0 else 0)
        kept = VerdictStore(db).db.execute(
            "SELECT user, count(*), sum(size) FROM verdicts WHERE has_raw GROUP BY user")
        kept = {user: (n, size) for user, n, size in kept}
        assert kept["alice"] == (20, sum(map(len, alice)))
        assert kept["flood"][1] <= recorder.max_user_bytes == 2**20
    final = VerdictStore(db)
    assert len(final.history("flood", limit=5000)) == 3000  # the rows stay, without messages
    assert [final.raw(r.id) for r in final.history("alice")] == alice[::-1]


def test_dropped_verdicts_are_written_with_the_next_batch(tmp_path):
    db = tmp_path / "v.db"
    recorder = VerdictRecorder(db, queue_size=5)  # not started yet: the queue fills
    for i in range(20):
        recorder.submit(_message(i), _spam(), user="a", model="user")
    recorder.start()
    recorder.close()
    assert [(why, n) for why, n, _ in VerdictStore(db).dropped()] == [("queue_full", 15)]
    again = VerdictRecorder(db, queue_size=1)  # a second run adds to them
    again.submit(_message(1), _spam(), user="a", model="user")
    again.submit(_message(2), _spam(), user="a", model="user")
    again.start()
    again.close()
    assert [(why, n) for why, n, _ in VerdictStore(db).dropped()] == [("queue_full", 16)]
    assert len(VerdictStore(db).history("a")) == 6


def test_a_search_looks_at_a_bounded_window_and_older_goes_on(tmp_path, monkeypatch):
    from textnb.review import reading

    monkeypatch.setattr(reading, "SEARCH_ROWS", 100)
    verdicts = VerdictStore(tmp_path / "v.db")
    rows = [{"at": time.time(), "user": user, "model": "user", "source": "serve",
             "sender": f"s{i}@example.com", "subject": "needle" if i in (5, 300) else f"hay {i}",
             "label": "ham", "log_odds": -5.0, "p_spam": 0.01, "threshold": 0.0,
             "action": "scored", "digest": "", "size": 100, "clues": None, "raw": None}
            for i in range(400) for user in ("a", "b")]
    verdicts.add_many(rows)
    found, before, pages = [], None, 0
    while True:  # "Older" until the end: each page looks at 100 of a's rows at most
        page, before = verdicts.page("a", "needle", before, limit=50)
        found += [row.subject for row in page]
        pages += 1
        if before is None:
            break
    assert found == ["needle", "needle"] and pages == 4
    plain, before = verdicts.page("a", "", None, limit=50)  # no search: pages of 50
    assert len(plain) == 50 and before == plain[-1].id


def test_clues_are_paced_to_their_share_of_the_time(tmp_path, monkeypatch):
    """After an explanation that took t, the next waits until t / EXPLAIN_SHARE after the
    first began: the scorer's lock is held for clues at most that share of the time."""
    monkeypatch.setattr(recorder_module, "EXPLAIN_SHARE", 0.25)
    clock = [1000.0]
    monkeypatch.setattr(recorder_module.time, "monotonic", lambda: clock[0])
    recorder = VerdictRecorder(tmp_path / "v.db")
    recorder._store = VerdictStore(tmp_path / "v.db")

    class Explainer:
        lock = __import__("threading").Lock()
        calls = 0

    def clues(raw, explainer):
        Explainer.calls += 1
        clock[0] += 2.0  # each explanation takes 2 s
        return [["token", 1.0]]

    monkeypatch.setattr(recorder, "_clues", clues)
    ids = recorder._store.add_many([{**_row_fields(i), "raw": _message(i)} for i in range(3)])
    for verdict_id in ids:
        recorder._pending.append((verdict_id, _message(verdict_id), Explainer))
    recorder._explain_while_idle()
    assert Explainer.calls == 1  # 2 s taken: the next not before 8 s after the first began
    clock[0] = 1000.0 + 7.9
    recorder._explain_while_idle()
    assert Explainer.calls == 1
    clock[0] = 1000.0 + 8.0
    recorder._explain_while_idle()
    assert Explainer.calls == 2 and recorder.counts["explained"] == 2


def _row_fields(i: int) -> dict:
    return {"at": time.time(), "user": "a", "model": "user", "source": "serve",
            "sender": f"s{i}", "subject": f"offer {i}", "label": "spam", "log_odds": 5.0,
            "p_spam": 0.99, "threshold": 0.0, "action": "scored", "digest": "", "size": 2000,
            "clues": None}


def test_the_record_options_set_the_caps(tmp_path):
    from textnb.commands.daemons import start_recording

    per_user = start_recording(tmp_path / "a.db", 30.0, 8, one_model=False, user_mb=2)
    shared = start_recording(tmp_path / "b.db", 30.0, 8, one_model=False)
    alone = start_recording(tmp_path / "c.db", 30.0, 8, one_model=True)
    try:
        assert per_user.max_user_bytes == 2 * 2**20
        assert shared.max_user_bytes == 8 * 2**20 // 4  # USER_SHARE of the cap
        assert alone.max_user_bytes == 8 * 2**20
    finally:
        for recorder in (per_user, shared, alone):
            recorder.close()
