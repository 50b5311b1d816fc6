"""A model file brought into the shared store (``textnb import --store``), against a real
PostgreSQL (the private cluster of tests/pg_cluster.py; skips naming the install lines).

The file's ledger comes along without each message's counts: a relabel or forget of one
of its messages takes the counts of the mail the host has, checked against the ledger's
tokens hash. These tests hold the import to the file, bit for bit and count for count.
"""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.helpers import write_index
from tests.pg_cluster import pg_cluster, store_url  # noqa: F401  (fixtures)
from tests.test_shared_store import (counts_of, host, relabelled, sample, scored_alike,
                                     tune_write)
from textnb.cli import app
from textnb.modelfile import store

from conftest import EVERY_MESSAGE, every_message

pytestmark = pytest.mark.usefixtures("memo_tokens")


def flipped(message):
    return relabelled(message, "ham" if message.label == "spam" else "spam")


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def model_file(tmp_path, sample_index, *options):
    path = tmp_path / "model.tnb"
    result = invoke("train", "--model", path, "--index", sample_index, *EVERY_MESSAGE, *options)
    assert result.exit_code == 0, result.output
    return path


def imported(store_url, path, *options):
    result = invoke("import", path, "--store", store_url, *options)
    assert result.exit_code == 0, result.output
    return result


def schema_version(store_url):
    import psycopg

    with psycopg.connect(store_url, autocommit=True) as conn:
        return conn.execute("SELECT version FROM textnb_schema").fetchone()[0]


@pytest.mark.parametrize("tuned", [False, True], ids=["trained", "tuned"])
def test_every_host_scores_an_imported_file_as_the_file_does_bit_for_bit(
        store_url, sample_index, tmp_path, tuned):
    path = model_file(tmp_path, sample_index)
    if tuned:
        tune_write(["--model", str(path)], sample_index)
    filed = store.load(path)
    assert (filed.calibration is not None) == tuned
    # A host follows the model the import replaces; another joins after it.
    assert invoke("train", "--store", store_url, "--index",
                  write_index(tmp_path, sample(sample_index)[:30])).exit_code == 0
    following = host(store_url)
    said = imported(store_url, path, "--replace")
    assert "8,366 tokens and 100 ledger entries (40 spam, 60 ham)" in said.output
    following.catch_up()
    joining = host(store_url)
    assert following.seq == joining.seq
    messages = sample(sample_index)
    for h in (following, joining):
        assert h.spam_filter.config == filed.config
        assert h.spam_filter.calibration == filed.calibration
        assert h.spam_filter.threshold == filed.threshold
        assert counts_of(h.spam_filter) == counts_of(filed)
        assert h.spam_filter.ledger.same_history(filed.ledger)
        scored_alike(h.spam_filter, filed, messages)
    unlabelled = sample_index.parent / "unlabelled"
    by_store = invoke("classify", "--store", store_url, unlabelled)
    by_file = invoke("classify", "--model", path, unlabelled)
    assert by_store.exit_code == 0 and by_store.stdout == by_file.stdout


def test_a_message_the_file_learned_is_known_to_the_store(store_url, sample_index, tmp_path):
    imported(store_url, model_file(tmp_path, sample_index))
    h = host(store_url)
    before, held = counts_of(h.spam_filter), h.seq
    report = h.learn_messages(sample(sample_index))
    assert report["known"] == 100 and not any(report["new"].values())
    m = sample(sample_index)[0]
    assert h.update("LEARN", m.raw, m.label) == "known"
    h.catch_up()
    assert h.seq == held and counts_of(h.spam_filter) == before  # no record written


def test_relabel_and_forget_of_imported_messages_equal_the_file_models(
        store_url, sample_index, tmp_path):
    messages = sample(sample_index)
    path = model_file(tmp_path, sample_index)
    imported(store_url, path)
    scorer = host(store_url)
    # Relabel: a batch through the command, two through a scorer, as on the file.
    moved = write_index(tmp_path, [flipped(m) for m in messages[:10]])
    for place in (["--store", store_url], ["--model", path]):
        result = invoke("retrain", *place, "--index", moved)
        assert result.exit_code == 0 and "moved" in result.output, result.output
    for m in messages[10:12]:
        assert scorer.update("LEARN", m.raw, flipped(m).label) == "moved"
    assert invoke("retrain", "--model", path, "--index",
                  write_index(tmp_path, [flipped(m) for m in messages[10:12]])).exit_code == 0
    # Forget: a batch through the command, one through a scorer.
    gone = write_index(tmp_path, messages[80:95])
    for place in (["--store", store_url], ["--model", path]):
        result = invoke("forget", *place, "--index", gone)
        assert result.exit_code == 0 and "forgot" in result.output, result.output
    assert scorer.update("FORGET", messages[95].raw) == messages[95].label
    assert invoke("forget", "--model", path, "--index",
                  write_index(tmp_path, messages[95:96])).exit_code == 0
    filed = store.load(path)
    for h in (scorer, host(store_url)):
        h.catch_up()
        assert counts_of(h.spam_filter) == counts_of(filed)  # exactly: integer counts
        assert h.spam_filter.ledger == filed.ledger
        scored_alike(h.spam_filter, filed, messages)


def test_a_relabelled_imported_message_keeps_its_counts_so_a_forget_needs_no_mail(
        store_url, sample_index, tmp_path):
    from textnb.modelfile.postgres.database import Item
    from textnb.models.ledger import message_digest

    messages = sample(sample_index)
    imported(store_url, model_file(tmp_path, sample_index))
    h = host(store_url)
    h.learn_messages([flipped(messages[0])])
    bare = [Item("FORGET", message_digest(m.raw)) for m in messages[:2]]
    assert h.store.change(h.model_id, bare)[0] == [flipped(messages[0]).label, "needs-mail"]
    h.catch_up()
    assert message_digest(messages[0].raw) not in h.spam_filter.ledger
    assert message_digest(messages[1].raw) in h.spam_filter.ledger


@pytest.mark.parametrize("kind", ["LEARN", "FORGET"])
def test_mail_that_tokenises_otherwise_than_the_file_learned_it_is_refused(
        store_url, sample_index, tmp_path, kind):
    """As if a textnb upgrade had changed the tokenizer: the row's tokens hash is not the
    hash of the tokens the host makes of the mail, whose counts are then not the ones the
    file added."""
    import psycopg

    from textnb.models.ledger import message_digest

    messages = sample(sample_index)
    imported(store_url, model_file(tmp_path, sample_index))
    wrong = messages[3]
    with psycopg.connect(store_url, autocommit=True) as conn:
        conn.execute("UPDATE textnb_ledger SET tokens_hash = tokens_hash + 1 WHERE digest = %s",
                     (message_digest(wrong.raw),))
    h = host(store_url)
    before, held = counts_of(h.spam_filter), h.seq
    with pytest.raises(Exception, match="tokenises differently now") as refused:
        if kind == "LEARN":
            h.learn_messages([flipped(m) for m in messages[:5]])
        else:
            h.learn_messages(messages[:5], kind="FORGET")
    assert repr(wrong.source) in str(refused.value)
    label = flipped(wrong).label if kind == "LEARN" else None
    with pytest.raises(Exception, match="tokenises differently now"):
        h.update(kind, wrong.raw, label)
    # Through a scorer's outbox: the entry is applied as nothing, not sent again and again.
    scorer = host(store_url, outbox=tmp_path / "outbox")
    with pytest.raises(Exception, match="tokenises differently now"):
        scorer.update(kind, wrong.raw, label)
    assert not scorer.sender.waiting()
    scorer.close()
    h.catch_up()
    assert h.seq == held and counts_of(h.spam_filter) == before  # none of the batch made
    args = (["retrain", "--index", write_index(tmp_path, [flipped(wrong)])] if kind == "LEARN"
            else ["forget", "--index", write_index(tmp_path, [wrong])])
    result = invoke(*args, "--store", store_url)
    assert result.exit_code == 1 and "tokenises differently now" in result.output


def test_an_existing_store_model_is_replaced_only_when_asked(store_url, sample_index,
                                                             tmp_path):
    path = model_file(tmp_path, sample_index)
    assert invoke("train", "--store", store_url, "--store-model", "site", "--index",
                  write_index(tmp_path, sample(sample_index)[:30])).exit_code == 0
    held = counts_of(host(store_url, "site").spam_filter)
    refused = invoke("import", path, "--store", store_url, "--store-model", "site")
    assert refused.exit_code == 1
    assert "has a model 'site' already; give --replace" in refused.output
    assert counts_of(host(store_url, "site").spam_filter) == held
    imported(store_url, path, "--store-model", "site", "--replace")
    assert counts_of(host(store_url, "site").spam_filter) == counts_of(store.load(path))


@pytest.mark.parametrize("case, says", [
    ("numeric", "numeric features (model.numeric_model = 'gaussian')"),
    ("pruned", "had rare tokens pruned"),
])
def test_a_model_the_store_cannot_hold_is_refused_naming_why(store_url, sample_index,
                                                             tmp_path, case, says):
    from textnb.config import load_config
    from textnb.mail.sources import iter_index
    from textnb.modelfile.prune import prune
    from textnb.modelfile.retrain import fit
    from textnb.spamfilter import SpamFilter

    path = tmp_path / "model.tnb"
    if case == "numeric":
        numeric = SpamFilter(load_config(None, {"model.numeric_model": "gaussian"}))
        store.save(numeric.fit(iter_index(sample_index)), path)
    else:
        spam_filter = SpamFilter(every_message())
        fit(spam_filter, iter_index(sample_index))
        pruned, report = prune(spam_filter, max_df=1, keep_last=20)
        assert report.dropped and pruned.ledger.pruned_at
        store.save(pruned, path)
    result = invoke("import", path, "--store", store_url)
    assert result.exit_code == 1 and says in result.output, result.output
    assert invoke("info", "--store", store_url).exit_code == 1  # no model was made


def test_a_text_dump_imports_into_a_store_as_its_model_file_does(store_url, sample_index,
                                                                 tmp_path):
    path = model_file(tmp_path, sample_index)
    dump = tmp_path / "model.dump"
    assert invoke("export", "--model", path, "--format", "text", dump).exit_code == 0
    result = imported(store_url, dump, "--format", "text", "--json")
    assert json.loads(result.stdout)["ledger"]["messages"] == 100
    filed = store.load(path)
    h = host(store_url)
    assert counts_of(h.spam_filter) == counts_of(filed) and h.spam_filter.ledger == filed.ledger
    scored_alike(h.spam_filter, filed, sample(sample_index))


def test_a_model_file_and_replace_go_with_a_store(tmp_path, sample_index):
    path = model_file(tmp_path, sample_index)
    for args in (["--format", "model"], [], ["--format", "pmml", "--replace"]):
        result = invoke("import", path, "--model", tmp_path / "n.tnb", *args)
        assert result.exit_code == 2 and "--store" in result.output, result.output
    assert not (tmp_path / "n.tnb").exists()


def test_the_import_raises_the_schema_version_and_works_on_tables_an_older_textnb_made(
        store_url, sample_index, tmp_path):
    """An older textnb made ``counts`` required: the import allows rows without them (a
    transaction of its own), and its commit raises the tables to the version that says
    such rows may be there, which an older textnb refuses, naming the upgrade."""
    import psycopg

    from textnb.modelfile.postgres.schema import IMPORTED_VERSION, UNTUNED_VERSION

    assert invoke("train", "--store", store_url, "--index", sample_index).exit_code == 0
    assert schema_version(store_url) == UNTUNED_VERSION
    with psycopg.connect(store_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE textnb_ledger ALTER COLUMN counts SET NOT NULL")
    imported(store_url, model_file(tmp_path, sample_index), "--store-model", "site")
    assert schema_version(store_url) == IMPORTED_VERSION
    h = host(store_url, "site")
    assert np.array_equal(h.spam_filter.counts()["class_count"], [60, 40])


def test_a_users_copy_of_an_imported_model_relabels_its_messages_exactly(
        store_url, sample_index, tmp_path):
    """A user's first learn copies the shared model's ledger rows, those without counts
    too; a relabel in the copy then takes the mail's counts, as in the shared model."""
    import threading

    from textnb.delivery.shared_users import SharedModelSet

    messages = sample(sample_index)
    path = model_file(tmp_path, sample_index)
    imported(store_url, path)
    original = counts_of(store.load(path))
    stop = threading.Event()
    try:
        scorers = SharedModelSet(store_url, "default", tmp_path / "outbox", stop, poll=0.2)
        alice = scorers.for_learning("alice")
        assert alice.update("LEARN", messages[0].raw, flipped(messages[0]).label) == "moved"
        assert alice.update("LEARN", messages[1].raw, messages[1].label) == "known"
        assert invoke("retrain", "--model", path, "--index",
                      write_index(tmp_path, [flipped(messages[0])])).exit_code == 0
        assert counts_of(alice.spam_filter) == counts_of(store.load(path))
        assert counts_of(scorers.shared.spam_filter) == original  # hers alone
        scorers.close()
    finally:
        stop.set()
