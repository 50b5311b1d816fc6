"""The review page in a real browser: Debian's chromium and chromium-driver, headless,
driven by Selenium, against ``textnb web``'s app under uvicorn on loopback and a real
scorer with a model per user that records its verdicts.

alice logs in, finds her unsure message with its clues in the review queue, opens it
and clicks "spam"; the page says so; her model's counts change by exactly that message,
once (a second click and a reload change nothing); "undo" restores them; bob's model is
unchanged; bob cannot open alice's message by its URL.

With TEXTNB_SCREENSHOTS=DIR the pages are also saved as PNGs there (docs/images is
made so: ``TEXTNB_SCREENSHOTS=docs/images pytest tests/test_review_browser.py``).
"""

import os
import shutil
import socket
import threading
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

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver") or (
    "/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else None)
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER),
    reason="Debian's chromium and chromium-driver are absent (apt-get install chromium "
           "chromium-driver; .ci/run does)")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class WebPage:
    """textnb web's app under uvicorn on a loopback port, on a thread."""

    def __init__(self, app):
        import uvicorn

        self.port = _free_port()
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


def _shot(driver, name):
    folder = os.environ.get("TEXTNB_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / name))


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
            _shot(browser, "message.png")
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
