"""Vocabulary and CSR building."""

import numpy as np
import pytest

from textnb.vectorize import Vocabulary, binarize, feature_mask

DOCS = [["free", "money", "free"], ["meeting", "notes"], ["free", "notes", "notes", "notes"]]


def test_tf_matrix_counts_tokens():
    vocab = Vocabulary()
    X = vocab.transform(DOCS, grow=True)
    assert vocab.tokens_ == ["free", "money", "meeting", "notes"]
    np.testing.assert_array_equal(X.toarray(), [[2, 1, 0, 0], [0, 0, 1, 1], [1, 0, 0, 3]])
    assert X.has_sorted_indices


def test_binary_matrix_and_binarize_agree():
    vocab = Vocabulary()
    X = vocab.transform(DOCS, grow=True)
    B = Vocabulary(vocab.tokens_).transform(DOCS, binary=True)
    np.testing.assert_array_equal(B.toarray(), binarize(X).toarray())
    np.testing.assert_array_equal(B.toarray(), (X.toarray() > 0).astype(float))


def test_unknown_tokens_dropped_when_not_growing():
    vocab = Vocabulary(["free"])
    X = vocab.transform([["free", "unseen", "free"]])
    assert X.shape == (1, 1) and X[0, 0] == 2
    assert len(vocab) == 1


def test_single_string_is_refused():
    with pytest.raises(TypeError, match="single string"):
        Vocabulary().transform("free money")


def test_empty_input_gives_empty_matrix():
    X = Vocabulary(["a"]).transform([])
    assert X.shape == (0, 1)


def test_feature_mask_min_df_and_max_features():
    df = np.array([5, 1, 3, 3, 0, 2])
    np.testing.assert_array_equal(feature_mask(df, min_df=2), [1, 0, 1, 1, 0, 1])
    # the 3 most frequent, ties by column order
    np.testing.assert_array_equal(feature_mask(df, max_features=3), [1, 0, 1, 1, 0, 0])
    np.testing.assert_array_equal(feature_mask(df, min_df=3, max_features=2), [1, 0, 1, 0, 0, 0])
