"""One journal for retrain and the resident scorer (textnb.modelfile.journal): numbered
records, a model file that says which it holds, and the two writers interleaved.

tests/test_delta.py holds the count patches to "file + journal = the model in memory, bit
for bit"; tests/test_server_learn.py kills a learning scorer. Here: what the scorer learned
is seen by every reader and can be forgotten by ``textnb forget`` before it reaches the
file; a retrain that the scorer overtook rewrites instead of appending a patch that no
longer fits; a crash between a rewrite and the journal's trim; an earlier textnb's files.
"""

import hashlib
import io
import json
import threading
import zipfile

import numpy as np
import pytest

from textnb.delivery.server import ResidentModel
from textnb.mail.sources import RawMessage, iter_index
from textnb.modelfile import count_patch, retrain, store
from textnb.modelfile.journal import Journal, Record, journal_path
from textnb.modelfile.journal_frames import frame
from textnb.modelfile.retrain import fit, forget_messages, learn_messages
from textnb.models.ledger import message_digest
from textnb.spamfilter import SpamFilter

from conftest import SAMPLE_INDEX
from helpers import write_index

MESSAGES = list(iter_index(SAMPLE_INDEX))  # 40 spam, 60 ham

pytestmark = pytest.mark.usefixtures("memo_tokens")


def variant(i: int, label: str = "spam") -> RawMessage:
    """A message of its own (its own ledger digest)."""
    raw = MESSAGES[i % 40].raw.rstrip(b"\n") + f"\njournal variant {i}\n".encode()
    return RawMessage(f"variant-{i}", raw, label)


def same_model(a: SpamFilter, b: SpamFilter) -> bool:
    return (a.vocabulary.tokens_ == b.vocabulary.tokens_ and list(a.ledger) == list(b.ledger)
            and a.n_learned == b.n_learned
            and np.array_equal(a.model.feature_count_, b.model.feature_count_)
            and np.array_equal(a.model.class_count_, b.model.class_count_)
            and np.array_equal(a.doc_freq_, b.doc_freq_))


def _files(tmp_path, messages, name):
    folder = tmp_path / name
    folder.mkdir()
    for i, m in enumerate(messages):
        (folder / f"{i}.eml").write_bytes(m.raw)
    return str(folder)


@pytest.fixture
def model(tmp_path, monkeypatch):
    """A model file of the first 60 messages, and the same model in memory."""
    monkeypatch.setattr(count_patch, "COMPACT_FRACTION", 10.0)  # the sample model is small
    memory = SpamFilter()
    fit(memory, MESSAGES[:60])
    return store.save(memory, tmp_path / "model.tnb"), memory


def test_the_file_says_which_records_it_holds(model):
    path, memory = model
    assert store.journal_seq_of(path) == 0
    scorer = ResidentModel(path, flush_seconds=3600)
    for i in range(3):
        scorer.update("LEARN", variant(i).raw, "spam")
    assert [r.seq for r in Journal(path).read()] == [1, 2, 3]
    assert scorer.flush(force=True)
    assert store.journal_seq_of(path) == 3 and not journal_path(path).exists()
    scorer.update("LEARN", variant(3).raw, "spam")
    assert [r.seq for r in Journal(path).read()] == [4]  # numbered on from the file


def test_every_reader_sees_what_the_scorer_learned_before_it_is_written(model):
    path, memory = model
    scorer = ResidentModel(path, flush_seconds=3600)
    scorer.update("LEARN", variant(1).raw, "spam")
    scorer.update("LEARN", MESSAGES[0].raw, "ham")  # relabelled
    learn_messages(memory, [variant(1), RawMessage("-", MESSAGES[0].raw, "ham")])
    assert store.journal_seq_of(path) == 0  # not in the file yet ...
    assert same_model(store.load(path), memory)  # ... and every load sees it
    assert same_model(scorer.spam_filter, memory)


def test_forget_reaches_a_message_the_scorer_learned_and_it_stays_forgotten(model, tmp_path):
    path, memory = model
    scorer = ResidentModel(path, flush_seconds=3600)
    learned = variant(7)
    scorer.update("LEARN", learned.raw, "spam")
    result = retrain.forget(path, [_files(tmp_path, [learned], "gone")])
    assert result["forgotten"]["spam"] == 1 and result["write"] == "journal"
    assert store.load(path).ledger.label(message_digest(learned.raw)) is None
    assert scorer.check()  # the append advanced the file's mtime: the scorer reloads
    assert scorer.spam_filter.ledger.label(message_digest(learned.raw)) is None
    assert scorer.flush(force=True)
    assert store.load(path).ledger.label(message_digest(learned.raw)) is None
    learn_messages(memory, [learned])  # its new tokens keep their (empty) columns
    forget_messages(memory, [learned])
    assert same_model(store.load(path), memory)


def test_a_retrain_the_scorer_overtook_rewrites_the_file_with_both(model, tmp_path):
    path, memory = model
    scorer = ResidentModel(path, flush_seconds=3600)
    spam_filter, state = store.load_for_update(path)
    before = count_patch.Snapshot.of(spam_filter)
    learn_messages(spam_filter, MESSAGES[60:70])
    scorer.update("LEARN", variant(2).raw, "spam")  # while the retrain was counting
    assert store.commit(spam_filter, path, before, state) == "rewritten"
    assert store.journal_seq_of(path) == 1 and not journal_path(path).exists()
    learn_messages(memory, MESSAGES[60:70] + [variant(2)])
    assert same_model(store.load(path), memory)
    # and a retrain nobody overtook appends its patch
    result = retrain.retrain(path, index=[str(write_index(tmp_path, MESSAGES[70:75]))])
    assert result["write"] == "journal"
    learn_messages(memory, MESSAGES[70:75])
    assert same_model(store.load(path), memory)


def test_a_crash_between_the_rewrite_and_the_trim_skips_the_held_records(model, tmp_path,
                                                                      monkeypatch):
    """The case a journal that names its file by checksum could not hold with the
    scorer's records in it: the scorer learns a message, a forget removes it (a patch
    after the scorer's record), the scorer writes the file and is killed before the
    journal drops the two records. Their numbers say the file holds both: the message
    stays forgotten."""
    path, memory = model
    scorer = ResidentModel(path, flush_seconds=3600)
    learned = variant(9)
    scorer.update("LEARN", learned.raw, "spam")
    retrain.forget(path, [_files(tmp_path, [learned], "gone")])
    scorer.check()
    kept = journal_path(path).read_bytes()
    with monkeypatch.context() as patch:
        patch.setattr(Journal, "trim", lambda self, through: None)  # killed before the trim
        assert scorer.flush(force=True)
    assert journal_path(path).read_bytes() == kept and store.journal_seq_of(path) == 2
    assert store.load(path).ledger.label(message_digest(learned.raw)) is None
    learn_messages(memory, [learned])
    forget_messages(memory, [learned])
    assert same_model(store.load(path), memory)
    scorer.update("LEARN", variant(10).raw, "ham")  # numbered past the file; the old cut off
    assert [r.seq for r in Journal(path).read()] == [1, 2, 3]
    learn_messages(memory, [variant(10, "ham")])
    assert same_model(store.load(path), memory)


def test_learning_and_retraining_at_once_lose_nothing(model, tmp_path):
    path, memory = model
    scorer = ResidentModel(path, flush_seconds=0.05)
    learned = [variant(100 + i, "spam" if i % 2 else "ham") for i in range(24)]
    done = threading.Event()

    def learn():
        try:
            for m in learned:
                scorer.update("LEARN", m.raw, m.label)
                scorer.flush()
        finally:
            done.set()

    thread = threading.Thread(target=learn)
    thread.start()
    writes = []
    for k in range(4):
        run = MESSAGES[60 + 5 * k:65 + 5 * k]
        writes.append(retrain.retrain(path, index=[str(write_index(tmp_path, run))])["write"])
        scorer.check()
    thread.join(timeout=120)
    assert done.is_set()
    scorer.check()
    scorer.flush(force=True)
    learn_messages(memory, MESSAGES[60:80] + learned)
    loaded = store.load(path)
    missing = [(i, m.label) for i, m in enumerate(MESSAGES[60:80] + learned)
               if loaded.ledger.label(message_digest(m.raw)) != m.label]
    assert not missing, (writes, missing)
    assert loaded.n_learned == memory.n_learned
    assert np.array_equal(loaded.model.class_count_, memory.model.class_count_)
    assert same_model(ResidentModel(path).spam_filter, loaded)


def test_a_file_replaced_by_an_older_copy_skips_the_patches_made_for_another(model, tmp_path):
    path, memory = model
    old = path.read_bytes()
    scorer = ResidentModel(path, flush_seconds=3600)
    scorer.update("LEARN", variant(3).raw, "spam")
    assert scorer.flush(force=True)  # the file holds record 1
    retrain.retrain(path, index=[str(write_index(tmp_path, MESSAGES[60:65]))])  # record 2, a patch
    scorer.update("LEARN", variant(4).raw, "spam")  # record 3
    path.write_bytes(old)  # a backup from before record 1
    loaded = store.load(path)  # the patch (made for another file) is skipped
    learn_messages(memory, [variant(4)])
    assert same_model(loaded, memory)


def _legacy(data: bytes) -> bytes:
    """A model file as an earlier textnb wrote it: no journal_seq."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            member = src.read(info)
            if info.filename == "textnb-model.json":
                meta = json.loads(member)
                del meta["journal_seq"]
                member = json.dumps(meta).encode()
            dst.writestr(info, member)
    return out.getvalue()


def test_an_earlier_textnbs_journals_are_read_and_folded_into_the_next_write(model, tmp_path):
    path, memory = model
    path.write_bytes(_legacy(path.read_bytes()))
    assert store.journal_seq_of(path) is None
    before = count_patch.Snapshot.of(memory)
    learn_messages(memory, MESSAGES[60:65])
    patch = count_patch.encode(count_patch.diff(before, memory))
    header = b"TNBD1 base " + hashlib.sha256(path.read_bytes()).hexdigest().encode() + b"\n"
    count_patch.legacy_delta_path(path).write_bytes(header + frame(b"TNBD1", [], patch))
    learned = variant(5)
    journal_path(path).write_bytes(frame(b"TNBJ1", [b"LEARN", b"spam"], learned.raw))
    learn_messages(memory, [learned])
    assert same_model(store.load(path), memory)
    result = retrain.retrain(path, index=[str(write_index(tmp_path, MESSAGES[65:68]))])
    assert result["write"] == "rewritten"  # the next write folds both in
    learn_messages(memory, MESSAGES[65:68])
    assert not count_patch.legacy_delta_path(path).exists() and not journal_path(path).exists()
    assert store.journal_seq_of(path) == 0
    assert same_model(store.load(path), memory)


def test_a_new_model_voids_the_journal_of_the_one_it_replaces(model, tmp_path):
    path, _ = model
    scorer = ResidentModel(path, flush_seconds=3600)
    scorer.update("LEARN", variant(6).raw, "spam")
    fresh = SpamFilter()
    fit(fresh, MESSAGES[40:100])
    store.save(fresh, path)  # `textnb train` over it
    assert store.journal_seq_of(path) == 1 and not journal_path(path).exists()
    assert same_model(store.load(path), fresh)
    scorer.check()
    scorer.update("LEARN", variant(8).raw, "spam")
    assert [r.seq for r in Journal(path).read()] == [2]
    learn_messages(fresh, [variant(8)])
    assert same_model(store.load(path), fresh)


def test_an_append_after_another_writer_trimmed_and_refilled_the_journal_cuts_off_nothing(
        tmp_path):
    """Each writer remembers how far it has read the journal; after another writer removed
    the file, the new one may get the same inode number and be longer than that point."""
    path = tmp_path / "m.tnb"
    scorer, other = Journal(path), Journal(path)
    scorer.append(Record("LEARN", "spam", b"Subject: a\n\nshort\n"))
    other.trim(1)  # a rewrite holds record 1: the journal goes
    other.append(Record("LEARN", "ham", b"Subject: b\n\n" + b"long body\n" * 500), known=1)
    scorer.append(Record("FORGET", None, b"Subject: a\n\nshort\n"), known=1)
    assert [(r.seq, r.kind) for r in Journal(path).read()] == [(2, "LEARN"), (3, "FORGET")]


def test_a_route_alpha_model_read_through_its_journal_and_compacted_scores_as_in_memory(
        tmp_path, monkeypatch):
    from textnb.config import load_config

    monkeypatch.setattr(count_patch, "COMPACT_FRACTION", 10.0)  # the sample model is small
    memory = SpamFilter(load_config(None, {"model.route_alpha": 0.03}))
    fit(memory, MESSAGES[:60])
    path = store.save(memory, tmp_path / "model.tnb")
    saved_columns = len(memory.vocabulary)
    scorer = ResidentModel(path, flush_seconds=3600)
    learned = [variant(i) for i in range(3)] + [RawMessage("-", MESSAGES[70].raw, "ham")]
    for message in learned:
        scorer.update("LEARN", message.raw, message.label)
    learn_messages(memory, learned)
    want = memory.log_odds(m.raw for m in MESSAGES)
    patched = store.load(path)  # the file and its journal's patches (new columns too)
    assert patched.model.route_columns_known == len(patched.vocabulary) > saved_columns
    np.testing.assert_array_equal(patched.log_odds(m.raw for m in MESSAGES), want)
    np.testing.assert_array_equal(scorer.spam_filter.log_odds(m.raw for m in MESSAGES), want)
    assert scorer.flush(force=True) and not journal_path(path).exists()  # compacted
    np.testing.assert_array_equal(store.load(path).log_odds(m.raw for m in MESSAGES), want)
