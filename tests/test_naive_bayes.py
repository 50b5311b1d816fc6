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


# -- the route's own pseudo-count (route_alpha) -------------------------------------------
# Three columns: a word, a route token (received:...) and another word; two spam, one ham.
ROUTE_X = sp.csr_matrix(np.array([[2, 1, 0], [1, 0, 0], [0, 1, 1]], dtype=float))
ROUTE_Y = np.array([1, 1, 0])
ROUTE = np.array([False, True, False])
ROUTE_RAND = np.arange(40) % 3 == 1  # a third of X_RAND's columns are the route's


def _route_model(cls, X=ROUTE_X, y=ROUTE_Y, route=ROUTE, alpha=0.5, route_alpha=0.25):
    model = cls(alpha=alpha, route_alpha=route_alpha).fit(X, y)
    model.set_route_columns(route, 0)
    return model


def test_multinomial_route_alpha_by_hand():
    # θ_cj = (N_cj + α_j) / (N_c + Σ α_j), Σ α_j = 0.5 + 0.25 + 0.5 = 1.25:
    # spam N = (3, 1, 0), N_c = 4; ham N = (0, 1, 1), N_c = 2.
    model = _route_model(MultinomialNB)
    np.testing.assert_allclose(np.exp(model.feature_log_prob_),
                               [[0.5 / 3.25, 1.25 / 3.25, 1.5 / 3.25],
                                [3.5 / 5.25, 1.25 / 5.25, 0.5 / 5.25]], rtol=1e-15)


def test_bernoulli_route_alpha_by_hand():
    # p_cj = (D_cj + α_j) / (D_c + 2 α_j): spam D = (2, 1, 0) of 2, ham D = (0, 1, 1) of 1.
    model = _route_model(BernoulliNB)
    np.testing.assert_allclose(np.exp(model.feature_log_prob_),
                               [[0.5 / 2, 1.25 / 1.5, 1.5 / 2],
                                [2.5 / 3, 1.25 / 2.5, 0.5 / 3]], rtol=1e-15)
    np.testing.assert_allclose(np.exp(model.neg_log_prob_),
                               [[1.5 / 2, 0.25 / 1.5, 0.5 / 2],
                                [0.5 / 3, 1.25 / 2.5, 2.5 / 3]], rtol=1e-15)


def test_multinomial_route_alpha_equals_scikit_learn_per_column_alpha():
    naive_bayes = pytest.importorskip("sklearn.naive_bayes")
    alpha = np.where(ROUTE_RAND, 0.03, 0.1)
    theirs = naive_bayes.MultinomialNB(alpha=alpha, force_alpha=True).fit(X_RAND, Y_RAND)
    ours = _route_model(MultinomialNB, X_RAND, Y_RAND, ROUTE_RAND, 0.1, 0.03)
    X_test = sp.csr_matrix(rng.poisson(0.5, size=(25, 40)).astype(float))
    np.testing.assert_allclose(ours.feature_log_prob_, theirs.feature_log_prob_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours.predict_log_proba(X_test), theirs.predict_log_proba(X_test),
                               rtol=0, atol=1e-9)


def test_bernoulli_route_alpha_equals_scikit_learn_column_by_column():
    # scikit-learn's BernoulliNB takes no alpha per column (1.9 fails to broadcast it
    # against the class counts), but its p_cj reads only column j's alpha: the columns
    # of a fit with each alpha, put together, are the per-column prior's.
    naive_bayes = pytest.importorskip("sklearn.naive_bayes")
    text, route = (naive_bayes.BernoulliNB(alpha=a).fit(X_RAND, Y_RAND) for a in (0.1, 0.03))
    flp = np.where(ROUTE_RAND, route.feature_log_prob_, text.feature_log_prob_)
    ours = _route_model(BernoulliNB, X_RAND, Y_RAND, ROUTE_RAND, 0.1, 0.03)
    np.testing.assert_allclose(ours.feature_log_prob_, flp, rtol=0, atol=1e-12)
    X_test = (rng.poisson(0.5, size=(25, 40)) > 0).astype(float)
    jll = X_test @ flp.T + (1 - X_test) @ np.log1p(-np.exp(flp)).T + text.class_log_prior_
    np.testing.assert_allclose(ours.joint_log_likelihood(sp.csr_matrix(X_test)), jll, atol=1e-9)


@pytest.mark.parametrize("route_alpha", [None, 0.5])
@pytest.mark.parametrize("cls", MODELS)
def test_route_alpha_unset_or_alpha_scores_bit_for_bit_as_before(cls, route_alpha):
    plain = cls(alpha=0.5).fit(X_RAND, Y_RAND)
    same = cls(alpha=0.5, route_alpha=route_alpha).fit(X_RAND, Y_RAND)  # no flags needed
    np.testing.assert_array_equal(same.log_odds(X_RAND), plain.log_odds(X_RAND))
    np.testing.assert_array_equal(same.feature_log_prob_, plain.feature_log_prob_)


@pytest.mark.parametrize("cls", MODELS)
def test_route_alpha_learned_in_pieces_equals_one_fit(cls):
    # Pieces that widen the vocabulary, each's new columns marked as they come, then a
    # column pruned: the same scores as one fit on the pieces stacked.
    pieces = [(X_RAND[:20, :15], Y_RAND[:20]), (X_RAND[20:45, :31], Y_RAND[20:45]),
              (X_RAND[45:], Y_RAND[45:])]
    stacked = sp.vstack([sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], 40))
                         for X, _ in pieces])
    batch = _route_model(cls, stacked, Y_RAND, ROUTE_RAND, 0.1, 0.03)
    learned = cls(alpha=0.1, route_alpha=0.03)
    for X, y in pieces:
        start = learned.route_columns_known if hasattr(learned, "class_count_") else 0
        learned.partial_fit(X, y)
        learned.set_route_columns(ROUTE_RAND[start:X.shape[1]], start)
    np.testing.assert_array_equal(learned.feature_count_, batch.feature_count_)
    np.testing.assert_array_equal(learned.log_odds(X_RAND), batch.log_odds(X_RAND))
    mask = np.arange(40) != 4  # column 4 is the route's
    batch.set_feature_mask(mask)
    learned.set_feature_mask(mask[4:5], np.array([4]))
    np.testing.assert_array_equal(learned.log_odds(X_RAND), batch.log_odds(X_RAND))


@pytest.mark.parametrize("cls", MODELS)
def test_route_alpha_refuses_to_score_unmarked_columns(cls):
    model = _route_model(cls, X_RAND[:, :30], Y_RAND, ROUTE_RAND[:30], 0.1, 0.03)
    model.partial_fit(X_RAND, Y_RAND)  # ten new columns, not marked
    with pytest.raises(ValueError, match="route_alpha=0.03 needs every column marked"):
        model.log_odds(X_RAND)


@pytest.mark.parametrize("cls", MODELS)
def test_route_alpha_contributions_add_up_to_the_log_odds(cls):
    model = _route_model(cls, X_RAND, Y_RAND, ROUTE_RAND, 0.1, 0.03)
    C, baseline = model.log_odds_contributions(X_RAND)
    np.testing.assert_allclose(baseline + np.asarray(C.sum(axis=1)).ravel(), model.log_odds(X_RAND),
                               atol=1e-9)
