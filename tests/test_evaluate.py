"""Cross-validation helpers: folds, and out-of-fold scores equal to real per-fold filters."""

import numpy as np
import pytest

from textnb.config import FeatureConfig, FilterConfig, ModelConfig
from textnb.evaluation.cross_validation import (chronological_folds, out_of_fold_log_odds,
                                                stratified_folds)
from textnb.features.vectorize import Vocabulary
from textnb.mail.sources import iter_index
from textnb.models.dependence import make_dependence
from textnb.models.evidence import header_columns, pair_columns
from textnb.spamfilter import SpamFilter


def test_stratified_folds_partition_and_balance():
    y = np.array([0] * 30 + [1] * 10)
    folds = stratified_folds(y, 5, seed=3)
    assert sorted(np.concatenate(folds).tolist()) == list(range(40))
    assert all(y[f].sum() == 2 and len(f) == 8 for f in folds)
    with pytest.raises(ValueError, match="only 10 messages of class 1 for 11 folds"):
        stratified_folds(y, 11)


def test_chronological_folds_are_contiguous():
    assert [f.tolist() for f in chronological_folds(7, 3)] == [[0, 1, 2], [3, 4], [5, 6]]


@pytest.mark.parametrize("event_model,features,min_df,k,route_alpha", [
    ("multinomial", "binary", 1, 0, None), ("multinomial", "tf", 2, 0, None),
    ("bernoulli", "binary", 1, 0, None), ("multinomial", "binary", 1, 15, None),
    ("bernoulli", "tf", 1, 7, None), ("multinomial", "binary", 2, 15, 0.03),
    ("bernoulli", "binary", 1, 7, 0.03)])
def test_out_of_fold_scores_equal_filters_trained_per_fold(sample_index, event_model, features,
                                                           min_df, k, route_alpha):
    cfg = FilterConfig(model=ModelConfig(event_model=event_model, alpha=0.3, max_discriminators=k,
                                         route_alpha=route_alpha),
                       features=FeatureConfig(features=features, min_df=min_df))
    messages = list(iter_index(sample_index))
    spam_filter = SpamFilter(cfg)
    tokens = [spam_filter.tokens(m.raw) for m in messages]
    y = np.array([m.label == "spam" for m in messages], dtype=np.int64)
    vocabulary = Vocabulary()
    X = vocabulary.transform(tokens, grow=True)
    folds = stratified_folds(y, 4)
    oof = out_of_fold_log_odds(X, y, cfg.model, cfg.features, folds,
                               pair_columns(vocabulary.tokens_),
                               header_columns(vocabulary.tokens_),
                               make_dependence(list(vocabulary.tokens_), vocabulary.columns,
                                               cfg.model.clues_per_header_field,
                                               cfg.model.tile_word_pairs))
    for test in folds:
        train = np.setdiff1d(np.arange(len(y)), test)
        fold_filter = SpamFilter(cfg)
        fold_filter.learn([messages[i] for i in train])
        expected = fold_filter.log_odds_tokens([tokens[i] for i in test])
        np.testing.assert_allclose(oof[test], expected, rtol=0, atol=1e-9)


def test_fit_rows_with_route_alpha_needs_the_route_columns():
    import scipy.sparse as sp

    from textnb.evaluation.cross_validation import fit_rows

    X = sp.csr_matrix(np.array([[1, 1], [1, 0]], dtype=float))
    with pytest.raises(ValueError, match="model.route_alpha=0.03 smooths the route's columns "
                                         "apart: pass route_columns"):
        fit_rows(X, np.array([0, 1]), np.arange(2), ModelConfig(route_alpha=0.03),
                 FeatureConfig())
