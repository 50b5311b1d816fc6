"""Cross-validation's thick fit (``fit_rows_in_order``) is the model ``textnb train`` makes
of the same mail in the same order: the same messages learned, the same scores."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from textnb.config import load_config
from textnb.evaluation.cross_validation import (fit_rows_in_order, out_of_fold_log_odds,
                                                score_rows, training_rows)
from textnb.evaluation.tune import tokenise
from textnb.mail.sources import iter_index
from textnb.models import evidence
from textnb.models.ledger import normalise
from textnb.modelfile.retrain import fit
from textnb.spamfilter import SpamFilter

from conftest import SAMPLE_INDEX


def _matrix(config, messages):
    tokenizer = SpamFilter(config)
    X, y = tokenise(tokenizer, messages)
    header = tokenizer.header_columns()
    if header is None:
        header = evidence.header_columns(tokenizer.vocabulary.tokens_)
    return X, y, tokenizer.pair_columns(), header, tokenizer.dependence()


@pytest.mark.parametrize("overrides", [{}, {"training.margin": 8.0},
                                       {"training.regime": "error"},
                                       {"model.event_model": "bernoulli",
                                        "training.margin": 8.0},
                                       {"decision.cost_ratio": 9.0, "training.margin": 8.0}],
                         ids=["defaults", "margin 8", "error", "bernoulli", "cost ratio 9"])
def test_the_thick_fit_learns_what_train_learns_and_scores_as_its_model(overrides):
    config = load_config(None, overrides)
    messages = list(iter_index(SAMPLE_INDEX))
    train, test = messages[:-20], messages[-20:]
    trained = SpamFilter(config)
    report = fit(trained, train)
    X, y, pairs, header, dependence = _matrix(config, train + test)
    digests = [hashlib.sha256(normalise(m.raw)).digest() for m in train + test]
    model, learned = fit_rows_in_order(X, y, np.arange(len(train)), config, pairs, header,
                                       dependence, digests)
    assert report.passed > 0 or config.training.margin == 40.0
    assert sorted(digests[i] for i in learned) == sorted(trained.ledger)
    Xf = (X > 0).astype(np.float64).tocsr() if config.features.features == "binary" else X
    matrix = score_rows(model, Xf[len(train):], config.model, pairs, header, dependence)
    np.testing.assert_allclose(matrix, trained.log_odds([m.raw for m in test]), rtol=1e-9,
                               atol=1e-9)


def test_a_repeat_is_learned_once_and_a_relabelled_one_moved_as_the_ledger_does():
    from textnb.mail.sources import RawMessage

    config = load_config(None, {"training.margin": 8.0})
    messages = list(iter_index(SAMPLE_INDEX))
    # The first messages are learned whatever the regime (no model can score them yet).
    flipped = RawMessage("again", messages[0].raw, "ham" if messages[0].label == "spam"
                         else "spam")
    train = messages[:60] + [messages[1], flipped] + messages[60:80]
    test = messages[80:]
    trained = SpamFilter(config)
    report = fit(trained, train)
    assert report.moved != {"spam": 0, "ham": 0} and report.known >= 1
    X, y, pairs, header, dependence = _matrix(config, train + test)
    digests = [hashlib.sha256(normalise(m.raw)).digest() for m in train + test]
    model, _ = fit_rows_in_order(X, y, np.arange(len(train)), config, pairs, header,
                                 dependence, digests)
    np.testing.assert_array_equal(model.class_count_, trained.model.class_count_)
    Xf = (X > 0).astype(np.float64).tocsr()
    np.testing.assert_allclose(score_rows(model, Xf[len(train):], config.model, pairs, header,
                                          dependence),
                               trained.log_odds([m.raw for m in test]), rtol=1e-9, atol=1e-9)


def test_every_row_learned_in_the_regime_all_is_the_plain_fit():
    config = load_config(None, {"training.regime": "all"})
    X, y, pairs, header, dependence = _matrix(config, iter_index(SAMPLE_INDEX))
    folds = [np.arange(0, X.shape[0], 3), np.setdiff1d(np.arange(X.shape[0]),
                                                       np.arange(0, X.shape[0], 3))]
    rows = training_rows(X, y, folds, config)
    for fold, train in zip(folds, rows):
        np.testing.assert_array_equal(train, np.setdiff1d(np.arange(X.shape[0]), fold))
    with_config = out_of_fold_log_odds(X, y, config.model, config.features, folds, pairs,
                                       header, dependence, config=config)
    without = out_of_fold_log_odds(X, y, config.model, config.features, folds, pairs, header,
                                   dependence)
    np.testing.assert_array_equal(with_config, without)


def test_out_of_fold_scores_of_a_thick_configuration_come_from_thick_fits():
    config = load_config(None, {"training.margin": 8.0})
    X, y, pairs, header, dependence = _matrix(config, iter_index(SAMPLE_INDEX))
    folds = [np.arange(0, X.shape[0], 2), np.arange(1, X.shape[0], 2)]
    rows = training_rows(X, y, folds, config, pairs, header, dependence)
    assert all(len(r) < X.shape[0] - len(f) for r, f in zip(rows, folds))
    scores = out_of_fold_log_odds(X, y, config.model, config.features, folds, pairs, header,
                                  dependence, config=config)
    Xf = (X > 0).astype(np.float64).tocsr()
    for fold in folds:
        other = np.setdiff1d(np.arange(X.shape[0]), fold)
        model = fit_rows_in_order(X, y, other, config, pairs, header, dependence)[0]
        np.testing.assert_array_equal(scores[fold], score_rows(model, Xf[fold], config.model,
                                                               pairs, header, dependence))
