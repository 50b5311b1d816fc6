"""SpamFilter end to end on the project's sample corpus."""

import numpy as np
import pytest

from textnb.config import FeatureConfig, FilterConfig, ModelConfig
from textnb.errors import EmptyTrainingSetError
from textnb.mail.sources import iter_index, iter_messages
from textnb.spamfilter import SpamFilter

from conftest import SAMPLE

UNLABELLED_TRUTH = {"001": "spam", "002": "ham", "003": "ham", "004": "ham", "005": "spam",
                    "006": "spam"}  # corpora/PROVENANCE.md
VARIANTS = [(e, f) for e in ("multinomial", "bernoulli") for f in ("tf", "binary")]


def _config(event_model, features, **model):
    # "each-side" evidence (the default) is chosen and measured for the multinomial
    # model; Bernoulli keeps the single ranking, as configs/short-texts.toml does.
    if event_model == "bernoulli":
        model.setdefault("evidence", "strongest")
    return FilterConfig(model=ModelConfig(event_model=event_model, **model),
                        features=FeatureConfig(features=features))


@pytest.mark.parametrize("event_model,features", VARIANTS)
def test_every_variant_classifies_the_unlabelled_sample(event_model, features, sample_index):
    spam_filter = SpamFilter(_config(event_model, features)).fit(iter_index(sample_index))
    results = {s.source.rsplit("/", 1)[-1][:3]: s.decision.label
               for s in spam_filter.classify(iter_messages(SAMPLE / "unlabelled"))}
    wrong = {k: v for k, v in results.items() if v != UNLABELLED_TRUTH[k]}
    assert len(results) == 6
    assert len(wrong) <= 1, wrong


@pytest.mark.parametrize("event_model,features", VARIANTS)
def test_training_on_a_then_b_equals_training_on_the_union(event_model, features, sample_index):
    messages = list(iter_index(sample_index))
    union = SpamFilter(_config(event_model, features)).fit(messages)
    stepwise = SpamFilter(_config(event_model, features))
    stepwise.learn(messages[:37])
    stepwise.learn(messages[37:])
    raws = [m.raw for m in messages]
    np.testing.assert_array_equal(stepwise.model.feature_count_, union.model.feature_count_)
    np.testing.assert_allclose(stepwise.log_odds(raws), union.log_odds(raws), rtol=0, atol=1e-9)


@pytest.mark.parametrize("event_model,features", VARIANTS)
def test_forgetting_restores_the_earlier_model(event_model, features, sample_index):
    messages = list(iter_index(sample_index))
    first = SpamFilter(_config(event_model, features)).fit(messages[:60])
    both = SpamFilter(_config(event_model, features)).fit(messages)
    both.learn(messages[60:], weight=-1)
    raws = [m.raw for m in messages]
    np.testing.assert_allclose(both.log_odds(raws), first.log_odds(raws), rtol=0, atol=1e-9)
    assert both.n_learned == first.n_learned


@pytest.mark.parametrize("event_model,features", VARIANTS)
def test_explanation_adds_up_to_the_log_odds(event_model, features, sample_index):
    spam_filter = SpamFilter(_config(event_model, features)).fit(iter_index(sample_index))
    message = next(iter_messages(SAMPLE / "unlabelled" / "001.eml"))
    e = spam_filter.explain(message, k=100_000)
    total = e.prior_log_odds + e.absence_log_odds + sum(c[1] for c in e.clues)
    assert total == pytest.approx(e.decision.log_odds, abs=1e-8)
    top = spam_filter.explain(message, k=5).clues
    assert len(top) == 5
    assert [abs(c[1]) for c in top] == sorted((abs(c[1]) for c in top), reverse=True)


def test_one_class_training_set_is_refused(sample_index):
    spam_only = [m for m in iter_index(sample_index) if m.label == "spam"]
    with pytest.raises(EmptyTrainingSetError, match="no ham messages"):
        SpamFilter().fit(spam_only)


def test_empty_training_set_is_refused():
    with pytest.raises(EmptyTrainingSetError, match="no ham or spam"):
        SpamFilter().fit([])


def test_cost_ratio_moves_the_threshold(sample_filter):
    assert sample_filter.cost_model().log_threshold == 0.0
    assert sample_filter.cost_model(999).log_threshold == pytest.approx(np.log(999))


def test_min_df_pruning_keeps_counts(sample_index, sample_filter):
    pruned = SpamFilter(FilterConfig(features=FeatureConfig(min_df=3))).fit(iter_index(sample_index))
    full = sample_filter
    assert len(pruned.vocabulary) == len(full.vocabulary)
    np.testing.assert_array_equal(pruned.model.feature_count_, full.model.feature_count_)
    assert pruned.model.feature_mask_.sum() < full.model.feature_mask_.sum()


def _messages(sizes):
    from textnb.mail.sources import RawMessage

    return [RawMessage(f"m{i}", b"x" * size, "ham") for i, size in enumerate(sizes)]


@pytest.mark.parametrize("n", [0, 1, 63, 200, 511, 512, 1023, 1024, 1025, 1536, 5000])
def test_learning_batches_keep_every_message_in_order_and_cut_only_the_tail(n):
    from textnb.spamfilter import BATCH_SIZE, MIN_TAIL_BATCH, TAIL_BATCHES, learning_batches

    messages = _messages(range(1, n + 1))
    batches = list(learning_batches(messages))
    assert [m for b in batches for m in b] == messages
    assert all(batches)
    tail = n if n <= 2 * BATCH_SIZE else (n - 1) % BATCH_SIZE + 1 + BATCH_SIZE
    whole = batches[:len(batches) - min(TAIL_BATCHES, max(tail // MIN_TAIL_BATCH, 1))]
    assert all(len(b) == BATCH_SIZE for b in whole)
    assert sum(map(len, whole)) == n - tail
    if tail // MIN_TAIL_BATCH >= 2:  # the tail in about equal bytes
        cut = batches[len(whole):]
        assert len(cut) == min(TAIL_BATCHES, tail // MIN_TAIL_BATCH)
        shares = [sum(len(m.raw) for m in b) for b in cut]
        largest_message = max(len(m.raw) for b in cut for m in b)
        assert max(shares) - min(shares) <= 2 * largest_message
    else:
        assert len(batches) <= 1


def test_learning_batches_leave_no_batch_empty_around_a_huge_message():
    from textnb.spamfilter import learning_batches

    messages = _messages([10] * 300 + [10_000_000] + [10] * 300)
    batches = list(learning_batches(messages))
    assert [m for b in batches for m in b] == messages
    assert all(batches) and len(batches) > 1


def test_explain_counts_the_tokens_the_model_never_saw(sample_filter):
    from textnb.mail.sources import RawMessage

    spam_filter = sample_filter
    raw = (b"Subject: zqxjv meeting\n\nzqxjv wlorbq wlorbq the meeting agenda\n")
    tokens = spam_filter.tokens(raw)
    expected = sum(1 for t in tokens if t not in spam_filter.vocabulary)
    explanation = spam_filter.explain(RawMessage("-", raw, None))
    assert explanation.unknown_tokens == expected > 0
