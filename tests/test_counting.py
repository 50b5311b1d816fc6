"""``count_tokens``: the counts and tokens hashes of token lists in one pass and one sort, checked
against the matrix path (``SpamFilter.learn_tokens``) and ``ledger.tokens_hash``."""

from __future__ import annotations

import numpy as np
import pytest

from textnb.config import FilterConfig, apply_overrides
from textnb.engines.counting import count_tokens
from textnb.models.ledger import tokens_hash
from textnb.spamfilter import SpamFilter

TOKEN_LISTS = [
    ["b", "a", "b", "subject:free", "bi:a b"],
    [],                                        # a message with no tokens
    ["a", "é", "\ud800", "a", "zz", "é"],       # non-ASCII and a lone surrogate sort as str do
    ["b", "b", "b"],
    ["Z", "a", "aa", "a\x00", "url:x.example"],  # capitals before lower case, a NUL
]
LABEL_CODES = [1, 0, 0, 1, 1]


def _matrix_counts(config: FilterConfig) -> dict:
    spam_filter = SpamFilter(config)
    spam_filter.learn_tokens([list(t) for t in TOKEN_LISTS],
                             ["spam" if c else "ham" for c in LABEL_CODES])
    return spam_filter.counts()


@pytest.mark.parametrize("overrides, presence", [
    ({"features.features": "tf"}, False),
    ({"features.features": "binary"}, True),  # the default
    ({"features.features": "tf", "model.event_model": "bernoulli"}, True)])
def test_counts_are_the_matrix_paths(overrides, presence):
    config = apply_overrides(FilterConfig(), overrides)
    assert SpamFilter(config).counts_presence is presence
    counts, _ = count_tokens(TOKEN_LISTS, LABEL_CODES, presence)
    expected = _matrix_counts(config)
    n = len(expected["tokens"])
    assert counts.tokens == list(expected["tokens"])  # columns in order of first sight
    np.testing.assert_array_equal(counts.class_count, expected["class_count"])
    np.testing.assert_array_equal(counts.feature_count, expected["feature_count"][:, :n])
    np.testing.assert_array_equal(counts.doc_freq, expected["doc_freq"][:n])


def test_hand_counted():
    counts, _ = count_tokens([["b", "a", "b"], ["a"]], [1, 0])
    assert counts.tokens == ["b", "a"]
    np.testing.assert_array_equal(counts.feature_count, [[0, 1], [2, 1]])  # ham, spam rows
    np.testing.assert_array_equal(counts.doc_freq, [1, 2])
    np.testing.assert_array_equal(counts.class_count, [1, 1])
    presence, _ = count_tokens([["b", "a", "b"], ["a"]], [1, 0], presence=True)
    np.testing.assert_array_equal(presence.feature_count, [[0, 1], [1, 1]])


def test_hashes_are_the_ledgers():
    _, hashes = count_tokens(TOKEN_LISTS, LABEL_CODES)
    assert hashes == [tokens_hash(t) for t in TOKEN_LISTS]


def test_nothing_to_count():
    counts, hashes = count_tokens([], [])
    assert counts.tokens == [] and hashes == []
    assert counts.feature_count.shape == (2, 0) and not counts.class_count.any()
    counts, hashes = count_tokens([[], []], [0, 1])
    assert counts.tokens == [] and hashes == [tokens_hash([])] * 2
    np.testing.assert_array_equal(counts.class_count, [1, 1])
