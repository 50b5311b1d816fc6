"""The SpamAssassin split, tokenised once per test session (test_tune and test_plots share it).

Tokenising the 6,047 messages takes 20-40 s; everything after it (cross-validation,
calibration, plots) takes seconds.
"""

from functools import lru_cache

import numpy as np


@lru_cache(maxsize=1)
def spamassassin_split():
    """(X, y, n_train, pairs): term counts of the train then test messages, y 1 = spam,
    and which of X's columns are word pairs (for the evidence selection)."""
    from textnb.corpora import iter_corpus, split
    from textnb.pipeline import SpamFilter

    train, test = split(iter_corpus("spamassassin"))
    spam_filter = SpamFilter()
    X = spam_filter.vocabulary.transform((spam_filter.tokens(e.raw) for e in train + test),
                                         grow=True)
    y = np.array([e.label == "spam" for e in train + test], dtype=np.int64)
    return X, y, len(train), spam_filter.pair_columns()
