"""The review page in a real browser: Debian's chromium and chromium-driver, headless,
driven by Selenium, against ``textnb web``'s app under uvicorn on loopback and a real
scorer with a model per user that records its verdicts.

alice logs in, finds her unsure message with its clues in the review queue, opens it
and clicks "spam"; the page says so; her model's counts change by exactly that message,
once (a second click and a reload change nothing); "undo" restores them; bob's model is
unchanged; bob cannot open alice's message by its URL. And what was tried on the page:
a click while another program locks the log, the log moved aside while the page is
open, a login removed while its session is open, a login posted by a page of another
port of the host, and 200-character words in the history at 1,280 and 375 pixels; and
a message the milter held, released and taught as ham in one click, and a selection of
held mail released in bulk.

With TEXTNB_SCREENSHOTS=DIR the pages are also saved as PNGs there (docs/images is
made so: ``TEXTNB_SCREENSHOTS=docs/images pytest tests/test_review_browser.py``).
"""

import http.server
import os
import re
import shutil
import sqlite3
import threading
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the review page's libraries: pip install -e '.[web]'")
pytest.importorskip("uvicorn", reason="the review page's libraries: pip install -e '.[web]'")
webdriver = pytest.importorskip("selenium.webdriver",
                                reason="Selenium is absent: pip install selenium")

from textnb.delivery.client import score_remote  # noqa: E402
from textnb.review.store import VerdictStore  # noqa: E402
from textnb.review.web import make_app  # noqa: E402

from test_review_web import (PASSWORDS, PerUserScorer, _wait, unsure_message,  # noqa: E402,F401
                             unsure_model_file, users_file)
from helpers import free_port  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver") or (
    "/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else None)
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER),
    reason="Debian's chromium and chromium-driver are absent (apt-get install chromium "
           "chromium-driver; .ci/run does)")


class WebPage:
    """textnb web's app under uvicorn on a loopback port, on a thread."""

    def __init__(self, app):
        import uvicorn

        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port,
                                                    log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        assert _wait(lambda: self.server.started)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def browser():
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1100,760", "--no-first-run", "--disable-extensions",
                     "--disable-background-networking", "--disable-sync",
                     "--disable-component-update", "--disable-default-apps"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def _log_in(driver, base, name):
    from selenium.webdriver.common.by import By

    driver.get(base + "/login")
    driver.find_element(By.ID, "name").send_keys(name)
    driver.find_element(By.ID, "password").send_keys(PASSWORDS[name])
    _submit(driver, driver.find_element(By.ID, "login"))
    assert driver.current_url.endswith("/history"), (driver.current_url, driver.page_source[:500])


def _submit(driver, element):
    """Click a button or link that loads a page, and wait until the new page is in."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from selenium.common.exceptions import WebDriverException

    old = driver.find_element(By.TAG_NAME, "html")
    element.click()

    def old_page_gone(_driver) -> bool:
        # staleness_of, except that chromedriver may answer a node detached mid-check
        # with "Node with given id does not belong to the document" (an unknown error,
        # not StaleElementReferenceException): gone all the same.
        try:
            old.is_enabled()
        except WebDriverException:
            return True
        return False

    WebDriverWait(driver, 15).until(old_page_gone)
    WebDriverWait(driver, 15).until(
        lambda d: d.execute_script("return document.readyState") == "complete")


def _shot(driver, name, whole=False):
    """The page as a PNG in $TEXTNB_SCREENSHOTS; ``whole``: all its height, not the window's."""
    folder = os.environ.get("TEXTNB_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        size = driver.get_window_size()
        if whole:
            height = driver.execute_script("return document.documentElement.scrollHeight")
            driver.set_window_size(size["width"], height + size["height"]
                                   - driver.execute_script("return window.innerHeight"))
        driver.save_screenshot(str(Path(folder) / name))
        if whole:
            driver.set_window_size(size["width"], size["height"])


def test_alice_teaches_her_unsure_message_once_and_undoes_it(tmp_path, users_file,
                                                             unsure_model_file, browser):
    from selenium.webdriver.common.by import By

    db = tmp_path / "verdicts.db"
    with PerUserScorer(tmp_path, unsure_model_file, db) as scorer:
        for user in ("alice", "bob"):
            assert score_remote(scorer.address, unsure_message(user),
                                user=user).label == "unsure"
        assert _wait(lambda: scorer.recorder.counts["explained"] == 2)  # clues while idle
        before = {u: scorer.counts(u) for u in ("alice", "bob")}
        (alices,) = VerdictStore(db).history("alice")
        with WebPage(make_app(db, users_file, scorer.address)) as base:
            _log_in(browser, base, "alice")
            _submit(browser, browser.find_element(By.LINK_TEXT, "Review queue"))
            row = browser.find_element(By.ID, f"row-{alices.id}")
            assert "alice's offer 1" in row.text and "unsure" in row.text
            assert row.find_elements(By.CSS_SELECTOR, "td.clues code")  # its clues
            assert "bob" not in browser.find_element(By.TAG_NAME, "body").text
            _shot(browser, "review-queue.png")
            _submit(browser, row.find_element(By.LINK_TEXT, "alice's offer 1"))
            assert len(browser.find_elements(By.CSS_SELECTOR, "#clues tbody tr")) >= 3

            spam, ham = before["alice"]
            _submit(browser, browser.find_element(By.ID, "teach-spam"))
            assert browser.find_element(By.ID, "notice").text == "taught as spam", \
                browser.find_element(By.TAG_NAME, "main").text
            assert browser.find_element(By.ID, "taught").text == "as spam"
            _shot(browser, "message.png", whole=True)
            assert scorer.counts("alice") == (spam + 1, ham)
            _submit(browser, browser.find_element(By.ID, "teach-spam"))  # a second click
            assert "already taught as spam" in browser.find_element(By.ID, "notice").text
            browser.refresh()  # and a reload
            assert scorer.counts("alice") == (spam + 1, ham)

            _submit(browser, browser.find_element(By.ID, "teach-undo"))
            assert browser.find_element(By.ID, "notice").text == "undone: forgotten again", \
                browser.find_element(By.TAG_NAME, "main").text
            assert browser.find_element(By.ID, "taught").text == "not yet"
            assert scorer.counts("alice") == (spam, ham)
            assert scorer.counts("bob") == before["bob"]

            _submit(browser, browser.find_element(By.LINK_TEXT, "Statistics"))
            assert len(browser.find_elements(By.CSS_SELECTOR, "figure svg")) == 3
            _shot(browser, "statistics.png")
            _submit(browser, browser.find_element(By.CSS_SELECTOR, "nav button"))  # log out

            _log_in(browser, base, "bob")
            browser.get(f"{base}/message/{alices.id}")
            assert browser.find_element(By.ID, "error").text == "no such message"
            assert "alice" not in browser.find_element(By.TAG_NAME, "body").text
        assert scorer.counts("bob") == before["bob"]


def _text(driver, element_id) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, element_id).text


def _scored(scorer, db, user, n):
    """Score one unsure message of ``user`` and wait until the log holds it."""
    raw = unsure_message(user, n)
    assert score_remote(scorer.address, raw, user=user).label == "unsure"
    assert _wait(lambda: any(row.subject == f"{user}'s offer {n}"
                             for row in _rows(db, user)))
    return next(row for row in _rows(db, user) if row.subject == f"{user}'s offer {n}")


def _rows(db, user):
    if not db.exists():  # the log between two files
        return []
    try:
        store = VerdictStore(db)
    except Exception:  # noqa: BLE001 - the log between two files
        return []
    try:
        return store.history(user)
    finally:
        store.close()


def test_p1_a_click_on_a_locked_log_says_not_done_and_the_model_is_unchanged(
        tmp_path, users_file, unsure_model_file, browser):
    from selenium.webdriver.common.by import By

    db = tmp_path / "verdicts.db"
    with PerUserScorer(tmp_path, unsure_model_file, db) as scorer:
        row = _scored(scorer, db, "alice", 1)
        before = scorer.counts("alice")
        with WebPage(make_app(db, users_file, scorer.address)) as base:
            _log_in(browser, base, "alice")
            browser.get(f"{base}/message/{row.id}")
            other = sqlite3.connect(db, isolation_level=None, timeout=5)
            other.execute("BEGIN IMMEDIATE")  # another program's write lock
            try:
                _submit(browser, browser.find_element(By.ID, "teach-spam"))
                said = _text(browser, "error")
            finally:
                other.execute("ROLLBACK")
                other.close()
            assert "not done" in said and "locked" in said and "nothing was taught" in said
            assert scorer.counts("alice") == before
            browser.get(f"{base}/message/{row.id}")
            assert _text(browser, "taught") == "not yet"
            assert not browser.find_elements(By.ID, "teach-undo")
            _submit(browser, browser.find_element(By.ID, "teach-spam"))
            assert _text(browser, "notice") == "taught as spam"
            assert scorer.counts("alice") == (before[0] + 1, before[1])
            _submit(browser, browser.find_element(By.ID, "teach-undo"))
            assert scorer.counts("alice") == before


def test_p2_the_page_follows_a_log_moved_aside_while_it_is_open(
        tmp_path, users_file, unsure_model_file, browser):
    from selenium.webdriver.common.by import By

    db = tmp_path / "verdicts.db"
    with PerUserScorer(tmp_path, unsure_model_file, db) as scorer:
        _scored(scorer, db, "alice", 1)
        with WebPage(make_app(db, users_file, scorer.address)) as base:
            _log_in(browser, base, "alice")
            assert "alice's offer 1" in browser.find_element(By.TAG_NAME, "main").text
            db.rename(tmp_path / "verdicts.db.aside")  # the documented fix for a damaged log
            row = _scored(scorer, db, "alice", 2)  # the scorer begins a new log there

            def shows_the_new_log():
                browser.get(f"{base}/history")
                return "alice's offer 2" in browser.find_element(By.TAG_NAME, "main").text

            assert _wait(shows_the_new_log)
            main = browser.find_element(By.TAG_NAME, "main").text
            assert "begun anew" in main and "alice's offer 1" not in main
            before = scorer.counts("alice")
            _submit(browser, browser.find_element(By.LINK_TEXT, "alice's offer 2"))
            _submit(browser, browser.find_element(By.ID, "teach-spam"))
            assert _text(browser, "notice") == "taught as spam"
            assert scorer.counts("alice") == (before[0] + 1, before[1])
            assert VerdictStore(db).get(row.id, None).taught == "spam"
        old = sqlite3.connect(tmp_path / "verdicts.db.aside")
        assert old.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert [s for (s,) in old.execute("SELECT subject FROM verdicts")] == ["alice's offer 1"]


def test_p5_a_removed_login_is_signed_out_at_its_next_click(tmp_path, browser):
    from selenium.webdriver.common.by import By

    from textnb.review.accounts import Accounts

    db = tmp_path / "verdicts.db"
    VerdictStore(db).close()
    users = tmp_path / "users.json"
    Accounts(users).add("alice", PASSWORDS["alice"])
    with WebPage(make_app(db, users, "-", learn=lambda *a: "spam new", ping=lambda u: {})) as base:
        _log_in(browser, base, "alice")
        Accounts(users).remove("alice")
        _submit(browser, browser.find_element(By.LINK_TEXT, "Review queue"))
        assert browser.current_url.endswith("/login")
        assert browser.find_elements(By.ID, "password")


class _Attacker(http.server.BaseHTTPRequestHandler):
    """Another service on the host, on another port: it fetches a login form of the
    page itself (a token and its cookie, as any local program can) and serves a page
    that sets that cookie for 127.0.0.1 and posts bob's login to the review page."""

    target = ""

    def do_GET(self):  # noqa: N802 - http.server's name
        form = urllib.request.urlopen(self.target + "/login").read().decode()
        token = re.search(r'name="csrf" value="([^"]+)"', form).group(1)
        body = (f'<html><body><form id="f" method="post" action="{self.target}/login">'
                f'<input name="csrf" value="{token}"><input name="name" value="bob">'
                f'<input name="password" value="{PASSWORDS["bob"]}"></form>'
                '<script>document.getElementById("f").submit()</script></body></html>')
        self.send_response(200)
        self.send_header("Set-Cookie", f"textnb_login={token}; Path=/")
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


def test_p6_a_page_on_another_port_cannot_log_alices_browser_in_as_bob(tmp_path, users_file,
                                                                       browser):
    from selenium.webdriver.common.by import By

    db = tmp_path / "verdicts.db"
    VerdictStore(db).close()
    with WebPage(make_app(db, users_file, "-", learn=lambda *a: "spam new",
                          ping=lambda u: {})) as base:
        _log_in(browser, base, "alice")
        _Attacker.target = base
        attacker = http.server.HTTPServer(("127.0.0.1", 0), _Attacker)
        threading.Thread(target=attacker.serve_forever, daemon=True).start()
        try:
            browser.get(f"http://127.0.0.1:{attacker.server_port}/")
            assert _wait(lambda: browser.current_url.startswith(base))
            assert "refused" in browser.find_element(By.TAG_NAME, "body").text
        finally:
            attacker.shutdown()
        browser.get(f"{base}/history")
        assert browser.find_element(By.CSS_SELECTOR, "nav .who").text == "alice"


LONG_WORD = "x" * 200


def _fits(driver, width):
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": 800, "deviceScaleFactor": 1,
                            "mobile": width < 600})
    driver.refresh()
    inner = driver.execute_script("return window.innerWidth")
    page = driver.execute_script("return document.documentElement.scrollWidth")
    verdicts = driver.execute_script(
        "return Array.from(document.querySelectorAll('td.c-verdict'))"
        ".map(cell => cell.getBoundingClientRect().right)")
    return inner, page, verdicts


def test_p10_long_words_wrap_and_the_verdict_stays_in_view_at_1280_and_375_pixels(
        tmp_path, users_file, browser):
    from test_review_web import UNSURE, record

    db = tmp_path / "verdicts.db"
    raw = (f"From: {LONG_WORD}@example.org\nSubject: {LONG_WORD}\n\nhello\n").encode()
    record(db, [(unsure_message("alice", n), UNSURE, "alice", "user") for n in range(3)]
           + [(raw, UNSURE, "alice", "user")])
    with WebPage(make_app(db, users_file, "-", learn=lambda *a: "spam new",
                          ping=lambda u: {})) as base:
        _log_in(browser, base, "alice")
        for width in (1280, 375):
            inner, page, verdicts = _fits(browser, width)
            assert inner == width and page <= width, (width, page)
            assert len(verdicts) == 4 and max(verdicts) <= width, (width, verdicts)
            _shot(browser, f"history-{width}.png")
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_the_queue_by_keyboard_closest_first_select_all_and_bulk_undo(tmp_path, users_file,
                                                                     browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    from test_review_web import record
    from textnb.delivery.verdict_headers import Verdict

    db = tmp_path / "verdicts.db"
    odds = [2.5, -0.3, 1.2, 0.1]
    record(db, [(unsure_message("alice", n), Verdict("spam" if lo > 0 else "unsure", lo, 0.5, 0.0),
                 "alice", "user") for n, lo in enumerate(odds)])
    taught = []

    def learn(raw, label, user):
        taught.append(label)
        return f"{label} new" if label else "spam"

    with WebPage(make_app(db, users_file, "-", learn=learn, ping=lambda u: {})) as base:
        _log_in(browser, base, "alice")
        _submit(browser, browser.find_element(By.LINK_TEXT, "Review queue"))
        subjects = [cell.text for cell in browser.find_elements(By.CSS_SELECTOR, "td.c-subject")]
        assert subjects == ["alice's offer 3", "alice's offer 1", "alice's offer 2",
                            "alice's offer 0"]  # |log-odds| 0.1, 0.3, 1.2, 2.5
        boxes = browser.find_elements(By.CSS_SELECTOR, "input[name=ids]")
        assert [box.accessible_name for box in boxes] == [f"select: {s}" for s in subjects]
        # the bulk buttons come right after the filters, before 4 rows of links and boxes
        browser.find_element(By.ID, "filter").send_keys(Keys.TAB)
        assert browser.switch_to.active_element.get_attribute("id") == "bulk-spam"
        boxes[0].send_keys(Keys.SPACE)
        boxes[1].send_keys(Keys.SPACE)
        old = browser.find_element(By.TAG_NAME, "html")
        browser.find_element(By.ID, "bulk-spam").send_keys(Keys.ENTER)
        _wait_gone(browser, old)
        assert _text(browser, "notice") == "2 taught as spam"
        assert len(browser.find_elements(By.CSS_SELECTOR, "input[name=ids]")) == 2
        _submit(browser, browser.find_element(By.ID, "all-ham"))  # all on the page
        assert _text(browser, "notice") == "2 taught as ham"
        assert not browser.find_elements(By.CSS_SELECTOR, "input[name=ids]")
        for box in browser.find_elements(By.CSS_SELECTOR, "input[name=undo_ids]"):
            box.send_keys(Keys.SPACE)
        _submit(browser, browser.find_element(By.ID, "bulk-undo"))
        assert _text(browser, "notice") == "4 undone"
        assert len(browser.find_elements(By.CSS_SELECTOR, "input[name=ids]")) == 4
        assert taught == ["spam", "spam", "ham", "ham", None, None, None, None]


def _wait_gone(driver, old):
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    def gone(_driver):
        try:
            old.is_enabled()
        except WebDriverException:
            return True
        return False

    WebDriverWait(driver, 15).until(gone)


def test_alice_releases_her_held_message_and_teaches_it_as_ham(tmp_path, users_file, browser,
                                                               monkeypatch):
    """A message the milter held shows as held in alice's queue; its page's "Release and
    teach as ham" runs the release command (textnb-release, a fake postqueue and
    postsuper on PATH) and the lesson as one click, and the page says both were done.
    Her message the milter rejected offers no release, and says why."""
    from selenium.webdriver.common.by import By

    from textnb.delivery.verdict_headers import Verdict
    from textnb.review.recorder import VerdictRecorder

    from test_release import RELEASE, FakeQueue
    from test_review_web import FakeScorer

    queue = FakeQueue(tmp_path, {"3F1B42C1A58": "hold"})
    for key, value in queue.environ().items():
        monkeypatch.setenv(key, value)
    db = tmp_path / "verdicts.db"
    recorder = VerdictRecorder(db).start()
    spam = Verdict("spam", 9.0, 0.9999, 0.0)
    for n, action, queue_id in ((1, "quarantined", "3F1B42C1A58"), (2, "rejected", None)):
        raw = (f"From: Bank <notice@bank.example>\nSubject: statement {n}\n\n"
               f"Your statement {n} is ready.\n").encode()
        recorder.submit(raw, spam, user="alice", model="user", source="milter",
                        action=action, queue_id=queue_id)
    recorder.close()
    held, rejected = sorted(row.id for row in VerdictStore(db).history("alice"))
    scorer = FakeScorer()
    with WebPage(make_app(db, users_file, "unused.sock", learn=scorer.learn,
                          ping=scorer.ping, release_command=RELEASE)) as base:
        _log_in(browser, base, "alice")
        browser.get(base + "/review")
        assert browser.find_element(By.CSS_SELECTOR, f"#row-{held} .c-done").text == "held"
        browser.get(f"{base}/message/{rejected}")
        assert "nothing to release" in browser.find_element(By.ID, "rejected").text
        assert not browser.find_elements(By.ID, "release")
        browser.get(f"{base}/message/{held}")
        assert "held" in browser.find_element(By.ID, "mail-path").text
        _shot(browser, "review-held.png")
        _submit(browser, browser.find_element(By.ID, "release-ham"))
        assert browser.find_element(By.ID, "notice").text == "released; taught as ham"
        assert browser.find_element(By.ID, "mail-path").text.startswith("released")
        assert not browser.find_elements(By.ID, "release")
    assert queue.queue == {"3F1B42C1A58": "deferred"} and scorer.calls == [("ham", "alice")]
    row = VerdictStore(db).get(held, None)
    assert (row.action, row.taught) == ("released", "ham")


def test_alice_releases_a_selection_of_her_held_mail_and_reads_what_became_of_each(
        tmp_path, users_file, browser, monkeypatch):
    """In the queue filtered to held mail only, alice ticks three held messages, one of
    them released by hand meanwhile, and clicks "Release selected and teach as ham": the
    answer lists each with what became of it, and the two on hold are released and
    taught, the third put back as it was."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    from textnb.delivery.verdict_headers import Verdict
    from textnb.review.recorder import VerdictRecorder

    from test_release import RELEASE, FakeQueue
    from test_review_web import FakeScorer

    queue = FakeQueue(tmp_path, {"3F1B42C1A58": "hold", "4AB17C2D9": "hold",
                                 "5BCDE0123": "deferred"})
    for key, value in queue.environ().items():
        monkeypatch.setenv(key, value)
    db = tmp_path / "verdicts.db"
    recorder = VerdictRecorder(db).start()
    for n, queue_id, log_odds in ((1, "3F1B42C1A58", 9.0), (2, "4AB17C2D9", 8.0),
                                  (3, "5BCDE0123", 7.0)):
        raw = (f"From: Bank <notice@bank.example>\nSubject: statement {n}\n\n"
               f"Your statement {n} is ready.\n").encode()
        recorder.submit(raw, Verdict("spam", log_odds, 0.9999, 0.0), user="alice",
                        model="user", source="milter", action="quarantined", queue_id=queue_id)
    recorder.close()
    held = sorted(row.id for row in VerdictStore(db).history("alice"))
    scorer = FakeScorer()
    with WebPage(make_app(db, users_file, "unused.sock", learn=scorer.learn,
                          ping=scorer.ping, release_command=RELEASE)) as base:
        _log_in(browser, base, "alice")
        _submit(browser, browser.find_element(By.LINK_TEXT, "Review queue"))
        assert not browser.find_elements(By.ID, "bulk-release")  # only in the held view
        browser.find_element(By.ID, "held-only").send_keys(Keys.SPACE)
        _submit(browser, browser.find_element(By.ID, "filter"))
        assert "at most 100 at a time" in _text(browser, "release-selected")
        for verdict_id in held:
            browser.find_element(By.ID, f"select-{verdict_id}").send_keys(Keys.SPACE)
        _shot(browser, "review-held-selected.png")
        _submit(browser, browser.find_element(By.ID, "bulk-release-ham"))
        assert _text(browser, "summary") == "2 released and taught as ham, 1 already released"
        rows = browser.find_elements(By.CSS_SELECTOR, "#outcomes tbody tr")
        assert [row.find_element(By.CSS_SELECTOR, ".c-outcome").text for row in rows] == [
            "already released", "released and taught as ham", "released and taught as ham"]
        assert "statement 3" in rows[0].text and "released already" in rows[0].text
        _shot(browser, "review-released.png")
        _submit(browser, browser.find_element(By.ID, "back"))
        # the one released by hand is put back as the log had it: still held there
        boxes = browser.find_elements(By.CSS_SELECTOR, "input[name=ids]")
        assert [box.get_attribute("value") for box in boxes] == [str(held[2])]
    assert queue.queue == {"3F1B42C1A58": "deferred", "4AB17C2D9": "deferred",
                           "5BCDE0123": "deferred"}
    assert scorer.calls == [("ham", "alice"), (None, "alice"), ("ham", "alice"),
                            ("ham", "alice")]
    assert [(r.action, r.taught) for r in map(lambda i: VerdictStore(db).get(i, None), held)] \
        == [("released", "ham"), ("released", "ham"), ("quarantined", None)]
