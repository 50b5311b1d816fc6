"""The model journal's count patches (textnb.modelfile.journal, count_patch): loading file +
journal gives, bit for bit,
the model the runs left in memory; crashes leave the model before or after a run."""

import os

import numpy as np
import pytest

from textnb.errors import ModelFormatError
from textnb.mail.sources import RawMessage, iter_index
from textnb.modelfile import count_patch, retrain, store
from textnb.modelfile.journal import Journal, Record, journal_path
from textnb.modelfile.prune import prune
from textnb.modelfile.retrain import fit, forget_messages, learn_messages
from textnb.spamfilter import SpamFilter

from conftest import SAMPLE_INDEX, every_message
from helpers import write_index

MESSAGES = list(iter_index(SAMPLE_INDEX))  # 40 spam, 60 ham
FLIP = {"spam": "ham", "ham": "spam"}


pytestmark = pytest.mark.usefixtures("memo_tokens")


def assert_identical(a: SpamFilter, b: SpamFilter) -> None:
    assert a.vocabulary.tokens_ == b.vocabulary.tokens_
    np.testing.assert_array_equal(a.model.class_count_, b.model.class_count_)
    np.testing.assert_array_equal(a.model.feature_count_, b.model.feature_count_)
    np.testing.assert_array_equal(a.doc_freq_, b.doc_freq_)
    np.testing.assert_array_equal(a.model.feature_mask_, b.model.feature_mask_)
    assert a.n_learned == b.n_learned
    assert a.ledger.same_history(b.ledger) and list(a.ledger) == list(b.ledger)
    raws = [m.raw for m in MESSAGES]
    np.testing.assert_array_equal(a.log_odds(raws), b.log_odds(raws))


@pytest.fixture
def base(tmp_path, monkeypatch):
    """A model file of the first 60 messages, and the same model in memory. The sample
    model is small (a record is a good part of it): let the journal grow to 10 times it."""
    monkeypatch.setattr(count_patch, "COMPACT_FRACTION", 10.0)
    spam_filter = SpamFilter(every_message())
    fit(spam_filter, MESSAGES[:60])
    path = store.save(spam_filter, tmp_path / "model.tnb")
    return path, spam_filter


def test_runs_append_records_and_load_gives_the_model_in_memory(base, tmp_path):
    path, memory = base
    size = path.stat().st_size
    runs = [MESSAGES[60:61], MESSAGES[61:71], MESSAGES[71:90]]
    for i, run in enumerate(runs):
        result = retrain.retrain(path, index=[write_index(tmp_path, run)])
        learn_messages(memory, run)
        assert result["write"] == "journal"
    flipped = [RawMessage(m.source, m.raw, FLIP[m.label]) for m in MESSAGES[:3]]
    retrain.retrain(path, index=[write_index(tmp_path, flipped)])
    learn_messages(memory, flipped)
    assert retrain.forget(path, [m.source for m in MESSAGES[5:8]])["write"] == "journal"
    forget_messages(memory, MESSAGES[5:8])
    assert path.stat().st_size == size  # the file was not rewritten
    assert_identical(store.load(path), memory)
    # and the whole-file rewrite of the same model is the same model
    store.save(memory, tmp_path / "whole.tnb")
    assert_identical(store.load(tmp_path / "whole.tnb"), store.load(path))


def test_a_record_cut_short_is_ignored_and_cut_off_by_the_next_run(base, tmp_path):
    path, memory = base
    retrain.retrain(path, index=[write_index(tmp_path, MESSAGES[60:70])])
    learn_messages(memory, MESSAGES[60:70])
    journal = journal_path(path)
    good = journal.stat().st_size
    retrain.retrain(path, index=[write_index(tmp_path, MESSAGES[70:80])])
    for cut in (1, 40, journal.stat().st_size - good - 1):  # a crash mid-append
        with open(journal, "r+b") as fh:
            fh.truncate(journal.stat().st_size - cut if cut < 40 else good + cut)
        assert_identical(store.load(path), memory)
    retrain.retrain(path, index=[write_index(tmp_path, MESSAGES[80:90])])
    learn_messages(memory, MESSAGES[80:90])
    assert_identical(store.load(path), memory)


def test_a_record_failing_its_checksum_is_ignored(base, tmp_path):
    path, memory = base
    retrain.retrain(path, index=[write_index(tmp_path, MESSAGES[60:70])])
    learn_messages(memory, MESSAGES[60:70])
    journal = journal_path(path)
    good = journal.stat().st_size
    retrain.retrain(path, index=[write_index(tmp_path, MESSAGES[70:80])])
    data = bytearray(journal.read_bytes())
    data[good + 100] ^= 0x01
    journal.write_bytes(bytes(data))
    assert_identical(store.load(path), memory)


def test_a_journal_for_another_file_is_ignored(base, tmp_path):
    # a crash after the rewrite's rename and before the journal's removal
    path, memory = base
    retrain.retrain(path, index=[write_index(tmp_path, MESSAGES[60:70])])
    learn_messages(memory, MESSAGES[60:70])
    stale = journal_path(path).read_bytes()
    store.save(memory, path)  # the rewrite holds the journal's record
    journal_path(path).write_bytes(stale)
    assert_identical(store.load(path), memory)
    retrain.retrain(path, index=[write_index(tmp_path, MESSAGES[70:75])])
    learn_messages(memory, MESSAGES[70:75])
    assert journal_path(path).read_bytes() != stale
    assert_identical(store.load(path), memory)


def test_the_journal_is_folded_into_the_file_when_it_grows(base, tmp_path, monkeypatch):
    path, memory = base
    monkeypatch.setattr(count_patch, "COMPACT_FRACTION", 0.1)
    writes = []
    for i in range(60, 100, 4):
        run = MESSAGES[i:i + 4]
        writes.append(retrain.retrain(path, index=[write_index(tmp_path, run)])["write"])
        learn_messages(memory, run)
    assert "journal" in writes and "rewritten" in writes
    if writes[-1] == "rewritten":
        assert not journal_path(path).exists()
    assert_identical(store.load(path), memory)


def test_a_journal_that_does_not_fit_its_file_is_named(base, tmp_path):
    path, memory = base
    retrain.retrain(path, index=[write_index(tmp_path, MESSAGES[60:70])])
    patch = Journal(path).read()[0].patch
    bad = dict(patch, n_columns=patch["n_columns"] + 1)
    os.unlink(journal_path(path))
    Journal(path).append(Record("PATCH", None, count_patch.encode(bad)))
    with pytest.raises(ModelFormatError, match=r"model\.tnb\.journal.*do not fit"):
        store.load(path)


def test_a_pruned_model_is_rewritten_and_then_journalled(base, tmp_path):
    path, memory = base
    small, _ = prune(memory, max_df=1, keep_last=10)
    assert store.commit(small, path, count_patch.Snapshot.of(memory),
                        store.load_for_update(path)[1]) == "rewritten"
    learn_messages(small, MESSAGES[60:70])
    assert retrain.retrain(path, index=[write_index(tmp_path, MESSAGES[60:70])])["write"] \
        == "journal"
    assert_identical(store.load(path), small)


def test_compact_folds_the_journal_and_prunes_on_request(base, tmp_path):
    from typer.testing import CliRunner

    from textnb.cli import app

    path, memory = base
    retrain.retrain(path, index=[write_index(tmp_path, MESSAGES[60:90])])
    learn_messages(memory, MESSAGES[60:90])
    result = CliRunner().invoke(app, ["compact", "--model", str(path)])
    assert result.exit_code == 0, result.output
    assert "folded 1 journal record(s)" in result.output
    assert not journal_path(path).exists()
    assert_identical(store.load(path), memory)
    result = CliRunner().invoke(app, ["compact", "--model", str(path), "--prune",
                                      "--keep-last", "20"])
    assert result.exit_code == 0, result.output
    small, report = prune(memory, 1, 20)
    assert f"pruned {report.dropped:,} of {report.tokens_before:,} tokens" in result.output
    assert_identical(store.load(path), small)


def test_an_append_changes_the_files_mtime_so_watchers_reload(base, tmp_path):
    # textnb serve reloads when (inode, size, mtime) changes and checks before it writes
    path, _ = base
    st = os.stat(path)
    for i in range(3):
        retrain.retrain(path, index=[write_index(tmp_path, MESSAGES[60 + i:61 + i])])
        now = os.stat(path)
        assert now.st_mtime_ns > st.st_mtime_ns and now.st_ino == st.st_ino
        st = now
