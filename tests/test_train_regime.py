"""textnb train's regime (``training.regime``, thick by default; ``--regime``): a new model
that learned, in the order given, only the messages the regime takes (``thick``: those the
model of the messages before gets wrong or right by less than the margin), exactly as
``retrain --regime`` learns them into a new model; every message where there is no order
(a --spam and a --ham pile), on Dask and into a shared store."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from textnb.cli import app
from textnb.modelfile import store

from conftest import SAMPLE

runner = CliRunner()
INDEX = str(SAMPLE / "index")


def _train(path, *options):
    result = runner.invoke(app, ["train", "--model", str(path), "--index", INDEX, "--json",
                                 *options])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _scores(path):
    spam_filter = store.load(path)
    raws = [p.read_bytes() for p in sorted((SAMPLE / "unlabelled").iterdir())]
    raws += [p.read_bytes() for p in sorted((SAMPLE / "spam").iterdir())[:5]]
    return spam_filter, spam_filter.log_odds(raws)


def test_thick_learns_fewer_messages_and_is_what_retrain_thick_makes_of_a_new_model(tmp_path):
    every = _train(tmp_path / "all.tnb", "--regime", "all")
    thick = _train(tmp_path / "thick.tnb", "--margin", "5")  # the default regime
    assert store.load(tmp_path / "thick.tnb").config.training.regime == "thick"
    assert store.load(tmp_path / "all.tnb").config.training.regime == "all"
    learned = sum(thick["messages"].values())
    assert every["regime"] == "all" and every["passed"] == 0
    assert thick["regime"] == "thick" and thick["passed"] > 0
    assert learned + thick["passed"] == sum(every["messages"].values()) == 100
    retrained = runner.invoke(app, ["retrain", "--model", str(tmp_path / "retrain.tnb"),
                                    "--index", INDEX, "--regime", "thick", "--margin", "5"])
    assert retrained.exit_code == 0, retrained.output
    by_train, train_scores = _scores(tmp_path / "thick.tnb")
    by_retrain, retrain_scores = _scores(tmp_path / "retrain.tnb")
    assert by_train.n_learned == by_retrain.n_learned
    assert len(by_train.ledger) == len(by_retrain.ledger) == learned  # passed: not in it
    np.testing.assert_array_equal(train_scores, retrain_scores)
    _, all_scores = _scores(tmp_path / "all.tnb")
    assert not np.array_equal(train_scores, all_scores)


def test_thick_is_the_same_model_with_any_number_of_workers(tmp_path):
    one = _train(tmp_path / "one.tnb", "--regime", "thick", "--margin", "5", "--jobs", "1")
    two = _train(tmp_path / "two.tnb", "--regime", "thick", "--margin", "5", "--jobs", "2")
    assert one["messages"] == two["messages"] and one["passed"] == two["passed"]
    np.testing.assert_array_equal(_scores(tmp_path / "one.tnb")[1],
                                  _scores(tmp_path / "two.tnb")[1])


def test_the_text_output_says_how_many_the_regime_passed(tmp_path):
    result = runner.invoke(app, ["train", "--model", str(tmp_path / "m.tnb"), "--index", INDEX,
                                 "--regime", "thick", "--margin", "5"])
    assert result.exit_code == 0, result.output
    assert "passed by the regime (thick)" in result.output


def test_the_default_is_thick_at_margin_40_and_the_model_says_so(tmp_path):
    summary = _train(tmp_path / "m.tnb")
    assert summary["regime"] == "thick"
    training = store.load(tmp_path / "m.tnb").config.training
    assert (training.regime, training.margin) == ("thick", 40.0)
    info = runner.invoke(app, ["info", "--model", str(tmp_path / "m.tnb")])
    assert "less than 40 beyond the threshold (training.regime thick)" in info.output


@pytest.mark.parametrize("options, named", [
    (["--regime", "sometimes"], "training.regime='sometimes' is not allowed; use 'thick'"),
    (["--margin", "-1"], "training.margin=-1.0 is not allowed; use a log-odds margin >= 0"),
    (["--set", "training.regime=often"], "training.regime='often' is not allowed"),
])
def test_a_bad_regime_or_margin_is_refused_by_name_and_writes_nothing(tmp_path, options, named):
    path = tmp_path / "m.tnb"
    result = runner.invoke(app, ["train", "--model", str(path), "--index", INDEX, *options])
    assert result.exit_code != 0
    assert named in result.output
    assert not path.exists()


def test_thick_is_refused_with_a_shared_store(tmp_path):
    result = runner.invoke(app, ["train", "--store", "postgresql://nobody@localhost/none",
                                 "--index", INDEX, "--regime", "thick"])
    assert result.exit_code != 0
    said = " ".join(result.output.replace("│", " ").split())  # typer's box, unwrapped
    assert "with --store train learns every message (--regime all)" in said


def test_thick_is_refused_on_dask_before_any_work(tmp_path):
    pytest.importorskip("distributed", reason="dask[distributed] is not installed; "
                                              "pip install 'textnb[dask]'")
    path = tmp_path / "m.tnb"
    result = runner.invoke(app, ["train", "--model", str(path), "--index", INDEX,
                                 "--regime", "thick", "--engine", "dask"])
    assert result.exit_code != 0
    said = " ".join(result.output.replace("│", " ").split())
    assert "with --engine dask train learns every message (--regime all)" in said
    assert not path.exists()


def _mbox(path, folder):
    """The messages of ``folder`` as one mbox file: a pile of several messages a file."""
    with open(path, "wb") as out:
        for message in sorted(folder.iterdir()):
            out.write(b"From sender@example.com Mon Mar  4 12:00:00 2024\n")
            out.write(message.read_bytes().replace(b"\nFrom ", b"\n>From ").rstrip(b"\n"))
            out.write(b"\n\n")
    return path


def test_two_piles_are_learned_thick_in_the_order_their_messages_arrived_in(tmp_path):
    """A --spam pile and a --ham pile of one file a message are learned as one sequence,
    in the order the messages arrived (their Received: dates here): the model an --index
    listing them in that order makes."""
    from textnb.mail.arrival import arrival_order
    from textnb.mail.sources import plan_labelled

    spam, ham = str(SAMPLE / "spam"), str(SAMPLE / "ham")
    piles = runner.invoke(app, ["train", "--model", str(tmp_path / "piles.tnb"), "--json",
                                "--spam", spam, "--ham", ham, "--margin", "5"])
    assert piles.exit_code == 0, piles.output
    assert json.loads(piles.stdout)["regime"] == "thick" and "note:" not in piles.stderr
    order = arrival_order(plan_labelled([spam], [ham]))
    labels = [f.label for f in order]
    assert len(order) == 100 and labels != sorted(labels)  # the classes interleave
    index = tmp_path / "index"
    index.write_text("".join(f"{f.label} {f.path}\n" for f in order))
    runner.invoke(app, ["train", "--model", str(tmp_path / "index.tnb"), "--index",
                        str(index), "--margin", "5"])
    by_piles, by_index = store.load(tmp_path / "piles.tnb"), store.load(tmp_path / "index.tnb")
    assert by_piles.ledger == by_index.ledger and list(by_piles.ledger) == list(by_index.ledger)
    assert by_piles.vocabulary.tokens_ == by_index.vocabulary.tokens_
    np.testing.assert_array_equal(by_piles.model.feature_count_, by_index.model.feature_count_)
    tuned = runner.invoke(app, ["tune", "--model", str(tmp_path / "piles.tnb"), "--json",
                                "--spam", spam, "--ham", ham, "--folds", "4", "--write"])
    assert tuned.exit_code == 0, tuned.output
    assert store.load(tmp_path / "piles.tnb").ledger == by_piles.ledger  # the same pass


def test_retrain_thick_learns_two_piles_in_the_order_train_does(tmp_path):
    spam, ham = str(SAMPLE / "spam"), str(SAMPLE / "ham")
    for command, path in (("train", "train.tnb"), ("retrain", "retrain.tnb")):
        result = runner.invoke(app, [command, "--model", str(tmp_path / path), "--spam", spam,
                                     "--ham", ham, "--regime", "thick", "--margin", "5"])
        assert result.exit_code == 0, result.output
    by_train, by_retrain = store.load(tmp_path / "train.tnb"), store.load(tmp_path / "retrain.tnb")
    assert list(by_train.ledger) == list(by_retrain.ledger)
    np.testing.assert_array_equal(by_train.model.feature_count_,
                                  by_retrain.model.feature_count_)


def test_piles_of_several_messages_a_file_are_learned_whole(tmp_path):
    """An mbox pile has no arrival order to find (a file holds many messages): every
    message is learned, and the model says so; a regime asked for by name learns in the
    order given and says so."""
    spam_mbox = _mbox(tmp_path / "spam.mbox", SAMPLE / "spam")
    plain = runner.invoke(app, ["train", "--model", str(tmp_path / "n.tnb"), "--json",
                                "--spam", str(spam_mbox), "--ham", str(SAMPLE / "ham")])
    assert plain.exit_code == 0, plain.output
    assert "--spam source before" not in plain.stderr  # every message: the order is moot
    assert json.loads(plain.stdout)["regime"] == "all"
    assert store.load(tmp_path / "n.tnb").config.training.regime == "all"
    asked = runner.invoke(app, ["train", "--model", str(tmp_path / "m.tnb"),
                                "--spam", str(spam_mbox), "--ham", str(SAMPLE / "ham"),
                                "--regime", "thick", "--margin", "5"])
    assert asked.exit_code == 0, asked.output
    assert "every --spam source before every --ham one" in asked.stderr


def test_tune_learns_in_one_sequence_as_train_does(tmp_path):
    from textnb.commands import in_one_sequence
    from textnb.config import load_config

    thick = load_config(None, {})
    spam, ham = [str(SAMPLE / "spam")], [str(SAMPLE / "ham")]
    config, files = in_one_sequence(thick, spam, ham)
    assert config.training.regime == "thick" and len(files) == 100
    config, files = in_one_sequence(thick, [str(_mbox(tmp_path / "s.mbox", SAMPLE / "spam"))],
                                    ham)
    assert config.training.regime == "all" and files is None
    assert in_one_sequence(thick, [], []) == (thick, None)  # an --index: as given
    assert in_one_sequence(thick, spam, []) == (thick, None)  # one pile: as given
    every = load_config(None, {"training.regime": "all"})
    assert in_one_sequence(every, spam, ham) == (every, None)


def test_tune_write_keeps_the_regime_and_learns_as_train_does(tmp_path):
    path = tmp_path / "m.tnb"
    _train(path, "--margin", "5")
    trained = store.load(path)
    result = runner.invoke(app, ["tune", "--model", str(path), "--index", INDEX, "--folds", "3",
                                 "-r", "1", "--write"])
    assert result.exit_code == 0, result.output
    tuned = store.load(path)
    assert tuned.config.training == trained.config.training
    assert tuned.ledger.counts() == trained.ledger.counts()  # the same messages learned
