"""The model's journal and lock under attack: the files beside a model, and what a crafted
or damaged record can make a loader do (textnb.modelfile.journal, owned_files, lock,
count_patch.check).

Each test is named after a row of the outside review's table (docs/security.md#the-files-
beside-the-model says what each defends). The scorer's learns reach every reader at once;
a damaged or crafted journal is refused or cut short with a clear message, never followed,
never waited on, never allowed to allocate what its bytes do not hold.
"""

import fcntl
import logging
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from textnb.delivery.server import ResidentModel
from textnb.errors import ModelFormatError
from textnb.mail.sources import RawMessage, iter_index
from textnb.modelfile import count_patch, store
from textnb.modelfile.journal import Journal, Record, journal_path
from textnb.modelfile.journal_frames import frame
from textnb.modelfile.lock import ModelLockedError, lock_path, model_lock
from textnb.modelfile.owned_files import UntrustedFileError
from textnb.modelfile.retrain import fit, forget, learn_messages, retrain
from textnb.models.ledger import message_digest
from textnb.spamfilter import SpamFilter

from conftest import EVERY_MESSAGE, PROJECT, SAMPLE_INDEX, every_message

MESSAGES = list(iter_index(SAMPLE_INDEX))  # 40 spam, 60 ham
UNLABELLED = PROJECT / "corpora" / "sample" / "unlabelled"


def variant(i: int, label: str = "spam") -> RawMessage:
    raw = MESSAGES[i % 40 if label == "spam" else 40 + i % 60].raw.rstrip(b"\n")
    return RawMessage(f"variant-{i}", raw + f"\nattack variant {i}\n".encode(), label)


@pytest.fixture
def model(tmp_path, monkeypatch):
    """A model file of the first 60 messages (patches appended, not rewritten)."""
    monkeypatch.setattr(count_patch, "COMPACT_FRACTION", 10.0)
    memory = SpamFilter(every_message())
    fit(memory, MESSAGES[:60])
    return store.save(memory, tmp_path / "model.tnb"), memory


def _mail_folder_index(tmp_path, messages, name="index") -> str:
    """The messages written to a folder of their own, and an index file of them."""
    folder = tmp_path / f"{name}-mail"
    folder.mkdir()
    lines = []
    for i, m in enumerate(messages):
        (folder / f"{i}.eml").write_bytes(m.raw)
        lines.append(f"{m.label} {folder.name}/{i}.eml")
    (tmp_path / name).write_text("\n".join(lines) + "\n")
    return str(tmp_path / name)


def _textnb(*args, stdin: bytes = b"", timeout: float = 120):
    """``textnb`` in a new process, as a delivery agent runs it (spaCy not yet imported)."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    return subprocess.run([sys.executable, "-m", "textnb", *map(str, args)], input=stdin,
                          capture_output=True, timeout=timeout, env=env)


# -- J1: the in-process fallback after a learn ------------------------------------------


def test_j1_classify_and_filter_score_with_what_the_scorer_learned_a_moment_ago(model, tmp_path):
    """A learn not yet written (or a scorer killed before its write) is a LEARN record in
    the journal; loading applies it while spaCy is imported on the other thread. The
    commands must score with it, not crash and pass mail through unscored."""
    path, _ = model
    learned = [variant(i, ("spam", "ham")[i % 2]) for i in range(6)]
    scorer = ResidentModel(path, flush_seconds=3600)
    for m in learned:
        scorer.update("LEARN", m.raw, m.label)
    assert journal_path(path).exists() and store.journal_seq_of(path) == 0
    one_retrain = tmp_path / "retrained.tnb"
    one_retrain.write_bytes(path.read_bytes())
    retrain(one_retrain, index=[_mail_folder_index(tmp_path, learned)])

    classified = _textnb("classify", "--model", path, UNLABELLED)
    assert classified.returncode == 0, classified.stderr.decode()
    assert b"Traceback" not in classified.stderr and b"Error" not in classified.stderr
    reference = _textnb("classify", "--model", one_retrain, UNLABELLED)
    assert classified.stdout == reference.stdout.replace(str(one_retrain).encode(),
                                                         str(path).encode())

    message = sorted(UNLABELLED.iterdir())[0].read_bytes()
    filtered = _textnb("filter", "--model", path, stdin=message)
    assert filtered.returncode == 0, filtered.stderr.decode()
    assert b"X-TextNB-Status: " in filtered.stdout and b"passed through" not in filtered.stderr
    assert filtered.stdout == _textnb("filter", "--model", one_retrain, stdin=message).stdout


def test_j1_load_while_applies_message_records_on_the_callers_thread(model, monkeypatch):
    """The split that fixes J1: patches may load beside spaCy's import, but a LEARN record
    tokenises, so it is applied only once the import on the calling thread is done."""
    import threading

    from textnb.modelfile import lifecycle

    path, memory = model
    ResidentModel(path, flush_seconds=3600).update("LEARN", variant(1).raw, "spam")
    threads = []
    real = lifecycle.Lifecycle.update

    def update(self, *args, **kwargs):
        threads.append(threading.current_thread())
        return real(self, *args, **kwargs)

    monkeypatch.setattr(lifecycle.Lifecycle, "update", update)
    imported = []
    loaded = store.load_while(path, lambda: imported.append(threading.current_thread()))
    assert threads == imported == [threading.main_thread()]
    learn_messages(memory, [variant(1)])
    assert loaded.ledger == memory.ledger


# -- J2: a forget after a rollback ------------------------------------------------------


def test_j2_a_forget_after_a_rollback_applies_to_the_file_it_is_given(model, tmp_path):
    path, _ = model
    backup = path.read_bytes()  # journal_seq 0
    retrain(path, index=[_mail_folder_index(tmp_path, [variant(1)], "one")])  # record 1, a patch
    spam_filter, state = store.load_for_update(path)
    store.save(spam_filter, path, state.seq)  # the file holds record 1
    retrain(path, index=[_mail_folder_index(tmp_path, [variant(2)], "two")])  # record 2, past the file
    path.write_bytes(backup)  # rolled back: record 2 was made for another file (a gap)

    gone = MESSAGES[0]
    first = forget(path, index=[_mail_folder_index(tmp_path, [gone], "gone")])
    assert first["forgotten"]["spam"] == 1
    loaded = store.load(path)
    assert loaded.ledger.label(message_digest(gone.raw)) is None  # it stays forgotten
    again = forget(path, index=[str(tmp_path / "gone")])
    assert again["not_found"] == 1 and not again["written"]
    expected = SpamFilter(every_message())
    fit(expected, MESSAGES[1:60])
    assert loaded.n_learned == expected.n_learned
    assert np.array_equal(loaded.counts()["class_count"], expected.counts()["class_count"])


# -- J3: the model's lock --------------------------------------------------------------


def test_j3_the_lock_file_is_private_to_those_who_can_write_the_model(model):
    path, _ = model
    old = os.umask(0o022)
    try:
        with model_lock(path):
            pass
    finally:
        os.umask(old)
    assert stat.S_IMODE(lock_path(path).stat().st_mode) == 0o600


def test_j3_a_lock_file_others_could_open_is_replaced_and_their_flock_holds_nothing(model,
                                                                                   tmp_path):
    path, _ = model
    lock = lock_path(path)
    lock.write_bytes(b"")
    lock.chmod(0o644)  # as an earlier textnb made it
    with open(lock, "rb") as intruder:  # what any local user could do with a 0644 file
        fcntl.flock(intruder, fcntl.LOCK_EX)
        report = retrain(path, index=[_mail_folder_index(tmp_path, [variant(1)])], lock_timeout=5)
        assert report["written"]
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another local user")
def test_j3_another_local_user_cannot_open_the_lock_file(model):
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="textnb-lock-"))
    try:
        folder.chmod(0o755)  # open to everyone, as a home directory may be
        path = folder / "model.tnb"
        shutil.copyfile(model[0], path)
        with model_lock(path):
            pass
        assert _as_nobody_can_open(lock_path(path)) is False
    finally:
        shutil.rmtree(folder)


def _as_nobody_can_open(path) -> bool:
    """Whether user 'nobody' can open ``path`` to flock it (a forked child drops root)."""
    child = os.fork()
    if child == 0:  # as 'nobody': open the lock file to flock it
        try:
            os.setgid(65534)
            os.setuid(65534)
            os.open(path, os.O_RDONLY)
            os._exit(1)
        except PermissionError:
            os._exit(0)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    assert code in (0, 1)
    return code == 1


def test_j3_a_scorer_waiting_for_the_lock_retries_at_its_interval_and_says_so_once(
        model, caplog):
    path, _ = model
    scorer = ResidentModel(path, flush_seconds=0.05)
    scorer.update("LEARN", variant(1).raw, "spam")
    with caplog.at_level(logging.INFO, "textnb"), model_lock(path):
        tries = 0
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            time.sleep(0.2)  # the watcher's poll
            tries += 1
            assert not scorer.flush()
    said = [r for r in caplog.records if "writing later" in r.getMessage()]
    assert len(said) == 1 and tries >= 5
    assert scorer.flush(force=True)


def test_j3_a_retrain_waiting_on_a_held_lock_gives_up_at_wait(model, tmp_path):
    path, _ = model
    with model_lock(path), pytest.raises(ModelLockedError, match="--wait"):
        retrain(path, index=[_mail_folder_index(tmp_path, [variant(1)])], lock_timeout=0.2)


# -- J4, J6: the journal is a regular file textnb made -----------------------------------


def test_j4_a_journal_that_is_a_symlink_is_refused_and_its_target_untouched(model, tmp_path):
    path, _ = model
    target = tmp_path / "precious.txt"
    target.write_bytes(b"someone else's file\n")
    target.chmod(0o644)
    journal_path(path).symlink_to(target)
    with pytest.raises(UntrustedFileError, match="symbolic link"):
        retrain(path, index=[_mail_folder_index(tmp_path, [variant(1)])])
    with pytest.raises(UntrustedFileError, match="symbolic link"):
        store.load(path)
    with pytest.raises(UntrustedFileError, match="symbolic link"):
        ResidentModel(path).update("LEARN", variant(2).raw, "spam")
    assert target.read_bytes() == b"someone else's file\n"
    result = _textnb("retrain", "--model", path, "--index", _mail_folder_index(tmp_path, [variant(3)], "i3"))
    assert result.returncode != 0 and b"symbolic link" in result.stderr
    assert b"Traceback" not in result.stderr
    assert target.read_bytes() == b"someone else's file\n"


def test_j4_a_journal_with_a_second_name_is_refused(model, tmp_path):
    path, _ = model
    other = tmp_path / "other"
    other.write_bytes(b"")
    os.link(other, journal_path(path))
    with pytest.raises(UntrustedFileError, match="2 names"):
        ResidentModel(path).update("LEARN", variant(2).raw, "spam")
    assert other.read_bytes() == b""


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_j6_a_journal_that_is_a_fifo_or_a_device_is_refused_at_once(model, kind):
    path, _ = model
    journal = journal_path(path)
    if kind == "fifo":
        os.mkfifo(journal)
    else:
        journal.symlink_to("/dev/zero")
    started = time.monotonic()
    info = _textnb("info", "--model", path, timeout=60)
    assert info.returncode != 0 and b"Traceback" not in info.stderr
    assert str(journal).encode() in info.stderr
    serve = _textnb("serve", "--model", path, "--socket", path.parent / "s.sock", timeout=60)
    assert serve.returncode != 0 and str(journal).encode() in serve.stderr
    assert time.monotonic() - started < 60


def test_j6_a_model_that_is_a_fifo_is_refused_at_once(tmp_path):
    fifo = tmp_path / "model.tnb"
    os.mkfifo(fifo)
    with pytest.raises(ModelFormatError, match="not a regular file"):
        store.load(fifo)


# -- J5, J7, J10: what a record may make the loader do -----------------------------------


def _patch_of(path, tmp_path, mail) -> dict:
    """The patch a retrain of ``mail`` appends (read back from the journal)."""
    retrain(path, index=[_mail_folder_index(tmp_path, mail, "patched")])
    (record,) = Journal(path).read()
    return record.patch


def _replace_journal(path, patch: dict) -> None:
    journal_path(path).unlink()
    Journal(path).append(Record("PATCH", None, count_patch.encode(patch)), 0)


@pytest.mark.parametrize("column", [250_000_000, 10**9])
def test_j5_a_patch_naming_a_column_far_past_the_model_is_refused_without_allocating(
        model, tmp_path, column):
    path, _ = model
    patch = _patch_of(path, tmp_path, [variant(1)])
    columns, born, last = patch["history"]
    patch["history"] = [columns + [column], born + [1], last + [1]]
    _replace_journal(path, patch)
    assert journal_path(path).stat().st_size < 64_000
    started = time.monotonic()
    with pytest.raises(ModelFormatError, match="ledger columns that do not exist"):
        store.load(path)
    assert time.monotonic() - started < 5


def test_j5_a_patch_whose_lists_do_not_match_its_columns_is_refused(model, tmp_path):
    path, _ = model
    patch = _patch_of(path, tmp_path, [variant(1)])
    patch["n_columns_after"] = patch["n_columns"] + 10**9
    _replace_journal(path, patch)
    with pytest.raises(ModelFormatError, match="ends at"):
        store.load(path)


def test_j10_a_patch_whose_message_counts_disagree_with_its_counts_is_refused(model,
                                                                            tmp_path):
    path, _ = model
    patch = _patch_of(path, tmp_path, [variant(1)])
    patch["n_learned"] = {**patch["n_learned"], "spam": 100_000}
    _replace_journal(path, patch)
    with pytest.raises(ModelFormatError, match="100000 spam messages were learned"):
        store.load(path)
    info = _textnb("info", "--model", path)
    assert info.returncode != 0 and b"100000" in info.stderr


@pytest.mark.parametrize("field", ["length", "sequence"])
def test_j7_a_record_with_a_field_of_thousands_of_digits_ends_the_journal_there(
        model, tmp_path, field, caplog):
    path, memory = model
    scorer = ResidentModel(path, flush_seconds=3600)
    scorer.update("LEARN", variant(1).raw, "spam")
    huge = b"9" * 5000
    payload = variant(2).raw
    if field == "length":
        bad = b"TNBJ2 2 LEARN spam " + huge + b" 0\n" + payload + b"\n"
    else:
        bad = frame(b"TNBJ2", [huge, b"LEARN", b"spam"], payload)
    with open(journal_path(path), "ab") as fh:
        fh.write(bad)
    with caplog.at_level(logging.WARNING, "textnb"):
        loaded = store.load(path)  # the record before it applies; reading stops there
    assert any("not a complete, intact record numbered in order" in r.getMessage()
               for r in caplog.records)
    learn_messages(memory, [variant(1)])
    assert loaded.ledger == memory.ledger
    assert scorer.update("LEARN", variant(3).raw, "ham") == "new"  # the scorer learns on
    assert [r.seq for r in Journal(path).read()] == [1, 2]
    learn_messages(memory, [RawMessage("v3", variant(3).raw, "ham")])
    assert store.load(path).ledger == memory.ledger


# -- the mail path after a scorer is killed ---------------------------------------------


@pytest.mark.corpus
@pytest.mark.slow
def test_j1_after_kill_9_of_a_scorer_that_learned_100_messages_the_fallback_scores_as_one_retrain(
        shared_corpora, tmp_path):
    """A scorer killed right after acknowledging 100 learns (none written to the model
    file); then ``textnb classify`` of 1,000 messages and ``textnb filter`` of one, in new
    processes, as the clients' fallback runs them: the same verdicts as a model that
    learned the 100 in one ``textnb retrain``, and no traceback."""
    import signal

    from textnb.delivery.client import learn_remote
    from textnb.mail.corpora import iter_corpus

    from _wire import wait_for

    mail = {"spam": [], "ham": []}
    for example in iter_corpus("spamassassin", shared_corpora):
        if example.relpath.startswith(("spam/", "spam_2/", "easy_ham/")):
            mail[example.label].append(example)
    folder = tmp_path / "mail"
    folder.mkdir()

    def index(name, examples):
        lines = []
        for e in examples:
            path = folder / e.relpath.replace("/", "_")
            path.write_bytes(e.raw)
            lines.append(f"{e.label} mail/{path.name}")
        (tmp_path / name).write_text("\n".join(lines) + "\n")
        return tmp_path / name

    train = index("train", mail["spam"][:300] + mail["ham"][:300])
    learned = mail["spam"][300:350] + mail["ham"][300:350]
    unseen = mail["spam"][350:600] + mail["ham"][350:1100]
    assert len(unseen) == 1000
    model = tmp_path / "model.tnb"
    assert _textnb("train", "--model", model, "--index", train, *EVERY_MESSAGE).returncode == 0
    reference = tmp_path / "reference.tnb"
    reference.write_bytes(model.read_bytes())
    assert _textnb("retrain", "--model", reference,
                   "--index", index("learned", learned)).returncode == 0

    sock = tmp_path / "s.sock"
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    server = subprocess.Popen([sys.executable, "-m", "textnb", "serve", "--model", str(model),
                               "--socket", str(sock), "--flush-seconds", "3600"],
                              stderr=subprocess.DEVNULL, env=env)
    try:
        assert wait_for(sock.exists, seconds=120)
        for e in learned:
            learn_remote(str(sock), e.raw, e.label, timeout=30.0)
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=30)
    assert store.journal_seq_of(model) == 0 and len(Journal(model).read()) == 100

    unseen_index = index("unseen", unseen)
    got = _textnb("classify", "--json", "--model", model, "--index", unseen_index, timeout=600)
    want = _textnb("classify", "--json", "--model", reference, "--index", unseen_index,
                   timeout=600)
    assert got.returncode == want.returncode == 0, got.stderr.decode()
    assert b"Traceback" not in got.stderr
    verdicts = [line.replace(str(model).encode(), b"M") for line in got.stdout.splitlines()]
    expected = [line.replace(str(reference).encode(), b"M") for line in want.stdout.splitlines()]
    assert len(verdicts) == 1000 and verdicts == expected

    one = unseen[0].raw
    filtered = _textnb("filter", "--model", model, stdin=one)
    assert filtered.returncode == 0 and b"Traceback" not in filtered.stderr
    assert filtered.stdout == _textnb("filter", "--model", reference, stdin=one).stdout
