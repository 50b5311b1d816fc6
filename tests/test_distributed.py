"""--engine dask: the same models, verdicts and metrics as the single process.

The tests that need a cluster share one LocalCluster of 2 single-threaded worker
processes (module scope: starting one and importing spaCy in its workers takes
seconds) and skip, saying why, when dask[distributed] is not installed.
"""

import io
import json
import shutil
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from textnb import commands
from textnb.cli import app
from textnb.config import FilterConfig, apply_overrides
from textnb.engines import dask as dd
from textnb.engines.dask import DaskEngine
from textnb.errors import EngineError, SourceError
from textnb.mail.sources import iter_labelled
from textnb.modelfile import retrain, store
from textnb.spamfilter import SpamFilter

from conftest import SAMPLE, SAMPLE_INDEX, every_message

runner = CliRunner()


def members(path):
    """Every member of a model file (the archive's timestamps aside)."""
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


@pytest.fixture(scope="module")
def cluster():
    pytest.importorskip("distributed", reason="dask[distributed] is not installed; "
                                              "pip install 'textnb[dask]' to run these tests")
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as local, Client(local) as client:
        yield client


@pytest.fixture(scope="module")
def local_sample_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("local") / "model.tnb"
    commands.train(path, every_message(), index=[str(SAMPLE_INDEX)])
    return path


@pytest.fixture
def messy(tmp_path):
    """The sample corpus as folders, a Maildir, an mbox and a TSV file, with 3 messages
    given twice (one with CRLF line ends, one in the Maildir, one TSV text) and a spam
    given again later as ham (the last label wins)."""
    spam, ham = tmp_path / "spam", tmp_path / "ham"
    shutil.copytree(SAMPLE / "spam", spam)
    shutil.copytree(SAMPLE / "ham", ham)
    raw = (SAMPLE / "ham" / "001.eml").read_bytes()
    (ham / "zz-crlf-copy.eml").write_bytes(raw.replace(b"\n", b"\r\n"))
    shutil.copy(SAMPLE / "spam" / "001.eml", ham / "zz-relabelled.eml")
    maildir = tmp_path / "maildir"
    for sub in ("cur", "new", "tmp"):
        (maildir / sub).mkdir(parents=True)
    shutil.copy(SAMPLE / "ham" / "002.eml", maildir / "new" / "1.host")
    tsv = tmp_path / "texts.tsv"
    tsv.write_text("ham\tsee you at lunch\nspam\tWIN a FREE prize now\nham\tsee you at lunch\n")
    return {"spam": [str(spam)], "ham": [str(ham), str(maildir), str(SAMPLE / "mbox")],
            "tsv": [str(tsv)]}


# -- without a cluster -------------------------------------------------------------------


def test_workers_read_the_files_as_the_single_process_does(messy):
    files = dd.labelled_files(messy["spam"], messy["ham"], [str(SAMPLE_INDEX)], messy["tsv"])
    expected = list(iter_labelled(messy["spam"], messy["ham"], [str(SAMPLE_INDEX)], messy["tsv"]))
    for n in (1, 4, len(files)):
        got = [m for part in dd.partition(files, n) for m in dd.read_files(part)]
        assert got == expected


def test_partitions_are_contiguous_and_balanced():
    files = list(range(10))
    parts = dd.partition(files, 4)
    assert parts == [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]
    assert dd.partition(files, 50) == [[f] for f in files]


def _counts(token_lists, labels):
    spam_filter = SpamFilter(every_message())
    spam_filter.learn_tokens(token_lists, labels)
    return dd.Counts.of(spam_filter)


def test_merged_counts_equal_counting_everything_in_any_tree():
    docs = [["a", "b"], ["c", "a"], ["d"], ["b", "e", "a"], ["f", "c"], ["g"]]
    labels = ["spam", "ham", "ham", "spam", "ham", "spam"]
    whole = _counts(docs, labels)
    a, b, c = (_counts(docs[i:i + 2], labels[i:i + 2]) for i in (0, 2, 4))
    for merged in (dd.merge_counts(a, b, c), dd.merge_counts(dd.merge_counts(a, b), c),
                   dd.merge_counts(a, dd.merge_counts(b, c))):
        assert merged.tokens == whole.tokens == ["a", "b", "c", "d", "e", "f", "g"]
        np.testing.assert_array_equal(merged.feature_count, whole.feature_count)
        np.testing.assert_array_equal(merged.doc_freq, whole.doc_freq)
        np.testing.assert_array_equal(merged.class_count, whole.class_count)


def test_added_counts_equal_learning_and_removing_them_restores_the_filter():
    docs, labels = [["a", "b"], ["c", "a"], ["d"]], ["spam", "ham", "ham"]
    learned = SpamFilter(every_message())
    learned.learn_tokens(docs, labels)
    added = SpamFilter(every_message())
    _counts(docs[:1], labels[:1]).add_to(added)
    _counts(docs[1:], labels[1:]).add_to(added)
    assert added.vocabulary.tokens_ == learned.vocabulary.tokens_
    np.testing.assert_array_equal(added.model.feature_log_prob_, learned.model.feature_log_prob_)
    assert added.n_learned == learned.n_learned
    _counts(docs[1:], labels[1:]).add_to(added, weight=-1.0)
    np.testing.assert_array_equal(added.model.class_count_, [0, 1])
    with pytest.raises(ValueError, match="counts went negative"):
        _counts(docs[1:], labels[1:]).add_to(added, weight=-1.0)


def test_without_dask_the_option_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "distributed", None)  # makes `import distributed` fail
    with pytest.raises(EngineError, match=r"pip install 'textnb\[dask\]'"), dd.connect():
        pass
    result = runner.invoke(app, ["train", "--engine", "dask", "--model", str(tmp_path / "m.tnb"),
                                 "--index", str(SAMPLE_INDEX)])
    assert result.exit_code == 1
    assert "pip install 'textnb[dask]'" in result.output


def test_an_unreachable_scheduler_is_named():
    pytest.importorskip("distributed", reason="dask[distributed] is not installed")
    import dask

    unreachable = "cannot reach the Dask scheduler at 'tcp://127.0.0.1:9'"
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}), \
            pytest.raises(EngineError, match=unreachable), dd.connect("tcp://127.0.0.1:9"):
        pass


def test_parquet_without_pyarrow_names_it(monkeypatch, local_sample_model, tmp_path):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(EngineError, match="pip install pyarrow"):
        dd.classify_to_files(local_sample_model, tmp_path / "out", [str(SAMPLE / "unlabelled")],
                             output_format="parquet")


def test_standard_input_cannot_be_split():
    with pytest.raises(SourceError, match="standard input"):
        dd.labelled_files(spam=["-"], ham=[str(SAMPLE / "ham")])


@pytest.mark.parametrize("args, message", [
    (["train", "--scheduler", "tcp://127.0.0.1:8786", "--index", str(SAMPLE_INDEX)],
     "--scheduler goes with --engine dask"),
    (["train", "--engine", "spark", "--index", str(SAMPLE_INDEX)], "'spark' is not an engine"),
])
def test_engine_options_are_checked_before_any_work(args, message, tmp_path):
    result = runner.invoke(app, args + ["--model", str(tmp_path / "m.tnb")])
    assert result.exit_code == 2
    assert message in result.output


# -- on a LocalCluster of 2 worker processes ---------------------------------------------


@pytest.mark.parametrize("n_partitions", [1, 3, 250])
def test_sample_model_is_identical_to_the_single_process_one(cluster, local_sample_model,
                                                             tmp_path, n_partitions):
    path = tmp_path / "dask.tnb"
    summary = commands.train(path, every_message(), index=[str(SAMPLE_INDEX)],
                             engine=DaskEngine(cluster, n_partitions))
    assert summary["partitions"] == min(n_partitions, 100)
    assert summary["messages"] == {"ham": 60, "spam": 40}
    assert members(path) == members(local_sample_model)


def test_a_route_alpha_model_is_identical_to_the_single_process_one(cluster, tmp_path):
    config = every_message(apply_overrides(FilterConfig(), {"model.route_alpha": 0.03}))
    local, dask = tmp_path / "local.tnb", tmp_path / "dask.tnb"
    commands.train(local, config, index=[str(SAMPLE_INDEX)])
    commands.train(dask, config, index=[str(SAMPLE_INDEX)], engine=DaskEngine(cluster, 3))
    assert members(dask) == members(local)
    raws = [p.read_bytes() for p in sorted((SAMPLE / "unlabelled").iterdir())]
    scores = store.load(dask).log_odds(raws)
    assert store.load(dask).config.model.route_alpha == 0.03
    np.testing.assert_array_equal(scores, store.load(local).log_odds(raws))


def test_duplicates_relabels_and_every_source_form_as_in_one_process(cluster, messy, tmp_path):
    config = every_message(apply_overrides(FilterConfig(), {"model.event_model": "bernoulli",
                                                            "features.features": "tf"}))
    local = commands.train(tmp_path / "local.tnb", config, messy["spam"], messy["ham"],
                           tsv=messy["tsv"])
    remote = commands.train(tmp_path / "dask.tnb", config, messy["spam"], messy["ham"],
                            tsv=messy["tsv"], engine=DaskEngine(cluster, 7))
    assert members(tmp_path / "dask.tnb") == members(tmp_path / "local.tnb")
    assert remote["duplicates"] == local["duplicates"] == 3
    assert remote["messages"] == local["messages"]


def test_retrain_with_moves_is_identical_to_the_single_process_retrain(cluster, messy, tmp_path):
    first = tmp_path / "first.tnb"
    commands.train(first, every_message(), index=[str(SAMPLE_INDEX)])
    shutil.copy(first, tmp_path / "dask.tnb")
    # The messy folders repeat the sample's messages (known), relabel spam/001 (a move)
    # and bring new ones (the Maildir's and TSV texts are new to the model).
    local = retrain.retrain(first, messy["spam"], messy["ham"], tsv=messy["tsv"])
    remote = retrain.retrain(tmp_path / "dask.tnb", messy["spam"], messy["ham"],
                             tsv=messy["tsv"], engine=DaskEngine(cluster, 5))
    dask_members, local_members = members(tmp_path / "dask.tnb"), members(first)
    # The column history's "last" (the serial of the latest message holding a token,
    # for `compact --prune`) is kept per message only in process; the Dask engine
    # merges counts, so its columns are stamped "now", later than or equal to the
    # local ones: a prune keeps them a while longer (textnb.models.ledger.Ledger, cover()).
    dask_last = np.load(io.BytesIO(dask_members.pop("ledger_last.npy")))
    local_last = np.load(io.BytesIO(local_members.pop("ledger_last.npy")))
    assert dask_last.shape == local_last.shape and np.all(dask_last >= local_last)
    dask_meta, local_meta = (json.loads(m.pop("textnb-model.json"))
                             for m in (dask_members, local_members))
    for meta in (dask_meta, local_meta):
        del meta["sha256"]["ledger_last.npy"]
    assert dask_members == local_members and dask_meta == local_meta
    for key in ("read", "learned", "moved", "known", "messages", "ledger"):
        assert remote[key] == local[key], key
    assert remote["moved"] == {"spam": 0, "ham": 1}
    with pytest.raises(EngineError, match="--regime error scores each message"):
        retrain.retrain(first, messy["spam"], regime="error", engine=DaskEngine(cluster))


def test_classify_and_evaluate_equal_the_single_process(cluster, local_sample_model, tmp_path):
    sources = [str(SAMPLE / "unlabelled"), str(SAMPLE / "mbox")]
    local = list(commands.classify(local_sample_model, sources, cost_ratio=9))
    remote = list(commands.classify(local_sample_model, sources, cost_ratio=9,
                                    engine=DaskEngine(cluster, 3)))
    assert remote == local and len(local) == 12
    out = tmp_path / "verdicts"
    written = dd.classify_to_files(local_sample_model, out, sources, cost_ratio=9,
                                   scheduler=cluster, n_partitions=3)
    rows = [json.loads(line) for f in written["files"] for line in Path(f).read_text().splitlines()]
    assert rows == [dd.decision_row(s) for s in local]
    with pytest.raises(SourceError, match="not an empty folder"):
        dd.classify_to_files(local_sample_model, out, sources, scheduler=cluster)
    assert (commands.evaluate(local_sample_model, index=[str(SAMPLE_INDEX)], cost_ratio=9,
                              engine=DaskEngine(cluster, 4))
            == commands.evaluate(local_sample_model, index=[str(SAMPLE_INDEX)], cost_ratio=9))


def test_cli_engine_dask_with_a_scheduler_address(cluster, local_sample_model, tmp_path):
    address = ["--engine", "dask", "--scheduler", cluster.scheduler.address]
    path = tmp_path / "cli.tnb"
    trained = runner.invoke(app, ["train", "--model", str(path), "--index", str(SAMPLE_INDEX),
                                  *address])
    assert trained.exit_code == 0, trained.output
    # The default regime (thick) scores as it learns, one message at a time: on Dask
    # every message is learned, and the model says so.
    assert "trained 40 spam and 60 ham" in trained.output
    assert store.load(path).config.training.regime == "all"
    assert members(path) == members(local_sample_model)
    for command in (["classify", "--json", str(SAMPLE / "unlabelled")],
                    ["evaluate", "--index", str(SAMPLE_INDEX)]):
        local = runner.invoke(app, [*command, "--model", str(path)])
        remote = runner.invoke(app, [*command, "--model", str(path), *address])
        assert remote.exit_code == 0, remote.output
        assert remote.output == local.output
    out = tmp_path / "out"
    written = runner.invoke(app, ["classify", "--model", str(path), "--output", str(out),
                                  str(SAMPLE / "unlabelled"), *address])
    assert written.exit_code == 0, written.output
    assert sum(len(f.read_text().splitlines()) for f in out.iterdir()) == 6


def test_parquet_output(cluster, local_sample_model, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is absent (Parquet output is "
                                                       "optional): pip install pyarrow")
    sources = [str(SAMPLE / "unlabelled")]
    written = dd.classify_to_files(local_sample_model, tmp_path / "out", sources,
                                   output_format="parquet", scheduler=cluster, n_partitions=2)
    rows = [row for f in written["files"] for row in pq.read_table(f).to_pylist()]
    assert rows == [dd.decision_row(s) for s in commands.classify(local_sample_model, sources)]


@pytest.mark.corpus
@pytest.mark.slow
def test_spamassassin_model_is_identical_to_the_single_process_one(cluster, shared_corpora,
                                                                   tmp_path):
    base = shared_corpora / "spamassassin"
    spam = [str(base / f) for f in ("spam", "spam_2")]
    ham = [str(base / f) for f in ("easy_ham", "easy_ham_2", "hard_ham")]
    local = commands.train(tmp_path / "local.tnb", every_message(), spam, ham)
    remote = commands.train(tmp_path / "dask.tnb", every_message(), spam, ham,
                            engine=DaskEngine(cluster))
    assert remote["partitions"] >= 8
    assert members(tmp_path / "dask.tnb") == members(tmp_path / "local.tnb")
    assert remote["messages"] == local["messages"] and remote["duplicates"] == local["duplicates"]
    model = store.load(tmp_path / "dask.tnb")
    assert len(model.ledger) == sum(local["messages"].values())
