"""Scoring from bare CSR arrays (textnb.features.csr_arrays) gives SciPy's scores bit for bit, for
every evidence selection, combining rule and event model, and P(spam) is SciPy's expit."""

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import SAMPLE_INDEX
from scipy.special import expit as scipy_expit

from textnb.config import FilterConfig, apply_overrides
from textnb.decision.costs import CostModel, expit
from textnb.features.csr_arrays import Rows
from textnb.mail.sources import iter_index
from textnb.modelfile.retrain import fit
from textnb.spamfilter import SpamFilter

CONFIGS = [
    {},  # the defaults: each side, word pairs capped, sum
    {"model.evidence": "strongest"},
    {"model.combine": "chi-square"},
    {"model.evidence": "strongest", "model.combine": "chi-square", "features.min_df": 2},
    {"model.min_strength": 0.5},
    {"model.event_model": "bernoulli", "features.features": "tf"},
    {"features.features": "tf", "features.min_df": 2},  # pruned columns weigh 0
    {"model.max_discriminators": 0},  # plain naive Bayes: SciPy's product
]


@pytest.fixture(scope="module")
def messages():
    return list(iter_index(SAMPLE_INDEX))


@pytest.fixture(scope="module")
def token_lists(messages):
    return SpamFilter().tokens_many([m.raw for m in messages])


@pytest.mark.parametrize("overrides", CONFIGS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_rows_score_as_the_csr_matrix(overrides, messages, token_lists):
    spam_filter = SpamFilter(apply_overrides(FilterConfig(), overrides))
    fit(spam_filter, messages[:70])
    binary = spam_filter.config.features.features == "binary"
    # Scored as a batch, with tokens the model has not seen (the last 30 messages).
    rows = spam_filter.vocabulary.rows(token_lists, binary=binary)
    csr = spam_filter.vocabulary.transform(token_lists, binary=binary)
    assert isinstance(rows, Rows) and sp.issparse(csr)
    np.testing.assert_array_equal(rows.to_csr().toarray(), csr.toarray())
    from_rows = spam_filter.log_odds_matrix(rows)
    from_csr = spam_filter.log_odds_matrix(csr)
    assert from_rows.tolist() == from_csr.tolist()  # bit for bit
    assert spam_filter.log_odds_tokens(token_lists).tolist() == from_csr.tolist()
    C_rows, base_rows = spam_filter.model.log_odds_contributions(rows)
    C_csr, base_csr = spam_filter.model.log_odds_contributions(csr)
    assert base_rows == base_csr
    for name in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(getattr(C_rows, name), getattr(C_csr, name))
    assert C_rows.shape == C_csr.shape


def test_rows_from_an_older_vocabulary_are_widened_and_a_wider_matrix_is_refused(messages,
                                                                                 token_lists):
    spam_filter = SpamFilter()
    fit(spam_filter, messages[:50])
    rows = spam_filter.vocabulary.rows(token_lists[50:])
    before = spam_filter.log_odds_matrix(rows)
    # Learning more grows the vocabulary past the rows' width.
    spam_filter.learn_tokens(token_lists[50:60], [m.label for m in messages[50:60]])
    assert len(spam_filter.vocabulary) > rows.shape[1]
    assert spam_filter.model._check_X(rows).shape[1] == len(spam_filter.vocabulary)
    wider = Rows(rows.data, rows.indices, rows.indptr, (rows.shape[0], 10 ** 7))
    with pytest.raises(ValueError, match="features"):
        spam_filter.log_odds_matrix(wider)
    assert before.shape == (len(messages) - 50,)


def test_expit_is_scipys_bit_for_bit():
    x = np.concatenate([np.linspace(-800, 800, 200_001),
                        np.random.default_rng(0).normal(0, 30, 100_000),
                        [np.inf, -np.inf, 0.0, -0.0, 709.78, -709.78, 745.2, -745.2]])
    assert expit(x).tolist() == scipy_expit(x).tolist()
    assert expit(x[:300_000].reshape(2, -1)).shape == (2, 150_000)
    assert np.isnan(expit(np.array([np.nan])))[0]
    assert expit(3.5) == scipy_expit(3.5) and isinstance(expit(3.5), float)
    assert CostModel(cost_ratio=9.0).decide(-1000.0).p_spam == 0.0
