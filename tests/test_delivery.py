"""Real deliveries: the documented procmail and maildrop recipes file spam into a Junk Maildir.

The recipes are read from docs/mail-path.md, so the documented ones are the ones tested. Two
substitutions make them run here: ``$HOME`` becomes the test's folder (maildrop takes
HOME from the password file, not the environment), and ``textnb-client`` becomes this
interpreter running ``textnb.delivery.client`` with the test's model and socket.
"""

import os
import re
import shutil
import subprocess
import sys
import threading

import pytest

from textnb.delivery.client import ping
from textnb.delivery.server import ResidentModel, ScorerServer
from textnb.delivery.verdict_headers import filter_message, in_process_scorer
from textnb.mail.sources import iter_index

from conftest import PROJECT, SAMPLE_INDEX

RECIPES = (PROJECT / "docs" / "mail-path.md").read_text()


def _recipe(kind: str) -> str:
    (block,) = re.findall(rf"```{kind}\n(.*?)```", RECIPES, flags=re.S)
    return block


@pytest.fixture(scope="module")
def model(sample_model_file):
    return sample_model_file


@pytest.fixture(scope="module")
def messages(model):
    """Two spam and two ham of the sample corpus, with what the filter makes of them."""
    score = in_process_scorer(model)
    picked = {"spam": [], "ham": []}
    for message in iter_index(SAMPLE_INDEX):
        result = filter_message(message.raw, score)
        label = result.verdict.label
        if label == message.label and len(picked[label]) < 2:
            picked[label].append((message.raw, result.output))
    return picked


@pytest.fixture
def scorer(tmp_path, model):
    sock = tmp_path / "scorer.sock"
    server = ScorerServer(ResidentModel(model), str(sock), timeout=5.0).bind()
    stop = threading.Event()
    thread = threading.Thread(target=server.serve_forever, args=(stop,))
    thread.start()
    yield sock
    stop.set()
    thread.join(timeout=15)
    assert not thread.is_alive()


def _maildir(path):
    for sub in ("cur", "new", "tmp"):
        (path / sub).mkdir(parents=True, exist_ok=True)
    return path


def _setup(tmp_path, kind, model, sock):
    home = tmp_path / "home"
    inbox = _maildir(home / "Maildir")
    junk = _maildir(inbox / ".Junk")
    client = f"{sys.executable} -m textnb.delivery.client --model {model} --server {sock}"
    text = _recipe(kind).replace("$HOME", str(home)).replace("textnb-client", client)
    rcfile = home / ("procmailrc" if kind == "procmail" else "mailfilter")
    rcfile.write_text(text)
    rcfile.chmod(0o600)  # maildrop refuses a filter file others can read or write
    return home, rcfile, inbox, junk


def _deliver(kind, home, rcfile, raw):
    cmd = ["procmail", str(rcfile)] if kind == "procmail" else ["maildrop", str(rcfile)]
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(PROJECT)}
    return subprocess.run(cmd, input=raw, capture_output=True, env=env, cwd=home, timeout=120)


def _delivered(folder):
    # procmail ends every message with an empty line, as it would in an mbox; that
    # line is procmail's, so trailing line ends are left out of the comparison.
    return sorted(p.read_bytes().rstrip(b"\n") for p in (folder / "new").iterdir())


def _as_delivered(*messages):
    return sorted(m.rstrip(b"\n") for m in messages)


def _skip_unless_installed(kind):
    if shutil.which(kind) is None:
        pytest.skip(f"{kind} is not installed (apt-get install {kind}); "
                    "this test runs a real delivery with it")


@pytest.mark.parametrize("kind", ["procmail", "maildrop"])
def test_spam_goes_to_junk_and_ham_to_the_inbox(tmp_path, kind, model, messages, scorer):
    _skip_unless_installed(kind)
    home, rcfile, inbox, junk = _setup(tmp_path, kind, model, scorer)
    for label in ("spam", "ham"):
        for raw, _ in messages[label]:
            done = _deliver(kind, home, rcfile, raw)
            assert done.returncode == 0, done.stderr
            assert b"unavailable" not in done.stderr  # the resident scorer answered
    # Delivered exactly as `textnb filter` writes them: the message plus our two header lines.
    assert _delivered(junk) == _as_delivered(*(out for _, out in messages["spam"]))
    assert _delivered(inbox) == _as_delivered(*(out for _, out in messages["ham"]))
    assert ping(str(scorer))["requests"] == "4"


@pytest.mark.parametrize("kind", ["procmail", "maildrop"])
def test_delivery_still_filters_with_the_scorer_down(tmp_path, kind, model, messages):
    _skip_unless_installed(kind)
    home, rcfile, inbox, junk = _setup(tmp_path, kind, model, tmp_path / "nobody.sock")
    raw, out = messages["spam"][0]
    done = _deliver(kind, home, rcfile, raw)
    assert done.returncode == 0, done.stderr
    assert b"scoring in process" in done.stderr
    assert _delivered(junk) == _as_delivered(out) and _delivered(inbox) == []


@pytest.mark.parametrize("kind", ["procmail", "maildrop"])
def test_no_model_means_the_inbox_not_a_lost_message(tmp_path, kind, messages):
    _skip_unless_installed(kind)
    home, rcfile, inbox, junk = _setup(tmp_path, kind, tmp_path / "missing.tnb",
                                       tmp_path / "nobody.sock")
    raw, _ = messages["spam"][0]
    done = _deliver(kind, home, rcfile, raw)
    assert done.returncode == 0, done.stderr
    assert b"passed through unchanged" in done.stderr
    assert _delivered(inbox) == _as_delivered(raw) and _delivered(junk) == []


def test_sieve_recipe_compiles_with_the_filter_extension(tmp_path):
    """Dovecot refuses to deliver as root (and this Python is not readable by others),
    so the Sieve recipe is only compiled, with Pigeonhole's sievec: once with the
    configuration docs/mail-path.md gives, once without it, which must fail."""
    if shutil.which("sievec") is None:
        pytest.skip("sievec is not installed (apt-get install dovecot-sieve); it checks "
                    "the Sieve recipe in docs/mail-path.md")
    script = tmp_path / "textnb.sieve"
    script.write_text(_recipe("sieve"))
    config = tmp_path / "dovecot.conf"
    config.write_text("plugin {\n  sieve_plugins = sieve_extprograms\n"
                      "  sieve_global_extensions = +vnd.dovecot.filter\n"
                      f"  sieve_filter_bin_dir = {tmp_path}\n}}\n")
    done = subprocess.run(["sievec", "-c", str(config), str(script), str(tmp_path / "a.svbin")],
                          capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    config.write_text("")
    done = subprocess.run(["sievec", "-c", str(config), str(script), str(tmp_path / "b.svbin")],
                          capture_output=True, timeout=60)
    assert done.returncode != 0 and b"vnd.dovecot.filter" in done.stderr
