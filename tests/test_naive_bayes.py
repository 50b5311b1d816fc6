"""Naive Bayes: worked examples, scikit-learn agreement, and the count invariants."""

import numpy as np
import pytest
import scipy.sparse as sp

from textnb.errors import EmptyTrainingSetError, NotFittedError
from textnb.models.naive_bayes import BernoulliNB, MultinomialNB

# Manning, Raghavan & Schütze, *Introduction to Information Retrieval*, tables 13.1/13.2.
# Columns: Chinese, Beijing, Shanghai, Macao, Tokyo, Japan; class 1 = "China", 0 = not.
IR_X = sp.csr_matrix(np.array([
    [2, 1, 0, 0, 0, 0],   # Chinese Beijing Chinese
    [2, 0, 1, 0, 0, 0],   # Chinese Chinese Shanghai
    [1, 0, 0, 1, 0, 0],   # Chinese Macao
    [1, 0, 0, 0, 1, 1],   # Tokyo Japan Chinese
], dtype=float))
IR_Y = np.array([1, 1, 1, 0])
IR_TEST = sp.csr_matrix(np.array([[3, 0, 0, 0, 1, 1]], dtype=float))  # Chinese×3 Tokyo Japan

rng = np.random.RandomState(0)
X_RAND = sp.csr_matrix(rng.poisson(0.3, size=(60, 40)).astype(float))
Y_RAND = rng.randint(2, size=60)

MODELS = [MultinomialNB, BernoulliNB]


def test_multinomial_ir_book_example():
    model = MultinomialNB(alpha=1.0).fit(IR_X, IR_Y)
    # P(China|d5) ∝ 3/4 · (3/7)^3 · 1/14 · 1/14 ; P(not|d5) ∝ 1/4 · (2/9)^3 · 2/9 · 2/9
    expected = np.log([0.25 * (2 / 9) ** 5, 0.75 * (3 / 7) ** 3 / 14 / 14])
    assert np.allclose(model.joint_log_likelihood(IR_TEST)[0], expected, rtol=0, atol=1e-12)
    assert np.exp(expected[1]) == pytest.approx(0.00030122, rel=1e-4)
    assert model.predict(IR_TEST)[0] == 1


def test_bernoulli_ir_book_example():
    model = BernoulliNB(alpha=1.0).fit(IR_X, IR_Y)
    china = 0.75 * (4 / 5) * (1 - 2 / 5) ** 3 * (1 / 5) * (1 / 5)
    other = 0.25 * (2 / 3) * (1 - 1 / 3) ** 3 * (2 / 3) * (2 / 3)
    assert china == pytest.approx(0.005184)
    assert other == pytest.approx(0.0219479, rel=1e-5)
    assert np.allclose(model.joint_log_likelihood(IR_TEST)[0], np.log([other, china]), atol=1e-12)
    assert model.predict(IR_TEST)[0] == 0


@pytest.mark.parametrize("alpha", [1.0, 0.1, 1e-3])
@pytest.mark.parametrize("fit_prior,class_prior", [(True, None), (False, None), (True, [0.3, 0.7])])
@pytest.mark.parametrize("cls", MODELS)
def test_equals_scikit_learn(cls, alpha, fit_prior, class_prior):
    naive_bayes = pytest.importorskip("sklearn.naive_bayes")
    theirs = getattr(naive_bayes, cls.__name__)(alpha=alpha, fit_prior=fit_prior,
                                                class_prior=class_prior).fit(X_RAND, Y_RAND)
    ours = cls(alpha=alpha, fit_prior=fit_prior, class_prior=class_prior).fit(X_RAND, Y_RAND)
    X_test = sp.csr_matrix(rng.poisson(0.5, size=(25, 40)).astype(float))
    np.testing.assert_allclose(ours.feature_log_prob_, theirs.feature_log_prob_, rtol=0, atol=1e-9)
    np.testing.assert_allclose(ours.predict_log_proba(X_test), theirs.predict_log_proba(X_test),
                               rtol=0, atol=1e-9)
    np.testing.assert_allclose(ours.predict_proba(X_test), theirs.predict_proba(X_test),
                               rtol=0, atol=1e-9)


@pytest.mark.parametrize("cls", MODELS)
def test_probabilities_sum_to_one(cls):
    model = cls().fit(X_RAND, Y_RAND)
    np.testing.assert_allclose(model.predict_proba(X_RAND).sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.exp(model.predict_log_proba(X_RAND)), model.predict_proba(X_RAND))


@pytest.mark.parametrize("cls", MODELS)
def test_log_odds_is_difference_of_posteriors(cls):
    model = cls().fit(X_RAND, Y_RAND)
    lp = model.predict_log_proba(X_RAND)
    np.testing.assert_allclose(model.log_odds(X_RAND), lp[:, 1] - lp[:, 0], atol=1e-9)


@pytest.mark.parametrize("cls", MODELS)
def test_chunked_training_equals_batch(cls):
    batch = cls().fit(X_RAND, Y_RAND)
    chunked = cls()
    for start in range(0, 60, 7):
        chunked.partial_fit(X_RAND[start:start + 7], Y_RAND[start:start + 7])
    np.testing.assert_array_equal(chunked.feature_count_, batch.feature_count_)
    np.testing.assert_array_equal(chunked.log_odds(X_RAND), batch.log_odds(X_RAND))


@pytest.mark.parametrize("cls", MODELS)
def test_duplicated_rows_equal_doubled_weights(cls):
    doubled = cls().fit(sp.vstack([X_RAND, X_RAND]), np.concatenate([Y_RAND, Y_RAND]))
    weighted = cls().fit(X_RAND, Y_RAND, sample_weight=np.full(60, 2.0))
    np.testing.assert_allclose(doubled.log_odds(X_RAND), weighted.log_odds(X_RAND), atol=1e-12)


@pytest.mark.parametrize("cls", MODELS)
def test_unlearn_restores_counts_exactly(cls):
    a = cls().fit(X_RAND[:40], Y_RAND[:40])
    ab = cls().fit(X_RAND[:40], Y_RAND[:40]).partial_fit(X_RAND[40:], Y_RAND[40:])
    ab.unlearn(X_RAND[40:], Y_RAND[40:])
    np.testing.assert_array_equal(ab.feature_count_, a.feature_count_)
    np.testing.assert_array_equal(ab.class_count_, a.class_count_)
    np.testing.assert_array_equal(ab.log_odds(X_RAND), a.log_odds(X_RAND))


@pytest.mark.parametrize("cls", MODELS)
def test_unlearning_what_was_never_learned_is_refused(cls):
    model = cls().fit(X_RAND[:10], Y_RAND[:10])
    with pytest.raises(ValueError, match="never learned"):
        model.unlearn(X_RAND[10:40], Y_RAND[10:40])


@pytest.mark.parametrize("cls", MODELS)
def test_merge_equals_training_on_union(cls):
    a = cls().fit(X_RAND[:30], Y_RAND[:30])
    b = cls().fit(X_RAND[30:], Y_RAND[30:])
    union = cls().fit(X_RAND, Y_RAND)
    a.merge(b)
    np.testing.assert_array_equal(a.feature_count_, union.feature_count_)
    np.testing.assert_allclose(a.log_odds(X_RAND), union.log_odds(X_RAND), atol=1e-12)


@pytest.mark.parametrize("cls", MODELS)
def test_vocabulary_growth_pads_columns(cls):
    narrow = cls().fit(X_RAND[:, :30], Y_RAND)
    narrow.partial_fit(sp.csr_matrix((0, 40)), np.zeros(0, dtype=int))
    assert narrow.feature_count_.shape == (2, 40)
    # old-width matrices are widened when scoring
    assert narrow.log_odds(X_RAND[:, :30]).shape == (60,)
    with pytest.raises(ValueError, match="41 features, the model was fit with 40"):
        narrow.log_odds(sp.csr_matrix((1, 41)))


@pytest.mark.parametrize("cls", MODELS)
def test_feature_mask_drops_columns_from_scores(cls):
    full = cls().fit(X_RAND[:, :20], Y_RAND)
    masked = cls().fit(X_RAND, Y_RAND)
    mask = np.zeros(40, dtype=bool)
    mask[:20] = True
    masked.set_feature_mask(mask)
    np.testing.assert_allclose(masked.log_odds(X_RAND), full.log_odds(X_RAND[:, :20]), atol=1e-12)


@pytest.mark.parametrize("cls", MODELS)
def test_errors_name_the_problem(cls):
    with pytest.raises(NotFittedError, match="not trained"):
        cls().log_odds(X_RAND)
    with pytest.raises(ValueError, match=r"X.shape\[0\]=60 and y.shape\[0\]=3"):
        cls().fit(X_RAND, [0, 1, 0])
    one_class = cls().fit(X_RAND, np.zeros(60, dtype=int))
    with pytest.raises(EmptyTrainingSetError, match="class 1"):
        one_class.log_odds(X_RAND)


@pytest.mark.parametrize("cls", MODELS)
def test_contributions_add_up_to_the_log_odds(cls):
    model = cls(alpha=0.5).fit(X_RAND, Y_RAND)
    C, baseline = model.log_odds_contributions(X_RAND)
    np.testing.assert_allclose(baseline + np.asarray(C.sum(axis=1)).ravel(), model.log_odds(X_RAND),
                               atol=1e-9)


@pytest.mark.parametrize("cls", MODELS)
def test_selected_log_odds_keeps_the_strongest_tokens(cls):
    model = cls(alpha=0.5).fit(X_RAND, Y_RAND)
    # k at least the number of tokens in any document: plain naive Bayes
    np.testing.assert_allclose(model.selected_log_odds(X_RAND, 40), model.log_odds(X_RAND), atol=1e-9)
    np.testing.assert_array_equal(model.selected_log_odds(X_RAND, 0), model.log_odds(X_RAND))
    C, baseline = model.log_odds_contributions(X_RAND[:1])
    strongest = sorted(C.data, key=abs, reverse=True)[:3]
    assert model.selected_log_odds(X_RAND[:1], 3)[0] == pytest.approx(baseline + sum(strongest))


@pytest.mark.parametrize("n_indices", [0, 3, 40, 5_000])
def test_distinct_columns_is_np_unique_on_either_path(n_indices):
    from textnb.models.naive_bayes import _distinct_columns

    # 0 and 3 indices in 4,000 columns take np.unique; 40 and 5,000 the bool marks.
    indices = np.random.default_rng(n_indices).integers(0, 4_000, size=n_indices)
    assert np.array_equal(_distinct_columns(indices, 4_000), np.unique(indices))
