"""The SpamAssassin split, tokenised once per test session (test_tune and test_plots share it).

Tokenising the 6,047 messages takes 20-40 s; everything after it (cross-validation,
calibration, plots) takes seconds.
"""

from functools import lru_cache

import numpy as np


@lru_cache(maxsize=1)
def spamassassin_split():
    """(X, y, n_train, pairs, headers, dependence): term counts of the train then test
    messages, y 1 = spam, and which of X's columns are word pairs, which come from header
    fields and which repeat another's evidence (for the evidence selection)."""
    from textnb.mail.corpora import iter_corpus, split
    from textnb.spamfilter import SpamFilter

    train, test = split(iter_corpus("spamassassin"))
    spam_filter = SpamFilter()
    X = spam_filter.vocabulary.transform((spam_filter.tokens(e.raw) for e in train + test),
                                         grow=True)
    y = np.array([e.label == "spam" for e in train + test], dtype=np.int64)
    return (X, y, len(train), spam_filter.pair_columns(), spam_filter.header_columns(),
            spam_filter.dependence())


@lru_cache(maxsize=1)
def spamassassin_tuned():
    """(tuned, y_test, test log-odds): `tune` on the training split with the default
    settings (λ = 1, 9, 999; 5 folds), and the test split scored by a model trained on
    the whole training split."""
    from conftest import every_message
    from textnb.config import FilterConfig
    from textnb.evaluation.cross_validation import fit_rows, score_rows
    from textnb.evaluation.tune import make_folds, tune_matrix
    from textnb.features.vectorize import binarize

    X, y, n_train, pairs, headers, dependence = spamassassin_split()
    # Every message learned: the split lists each class in turn, no order to learn in.
    cfg = every_message(FilterConfig())
    tr, te = np.arange(n_train), np.arange(n_train, len(y))
    tuned = tune_matrix(X[tr], y[tr], cfg, (1, 9, 999), make_folds(y[tr], 5),
                        pair_columns=pairs, header_columns=headers, dependence=dependence)
    model = fit_rows(X, y, tr, cfg.model, cfg.features, route_columns=headers)
    Xf = binarize(X) if cfg.features.features == "binary" else X
    return tuned, y[te], score_rows(model, Xf[te], cfg.model, pairs, headers, dependence)
