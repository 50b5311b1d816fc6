"""Accuracy on the public corpora with the default configuration (guards the README table).

The bounds are bogofilter 1.2.5's (1-AUC)% on the same deterministic split, measured on
this project's machine (``python -m bench.peers``): textnb must not fall behind it.
"""

import numpy as np
import pytest

from textnb.evaluation.metrics import summary
from textnb.mail.corpora import chronological_split, iter_corpus, split
from textnb.mail.sources import RawMessage
from textnb.spamfilter import SpamFilter

pytestmark = [pytest.mark.corpus, pytest.mark.slow]

# bogofilter 1.2.5 on the same test folds (bench/peers.py): (1-AUC)%, sm% at hm = 0.1%.
BOGOFILTER = {"spamassassin": (0.042, 8.93), "enron": (0.220, 28.3), "lingspam": (0.101, 4.72),
              "sms": (1.464, 27.3)}
# Ham lost at the untuned threshold ln 1 = 0: under 1% everywhere but SpamAssassin, where
# the each-side default puts 9 of 841 test hams just over 0 (1.07%; docs/accuracy.md,
# how a message is scored). Its guard is that measured figure; `textnb tune` is the
# remedy the docs give.
HM_AT_ZERO_GUARD = {"spamassassin": 100 * 9 / 841}


def _messages(examples):
    return (RawMessage(e.relpath, e.raw, e.label) for e in examples)


def _test_summary(corpus, train, test) -> dict:
    """The default filter trained on ``train``: the field's metrics on ``test`` at ln 1 = 0."""
    spam_filter = SpamFilter().fit(_messages(train))
    scores = spam_filter.log_odds(e.raw for e in test)
    y = np.array([e.label == "spam" for e in test])
    result = summary(y, scores, threshold=0.0)
    print(corpus, {k: round(float(v), 4) for k, v in result.items()})
    return result


@pytest.mark.parametrize("corpus", ["spamassassin", "enron", "lingspam", "sms"])
def test_default_filter_beats_bogofilter(shared_corpora, corpus):
    result = _test_summary(corpus, *split(iter_corpus(corpus, shared_corpora)))
    auc_bound, sm_at_hm_bound = BOGOFILTER[corpus]
    assert result["one_minus_auc_pct"] < auc_bound
    assert result["sm_pct_at_hm_0.1pct"] < sm_at_hm_bound
    assert result["hm_pct"] <= HM_AT_ZERO_GUARD.get(corpus, 1.0) and result["sm_pct"] < 5.0


# bogofilter 1.2.5 on the corpora README's chronological split (per class, the latest
# fifth by date is the test part; python -m bench.peers --split chronological), (1-AUC)% and
# sm% at hm = 0.1%. Trained on the past, scored on the future.
BOGOFILTER_CHRONOLOGICAL = {"spamassassin": (0.525, 21.58), "enron": (0.615, 38.22)}


@pytest.mark.parametrize("corpus", ["spamassassin", "enron"])
def test_default_filter_beats_bogofilter_on_later_mail(shared_corpora, corpus):
    examples = iter_corpus(corpus, shared_corpora)
    result = _test_summary(corpus, *chronological_split(corpus, examples))
    auc_bound, sm_at_hm_bound = BOGOFILTER_CHRONOLOGICAL[corpus]
    assert result["one_minus_auc_pct"] < auc_bound
    assert result["sm_pct_at_hm_0.1pct"] < sm_at_hm_bound
