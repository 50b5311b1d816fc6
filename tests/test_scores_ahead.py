"""Scores made a block ahead (``textnb.models.scores_ahead``) are the scores one message at a
time gives: a thick pass learns the same messages into the same model whatever the block,
in ``train``'s lifecycle and in cross-validation's thick fit."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from textnb.config import load_config
from textnb.evaluation.cross_validation import fit_rows_in_order
from textnb.evaluation.tune import tokenise
from textnb.mail.sources import iter_index
from textnb.models import evidence, scores_ahead
from textnb.models.ledger import normalise
from textnb.models.scores_ahead import MAX_BLOCK, ScoresAhead, block_size
from textnb.modelfile.retrain import fit
from textnb.modelfile.store import dumps
from textnb.spamfilter import SpamFilter

from conftest import SAMPLE_INDEX

# A margin that lets about half the sample pass, so that blocks outlive several messages.
CONFIG = {"training.margin": 5.0}


def test_a_message_scores_the_same_alone_and_in_a_block(sample_learned_filter):
    messages = [m.raw for m in iter_index(SAMPLE_INDEX)]
    tokens = sample_learned_filter.tokens_many(messages)
    block = sample_learned_filter.log_odds_tokens(tokens)
    alone = [sample_learned_filter.log_odds_tokens([t])[0] for t in tokens]
    assert block.tolist() == alone  # exact: ahead-scoring relies on it


def test_the_block_follows_how_often_the_model_changes():
    assert block_size(1.0) == 1  # every scored message learned: one at a time
    sizes = [block_size(p) for p in (0.5, 0.2, 0.1, 0.05, 0.01, 0.0)]
    assert sizes == sorted(sizes) and sizes[0] > 1 and sizes[-1] == MAX_BLOCK


def test_scores_are_kept_until_the_model_changes():
    spans = []

    def span(start, stop):
        spans.append((start, stop))
        return [float(10 * start + i) for i in range(stop - start)][:3]  # items run out

    ahead = ScoresAhead(span)
    ahead.change_rate = 0.0  # a large block
    assert [ahead.at(0), ahead.at(1)] == [0.0, 1.0] and len(spans) == 1
    ahead.done(1, changed=True)  # learned: what was scored for 2 is stale
    assert ahead.at(2) == 20.0 and len(spans) == 2 and spans[-1][0] == 2
    ahead.done(2, changed=False)
    assert ahead.at(3) == 21.0 and len(spans) == 2
    assert ahead.at(5) == 50.0 and len(spans) == 3  # past the items scored: a new span


def _trained(overrides):
    spam_filter = SpamFilter(load_config(None, overrides))
    report = fit(spam_filter, list(iter_index(SAMPLE_INDEX)))
    return dumps(spam_filter), report


@pytest.mark.parametrize("overrides", [CONFIG, {**CONFIG, "training.regime": "error"},
                                       {**CONFIG, "model.event_model": "bernoulli"}],
                         ids=["thick", "error", "bernoulli"])
def test_a_thick_pass_learns_the_same_model_whatever_the_block(overrides, monkeypatch):
    ahead, report = _trained(overrides)
    assert report.passed > 20  # blocks outlived messages
    for size in (1, MAX_BLOCK):
        with monkeypatch.context() as patch:
            patch.setattr(scores_ahead, "block_size", lambda rate, size=size: size)
            fixed, fixed_report = _trained(overrides)
        assert fixed == ahead and fixed_report.passed == report.passed


def test_the_cross_validation_fit_learns_the_same_rows_whatever_the_block(monkeypatch):
    config = load_config(None, CONFIG)
    messages = list(iter_index(SAMPLE_INDEX))
    tokenizer = SpamFilter(config)
    X, y = tokenise(tokenizer, messages)
    header = tokenizer.header_columns()
    if header is None:
        header = evidence.header_columns(tokenizer.vocabulary.tokens_)
    digests = [hashlib.sha256(normalise(m.raw)).digest() for m in messages]

    def learned():
        model, rows = fit_rows_in_order(X, y, np.arange(len(y)), config,
                                        tokenizer.pair_columns(), header,
                                        tokenizer.dependence(), digests)
        return rows.tolist(), model.feature_count_.tolist()

    ahead = learned()
    assert 20 < len(y) - len(ahead[0])
    for size in (1, MAX_BLOCK):
        with monkeypatch.context() as patch:
            patch.setattr(scores_ahead, "block_size", lambda rate, size=size: size)
            assert learned() == ahead
