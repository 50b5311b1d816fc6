"""The PostgreSQL shared store (textnb.modelfile.postgres) against a real PostgreSQL.

A private cluster is started for the module (tests/pg_cluster.py: initdb and pg_ctl in a
temporary folder, as an unprivileged user); each test has a database of its own. Without
PostgreSQL or psycopg the tests skip, naming the install lines. The hosts-at-once
scenarios (scorer processes, SpamAssassin, kill -9, a restarted server) are in
tests/test_shared_store_hosts.py, a system test.
"""

import json
import sys
import threading

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.pg_cluster import pg_cluster, store_url  # noqa: F401  (fixtures)
from textnb.cli import app
from textnb.config import FilterConfig
from textnb.mail.sources import RawMessage, iter_index
from textnb.modelfile.retrain import fit
from textnb.spamfilter import SpamFilter

from conftest import EVERY_MESSAGE, every_message

pytestmark = pytest.mark.usefixtures("memo_tokens")


def sample(index):
    return list(iter_index(index))


def counts_of(spam_filter):
    """Every token's (ham count, spam count, messages) where any is not 0, the class counts
    and the messages learned: what two models must share to score alike."""
    c = spam_filter.counts()
    n = len(c["tokens"])
    fc, df = c["feature_count"][:, :n], c["doc_freq"][:n]
    tokens = {t: (fc[0, i], fc[1, i], df[i]) for i, t in enumerate(c["tokens"])
              if fc[0, i] or fc[1, i] or df[i]}
    return tokens, tuple(c["class_count"]), dict(spam_filter.n_learned)


def trained_on(messages, config=None):
    spam_filter = SpamFilter(every_message(config))  # the store learns every message
    fit(spam_filter, messages)
    return spam_filter


def new_model(url, name="default", config=None):
    from textnb.modelfile.postgres.database import SharedStore
    from textnb.modelfile.postgres.shared_model import new_filter_config

    store = SharedStore(url)
    store.create(name, new_filter_config(config or FilterConfig()))
    store.close()


def host(url, name="default", **options):
    from textnb.modelfile.postgres.shared_model import SharedModel

    return SharedModel(url, name, **options)


def relabelled(message, label):
    return RawMessage(message.source, message.raw, label)


def test_a_record_applied_adds_what_learning_the_messages_adds(sample_index):
    from textnb.modelfile.postgres.records import (Change, apply, decode_record,
                                                   encode_record, message_counts)
    from textnb.models.ledger import message_digest, tokens_hash

    messages = sample(sample_index)
    spam_filter = SpamFilter(every_message())
    changes = []
    for m in messages:
        tokens = spam_filter.tokens(m.raw)
        changes.append(Change(message_digest(m.raw), m.label, None, tokens_hash(tokens),
                              *message_counts(tokens)))
    record = decode_record(encode_record(changes))
    assert record.reset is None and record.tuning is None
    apply(spam_filter, record.changes)
    assert counts_of(spam_filter) == counts_of(trained_on(messages))
    assert spam_filter.ledger == trained_on(messages).ledger


def test_learn_relabel_forget_from_three_hosts_equals_one_train_on_the_final_labels(
        store_url, sample_index):
    messages = sample(sample_index)
    new_model(store_url)
    a, b, c = host(store_url), host(store_url), host(store_url)
    report = a.learn_messages(messages)
    assert sum(report["new"].values()) == len(messages)
    moved = [relabelled(m, "ham" if m.label == "spam" else "spam") for m in messages[:15]]
    assert sum(b.learn_messages(moved)["moved"].values()) == 15
    assert b.learn_messages(moved[:5])["known"] == 5
    gone = messages[80:]
    assert sum(c.learn_messages(gone, kind="FORGET")["forgotten"].values()) == len(gone)
    assert c.learn_messages(gone, kind="FORGET")["not_found"] == len(gone)
    final = moved + messages[15:80]
    expected = counts_of(trained_on(final))
    for h in (a, b, c):
        h.catch_up()
        assert counts_of(h.spam_filter) == expected
        assert h.spam_filter.ledger == trained_on(final).ledger


def test_hosts_of_a_route_alpha_model_score_as_its_model_file(store_url, sample_index,
                                                               tmp_path):
    from textnb.config import load_config
    from textnb.modelfile import store

    config = load_config(None, {"model.route_alpha": 0.03})
    messages = sample(sample_index)
    raws = [m.raw for m in messages]
    new_model(store_url, config=config)
    first = host(store_url, fold_every=1)
    first.learn_messages(messages[:50])
    first.catch_up()
    assert first.fold()  # a snapshot of the first half ...
    first.learn_messages(messages[50:])  # ... and records with new columns after it
    joining = host(store_url)
    first.catch_up()
    path = store.save(trained_on(messages, config), tmp_path / "route.tnb")
    want = store.load(path).log_odds(raws)
    one_alpha = load_config(None, {"model.route_alpha": 0.1})
    assert not np.allclose(want, trained_on(messages, one_alpha).log_odds(raws))  # it counts
    for h in (first, joining):
        assert h.spam_filter.config.model.route_alpha == 0.03
        assert h.spam_filter.model.route_columns_known == len(h.spam_filter.vocabulary)
        np.testing.assert_allclose(h.spam_filter.log_odds(raws), want, rtol=0, atol=1e-9)


def test_one_message_learned_on_two_hosts_at_once_counts_once(store_url, sample_index):
    messages = sample(sample_index)[:20]
    new_model(store_url)
    hosts = [host(store_url) for _ in range(3)]
    outcomes = []

    def teach(h):
        outcomes.extend(h.learn_messages(messages)["new"].values())

    threads = [threading.Thread(target=teach, args=(h,)) for h in hosts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(outcomes) == len(messages)  # each message new on exactly one host
    for h in hosts:
        h.catch_up()
        assert counts_of(h.spam_filter) == counts_of(trained_on(messages))


def test_a_new_host_starts_from_the_snapshot_and_the_log_tail(store_url, sample_index):
    messages = sample(sample_index)
    new_model(store_url)
    first = host(store_url, fold_every=1)
    first.learn_messages(messages[:50])
    first.catch_up()
    assert first.fold()
    first.learn_messages(messages[50:])
    joining = host(store_url)
    assert joining.seq == first.store.records_after(first.model_id, 0)[1]
    assert counts_of(joining.spam_filter) == counts_of(trained_on(messages))
    # A host that was behind the folded records reloads from the snapshot.
    behind = host(store_url)
    first.catch_up()
    first.learn_messages([relabelled(messages[0], "ham")])
    first.catch_up()
    assert first.fold(force=True)
    behind.catch_up()
    assert counts_of(behind.spam_filter) == counts_of(first.spam_filter)


def test_learns_wait_in_the_outbox_while_the_store_is_away_and_count_once(
        store_url, sample_index, tmp_path, monkeypatch):
    from textnb.modelfile.postgres import database
    from textnb.modelfile.postgres.schema import StoreUnavailableError

    messages = sample(sample_index)
    new_model(store_url)
    scorer = host(store_url, outbox=tmp_path / "outbox")
    real_change = database.SharedStore.change

    def away(self, *args, **kwargs):
        raise StoreUnavailableError("away for the test")

    monkeypatch.setattr(database.SharedStore, "change", away)
    outcomes = [scorer.update("LEARN", m.raw, m.label) for m in messages[:30]]
    assert outcomes == ["new"] * 30  # what the ledger in memory predicts
    assert scorer.spam_filter.n_learned == {"ham": 0, "spam": 0}  # not in the model yet
    assert scorer.update("LEARN", messages[0].raw, "ham") == "new"
    monkeypatch.setattr(database.SharedStore, "change", real_change)
    # The scorer is killed now; its outbox holds the 31 learns. Started again, it sends
    # them, and a restart after that sends none twice.
    scorer.close()
    again = host(store_url, outbox=tmp_path / "outbox")
    again.close()
    again = host(store_url, outbox=tmp_path / "outbox")
    final = [relabelled(messages[0], "ham")] + messages[1:30]
    assert counts_of(again.spam_filter) == counts_of(trained_on(final))
    assert again.outbox.pending(0) == []


def test_an_entry_the_database_committed_is_not_sent_again(store_url, sample_index, tmp_path):
    """A crash between the commit and the outbox's own bookkeeping: the database's
    position for the outbox, set in the same transaction, says what it has."""
    from textnb.modelfile.postgres.outbox import Outbox

    messages = sample(sample_index)
    new_model(store_url)
    scorer = host(store_url, outbox=tmp_path / "outbox")
    for m in messages[:5]:
        scorer.update("LEARN", m.raw, m.label)
    scorer.update("FORGET", messages[0].raw)
    scorer.update("LEARN", messages[0].raw, "spam")
    scorer.close()
    # As if the file had not been settled: every entry written back, none known sent.
    box = Outbox(tmp_path / "outbox2")
    for _, name, item in host(store_url, outbox=tmp_path / "outbox3").outbox.entries:
        box.append(name, item)
    box.close()
    restarted = host(store_url, outbox=tmp_path / "outbox")
    final = [relabelled(messages[0], "spam")] + messages[1:5]
    assert counts_of(restarted.spam_filter) == counts_of(trained_on(final))


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # no class left
def test_the_cli_trains_scores_and_forgets_in_a_store(store_url, sample_index, tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["train", "--store", store_url, "--store-model", "alice",
                                 "--index", str(sample_index)])
    assert result.exit_code == 0, result.output
    assert "trained 40 spam and 60 ham" in result.output
    unlabelled = sample_index.parent / "unlabelled"
    stored = runner.invoke(app, ["classify", "--store", store_url, "--store-model", "alice",
                                 str(unlabelled)])
    model_file = tmp_path / "m.tnb"
    assert runner.invoke(app, ["train", "--model", str(model_file), "--index",
                               str(sample_index), *EVERY_MESSAGE]).exit_code == 0
    filed = runner.invoke(app, ["classify", "--model", str(model_file), str(unlabelled)])
    assert stored.exit_code == 0 and stored.stdout == filed.stdout
    info = runner.invoke(app, ["info", "--store", store_url, "--store-model", "alice"])
    assert info.exit_code == 0 and "40 spam, 60 ham" in info.output
    assert "the store holds alice" in info.output
    gone = runner.invoke(app, ["forget", "--store", store_url, "--store-model", "alice",
                               "--index", str(sample_index)])
    assert gone.exit_code == 0 and "forgot 40 spam and 60 ham" in gone.output


@pytest.mark.parametrize("url, says", [
    ("mysql://localhost/mail", "is not a PostgreSQL URL"),
    ("postgresql://textnb@127.0.0.1:1/none", "cannot connect to the store"),
])
def test_a_bad_store_url_is_named_with_the_fix(url, says):
    if url.startswith("postgresql:"):  # it gets as far as connecting (without psycopg:
        # test_without_psycopg_a_store_names_the_install_line)
        pytest.importorskip("psycopg", reason="psycopg 3: pip install -e '.[postgresql]'")
    result = CliRunner().invoke(app, ["info", "--store", url])
    assert result.exit_code == 1
    assert says in result.output and url.split("://")[0] in result.output


def test_a_missing_model_and_a_wrong_schema_version_are_named_with_the_fix(store_url):
    import psycopg

    runner = CliRunner()
    missing = runner.invoke(app, ["info", "--store", store_url, "--store-model", "bob"])
    assert missing.exit_code == 1 and "no model 'bob'" in missing.output
    assert "textnb train --store" in missing.output
    with psycopg.connect(store_url, autocommit=True) as conn:
        conn.execute("UPDATE textnb_schema SET version = 99")
    wrong = runner.invoke(app, ["info", "--store", store_url])
    assert wrong.exit_code == 1 and "schema version 99" in wrong.output


def test_model_and_store_together_are_a_usage_error(tmp_path):
    result = CliRunner().invoke(app, ["info", "--model", str(tmp_path / "m.tnb"), "--store",
                                      "postgresql:///x"])
    assert result.exit_code == 2


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # no class left
def test_counts_stay_exact_after_every_message_is_forgotten(store_url, sample_index):
    messages = sample(sample_index)
    new_model(store_url)
    h = host(store_url)
    h.learn_messages(messages)
    h.learn_messages(messages, kind="FORGET")
    h.catch_up()
    c = h.spam_filter.counts()
    assert not c["class_count"].any() and not np.asarray(c["feature_count"]).any()
    assert len(h.spam_filter.ledger) == 0


def test_export_from_a_store_gives_the_file_stores_dump(store_url, sample_index, tmp_path):
    runner = CliRunner()
    assert runner.invoke(app, ["train", "--store", store_url, "--index",
                               str(sample_index)]).exit_code == 0
    stored = runner.invoke(app, ["export", "--store", store_url, "--format", "text",
                                 str(tmp_path / "stored.dump")])
    assert stored.exit_code == 0, stored.output
    assert "exported 8,366 tokens and 100 ledger entries" in stored.output
    from textnb.modelfile import dump

    back = dump.loads((tmp_path / "stored.dump").read_bytes())
    assert counts_of(back) == counts_of(trained_on(sample(sample_index)))


def test_retrain_into_a_store_learns_new_mail_and_relabels_known(store_url, sample_index,
                                                                 tmp_path):
    from tests.helpers import write_index

    messages = sample(sample_index)
    runner = CliRunner()
    first = write_index(tmp_path, messages[:60])
    assert runner.invoke(app, ["train", "--store", store_url, "--index",
                               str(first)]).exit_code == 0
    flipped = [relabelled(m, "ham" if m.label == "spam" else "spam") for m in messages[:10]]
    second = write_index(tmp_path, flipped + messages[10:])
    result = runner.invoke(app, ["retrain", "--store", store_url, "--index", str(second)])
    assert result.exit_code == 0, result.output
    assert "50 already known" in result.output
    h = host(store_url)
    assert counts_of(h.spam_filter) == counts_of(trained_on(flipped + messages[10:]))
    refused = runner.invoke(app, ["retrain", "--store", store_url, "--regime", "error",
                                  "--index", str(second)])
    assert refused.exit_code == 2


def test_an_outbox_entry_cut_short_by_a_crash_is_dropped_and_the_rest_kept(tmp_path):
    """A crash mid-append leaves a torn entry, whose learn was never acknowledged."""
    from textnb.modelfile.postgres.database import Item
    from textnb.modelfile.postgres.outbox import Outbox

    box = Outbox(tmp_path / "outbox")
    for i in range(3):
        box.append("default", Item("LEARN", bytes([i]) * 32, "spam", ["a", "b"], [1, 2], 7))
    box.close()
    whole = (tmp_path / "outbox").read_bytes()
    (tmp_path / "outbox").write_bytes(whole[:-9])
    again = Outbox(tmp_path / "outbox")
    assert [(p, item.digest[:1], item.tf) for p, _, item in again.pending(0)] == [
        (1, b"\x00", [1, 2]), (2, b"\x01", [1, 2])]
    assert again.append("default", Item("FORGET", b"\x09" * 32)) == 3
    again.close()
    with pytest.raises(Exception, match="in use by another process"):
        held = Outbox(tmp_path / "outbox")
        Outbox(tmp_path / "outbox")
    held.close()
    (tmp_path / "junk").write_bytes(b"not an outbox\n")
    with pytest.raises(Exception, match="is not a textnb outbox"):
        Outbox(tmp_path / "junk")


def test_without_psycopg_a_store_names_the_install_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if it were not installed
    result = CliRunner().invoke(app, ["info", "--store", "postgresql:///mail"])
    assert result.exit_code == 1
    assert "pip install 'textnb[postgresql]'" in result.output


def test_a_users_first_learn_makes_their_model_a_copy_of_the_shared_one_plus_it(
        store_url, sample_index, tmp_path):
    import threading as _threading

    from textnb.delivery.shared_users import SharedModelSet

    messages = sample(sample_index)
    new_model(store_url)
    host(store_url).learn_messages(messages[:90])
    stop = _threading.Event()
    try:
        scorers = SharedModelSet(store_url, "default", tmp_path / "outbox", stop, poll=0.2)
        shared_before = counts_of(scorers.shared.spam_filter)
        assert scorers.for_scoring("alice") == (scorers.shared, "shared")
        mine = relabelled(messages[0], "ham" if messages[0].label == "spam" else "spam")
        alice = scorers.for_learning("Alice")
        assert alice.update("LEARN", mine.raw, mine.label) == "moved"
        assert alice.update("LEARN", messages[95].raw, messages[95].label) == "new"
        assert scorers.for_scoring("ALICE") == (alice, "user")
        expected = [mine] + messages[1:90] + [messages[95]]
        assert counts_of(alice.spam_filter) == counts_of(trained_on(expected))
        assert counts_of(scorers.shared.spam_filter) == shared_before  # hers alone
        # Another host serving the store finds her model and scores her with it.
        other = SharedModelSet(store_url, "default", tmp_path / "outbox2", stop, poll=0.0)
        other.loaded()
        model, source = other.for_scoring("alice")
        assert source == "user"
        assert counts_of(model.spam_filter) == counts_of(trained_on(expected))
        other.close()
        scorers.close()
    finally:
        stop.set()


def test_compact_with_a_store_folds_its_log_into_a_snapshot(store_url, sample_index, tmp_path):
    from tests.helpers import write_index

    messages = sample(sample_index)
    runner = CliRunner()
    assert runner.invoke(app, ["train", "--store", store_url, "--index",
                               str(sample_index)]).exit_code == 0  # folds as it ends
    assert runner.invoke(app, ["forget", "--store", store_url, "--index",
                               str(write_index(tmp_path, messages[:10]))]).exit_code == 0
    folded = runner.invoke(app, ["compact", "--store", store_url, "--json"])
    assert folded.exit_code == 0, folded.output
    result = json.loads(folded.stdout)
    assert result["folded"] and result["snapshot_before"] < result["snapshot_after"]
    assert result["snapshot_after"] == result["log_record"]
    again = runner.invoke(app, ["compact", "--store", store_url])
    assert again.exit_code == 0 and "nothing to fold" in again.output
    assert counts_of(host(store_url).spam_filter) == counts_of(trained_on(messages[10:]))


def test_compact_with_a_store_refuses_prune_naming_the_fix(store_url):
    result = CliRunner().invoke(app, ["compact", "--store", store_url, "--prune"])
    assert result.exit_code == 2
    assert "not a shared store's" in result.output and "without them" in result.output


def test_tune_with_a_store_tunes_its_model_and_writes_nothing_without_write(
        store_url, sample_index, tmp_path):
    runner = CliRunner()
    model_file = tmp_path / "m.tnb"
    for place in (["--store", store_url], ["--model", str(model_file)]):
        assert runner.invoke(app, ["train", *place, "--index", str(sample_index),
                                   *EVERY_MESSAGE]).exit_code == 0
    tuned = {}
    for name, place in (("store", ["--store", store_url]),
                        ("file", ["--model", str(model_file)])):
        result = runner.invoke(app, ["tune", *place, "--index", str(sample_index), "-r", "9",
                                     "--folds", "3", "--json"])
        assert result.exit_code == 0, result.output
        tuned[name] = json.loads(result.stdout)
    assert tuned["store"]["cost_ratios"] == tuned["file"]["cost_ratios"]
    assert not tuned["store"]["written"]
    assert host(store_url).spam_filter.calibration is None


def tune_write(place, sample_index, *options):
    result = CliRunner().invoke(app, ["tune", *place, "--index", str(sample_index), "-r", "9",
                                      "--folds", "3", "--write", *options])
    assert result.exit_code == 0, result.output
    return result


def scored_alike(stored, filed, messages):
    """The two filters' log-odds, P(spam) and thresholds, bit for bit, and their verdicts."""
    stored_odds = stored.log_odds(m.raw for m in messages)
    filed_odds = filed.log_odds(m.raw for m in messages)
    assert np.array_equal(stored_odds, filed_odds)
    assert np.array_equal(stored.p_spam(stored_odds), filed.p_spam(filed_odds))
    for ratio in (None, 1.0, 9.0, 999.0):
        assert stored.cost_model(ratio).log_threshold == filed.cost_model(ratio).log_threshold
    verdicts = [d.label for d in stored.cost_model().decide_many(
        stored_odds, stored.p_spam(stored_odds))]
    assert verdicts == [d.label for d in filed.cost_model().decide_many(
        filed_odds, filed.p_spam(filed_odds))]


@pytest.mark.parametrize("options", [[], ["--search"]], ids=["tune", "search"])
def test_tune_write_on_a_store_gives_the_calibration_and_verdicts_of_one_on_a_file(
        store_url, sample_index, tmp_path, options):
    from textnb.modelfile import store

    runner = CliRunner()
    model_file = tmp_path / "m.tnb"
    for place in (["--store", store_url], ["--model", str(model_file)]):
        assert runner.invoke(app, ["train", *place, "--index", str(sample_index),
                                   *EVERY_MESSAGE]).exit_code == 0
    following = host(store_url)  # a host that holds the model from before the tune
    stored = tune_write(["--store", store_url], sample_index, *options)
    assert "replaced: trained on this mail, calibrated" in stored.output
    filed = tune_write(["--model", str(model_file)], sample_index, *options)
    assert stored.stdout.split("\n")[:-2] == filed.stdout.split("\n")[:-2]  # the same table
    file_model = store.load(model_file)
    assert file_model.calibration is not None
    following.catch_up()
    joining = host(store_url)  # from the snapshot tune --write folds into
    assert joining.seq == following.seq
    messages = sample(sample_index)
    for h in (following, joining):
        assert h.spam_filter.calibration == file_model.calibration
        assert h.spam_filter.config == file_model.config
        assert h.spam_filter.threshold is None
        assert counts_of(h.spam_filter) == counts_of(file_model)
        scored_alike(h.spam_filter, file_model, messages)
    unlabelled = sample_index.parent / "unlabelled"
    by_store = runner.invoke(app, ["classify", "--store", store_url, str(unlabelled)])
    by_file = runner.invoke(app, ["classify", "--model", str(model_file), str(unlabelled)])
    assert by_store.exit_code == 0 and by_store.stdout == by_file.stdout


def test_a_following_host_builds_the_replacement_beside_the_model_it_scores_with(
        store_url, sample_index, monkeypatch):
    from dataclasses import replace

    from textnb import commands
    from textnb.config import config_from_dict
    from textnb.modelfile.postgres import shared_model
    from textnb.modelfile.postgres.records import decode_record
    from textnb.modelfile.postgres.shared_model import new_filter_config

    messages = sample(sample_index)
    new_model(store_url)
    teacher, follower = host(store_url), host(store_url)
    teacher.learn_messages(messages[:50])
    follower.catch_up()
    scoring, before = follower.spam_filter, counts_of(follower.spam_filter)
    result = commands.tune(None, [9.0], index=[str(sample_index)], n_folds=3,
                           config=every_message())  # the store learns every message
    # Settings that need counting afresh (tf, not binary, features), as --search may choose.
    tuned = commands.tuned_config(result, [9.0])
    tuned = replace(tuned, features=replace(tuned.features, features="tf"))
    config = new_filter_config(tuned)
    held = follower.seq
    head = teacher.replace(config, messages, result.calibration)
    records, _ = follower.store.records_after(follower.model_id, held)
    kinds = [decode_record(r) for _, r in records]
    assert config_from_dict(kinds[0].reset) == config_from_dict(config)
    assert kinds[-1].tuning.decision["cost_ratio"] == 9.0
    assert [r.tuning is None for r in kinds] == [True] * (len(kinds) - 1) + [False]
    built_aside = []
    real = shared_model._apply_record

    def watched(spam_filter, record, source):
        built_aside.append(spam_filter is not follower.spam_filter
                           and follower.spam_filter is scoring)
        real(spam_filter, record, source)

    monkeypatch.setattr(shared_model, "_apply_record", watched)
    assert follower.catch_up() == len(records) and follower.seq == head
    assert built_aside == [True] * len(records)  # verdicts came from the old model, whole
    assert counts_of(scoring) == before  # which nothing changed
    f = follower.spam_filter
    assert f.calibration == result.calibration and f.threshold is None
    assert f.config == tuned and f.config.decision.cost_ratio == 9.0
    assert counts_of(f) == counts_of(trained_on(messages, tuned))
    assert counts_of(f) != counts_of(trained_on(messages))  # binary counts: not these
    assert f.ledger == trained_on(messages, tuned).ledger


def test_info_with_a_store_shows_the_tuning(store_url, sample_index):
    runner = CliRunner()
    assert runner.invoke(app, ["train", "--store", store_url, "--index",
                               str(sample_index)]).exit_code == 0
    untuned = runner.invoke(app, ["info", "--store", store_url])
    assert "threshold ln(cost ratio)" in untuned.output
    tune_write(["--store", store_url], sample_index, "--review-cost", "0.5")
    info = runner.invoke(app, ["info", "--store", store_url])
    assert info.exit_code == 0, info.output
    assert "cost ratio 9.0, threshold" in info.output and "(tuned)" in info.output
    assert "review cost 0.5 per message" in info.output
    summary = json.loads(runner.invoke(app, ["info", "--store", store_url, "--json"]).stdout)
    assert summary["calibration"] == "isotonic"
    assert summary["config"]["decision"]["cost_ratio"] == 9.0


@pytest.mark.parametrize("case, says", [
    ("standard input", "cannot take '-' (standard input); save the mail to a file"),
    ("no such model", "no model 'bob'; train one with 'textnb train --store"),
])
def test_tune_write_on_a_store_refuses_naming_the_fix(store_url, sample_index, case, says):
    runner = CliRunner()
    assert runner.invoke(app, ["train", "--store", store_url, "--index",
                               str(sample_index)]).exit_code == 0
    held = host(store_url).seq
    args = {"standard input": ["--spam", "-", "--ham", str(sample_index.parent / "ham")],
            "no such model": ["--store-model", "bob", "--index", str(sample_index)]}[case]
    refused = runner.invoke(app, ["tune", "--store", store_url, "--write", "--folds", "3",
                                  *args], input="")
    assert refused.exit_code == 1, refused.output
    assert says in refused.output
    assert host(store_url).seq == held  # the stored model is as it was


def test_a_store_stays_readable_by_older_hosts_until_a_tuning_is_written(store_url,
                                                                        sample_index):
    """Upgrading one host must not lock the others out: the tables stay at version 1
    (what an older textnb reads) until the first tuning record, whose transaction raises
    them to 2; a version past this textnb's names the upgrade."""
    import psycopg

    from textnb.modelfile.postgres.schema import SCHEMA_VERSION, TUNED_VERSION, UNTUNED_VERSION

    def version():
        with psycopg.connect(store_url, autocommit=True) as conn:
            return conn.execute("SELECT version FROM textnb_schema").fetchall()

    assert CliRunner().invoke(app, ["train", "--store", store_url, "--index",
                                    str(sample_index)]).exit_code == 0
    assert CliRunner().invoke(app, ["info", "--store", store_url]).exit_code == 0
    assert version() == [(UNTUNED_VERSION,)]
    tune_write(["--store", store_url], sample_index)
    assert version() == [(TUNED_VERSION,)]
    assert CliRunner().invoke(app, ["info", "--store", store_url]).exit_code == 0
    with psycopg.connect(store_url, autocommit=True) as conn:
        conn.execute("UPDATE textnb_schema SET version = %s", (SCHEMA_VERSION + 1,))
    newer = CliRunner().invoke(app, ["info", "--store", store_url])
    assert newer.exit_code == 1
    assert f"schema version {SCHEMA_VERSION + 1}" in newer.output
    assert "upgrade textnb on this host" in newer.output


def test_a_tuning_record_has_no_changes_so_an_older_reader_stops_at_it():
    from textnb.modelfile.count_patch import decode
    from textnb.modelfile.postgres.records import Tuning, decode_record, encode_tuning

    data = encode_tuning(Tuning({"cost_ratio": 9.0, "unsure_band": 0.0, "review_cost": 0.0},
                                {"method": "isotonic"}))
    assert "changes" not in decode(data)  # what a reader of schema version 1 requires
    record = decode_record(data)
    assert record.changes == [] and record.reset is None
    assert record.tuning.calibration == {"method": "isotonic"}


@pytest.mark.parametrize("decision, calibration, field", [
    ({"cost_ratio": 9.0, "unsure_band": 0.0, "review_cost": 0.0},
     {"method": "isotonic", "x": [0.0, 1.0], "p": [0.9, 0.1]}, "calibration"),
    ({"cost_ratio": -1.0, "unsure_band": 0.0, "review_cost": 0.0}, None, "decision.cost_ratio"),
])
def test_a_tuning_record_no_textnb_wrote_is_refused_and_the_model_kept(
        store_url, sample_index, decision, calibration, field):
    import psycopg

    from textnb.modelfile.checks import InvalidModelError
    from textnb.modelfile.postgres.records import Tuning, encode_tuning

    new_model(store_url)
    h = host(store_url)
    h.learn_messages(sample(sample_index))
    h.catch_up()
    kept = counts_of(h.spam_filter)
    with psycopg.connect(store_url, autocommit=True) as conn, conn.transaction():
        seq = conn.execute("UPDATE textnb_models SET head = head + 1 WHERE id = %s "
                           "RETURNING head", (h.model_id,)).fetchone()[0]
        conn.execute("INSERT INTO textnb_log (model_id, seq, record) VALUES (%s, %s, %s)",
                     (h.model_id, seq, encode_tuning(Tuning(decision, calibration))))
    with pytest.raises(InvalidModelError) as refused:
        h.catch_up()
    assert refused.value.field == field and h.path in str(refused.value)
    assert h.spam_filter.calibration is None and h.spam_filter.config == every_message()
    assert counts_of(h.spam_filter) == kept and h.seq == seq - 1
