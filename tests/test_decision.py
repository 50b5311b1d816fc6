"""Decision layer: the Bayes-optimal rule under asymmetric costs."""

import math

import numpy as np
import pytest
from scipy.special import expit

from textnb.decision.costs import CostModel, bayes_decision, cost_matrix

# A hand-computed 3-class case: loss[y, y'] = loss of predicting y when the truth is y'.
LOSS3 = np.array([[0, 1, 4], [2, 0, 1], [6, 3, 0]], dtype=float)


@pytest.mark.parametrize("proba,expected_losses,best", [
    ([0.2, 0.5, 0.3], [1.7, 0.7, 2.7], 1),
    ([0.6, 0.1, 0.3], [1.3, 1.5, 3.9], 0),
    ([0.05, 0.15, 0.8], [3.35, 0.9, 0.75], 2),
])
def test_three_class_loss_matrix_hand_computed(proba, expected_losses, best):
    np.testing.assert_allclose(LOSS3 @ np.array(proba), expected_losses)
    assert bayes_decision(np.array([proba]), LOSS3)[0] == best


@pytest.mark.parametrize("ratio", [1.0, 9.0, 999.0, 0.5])
def test_two_class_matrix_rule_equals_log_odds_threshold(ratio):
    log_odds = np.linspace(-12, 12, 481)
    p_spam = expit(log_odds)
    proba = np.column_stack([1 - p_spam, p_spam])
    by_matrix = bayes_decision(proba, cost_matrix(ratio))
    by_threshold = CostModel(cost_ratio=ratio).labels(log_odds) == "spam"
    # Exactly at the threshold both rules may go either way (a tie); compare elsewhere.
    away = np.abs(log_odds - math.log(ratio)) > 1e-9
    np.testing.assert_array_equal(by_matrix[away] == 1, by_threshold[away])


def test_threshold_is_ln_cost_ratio_unless_learned():
    assert CostModel(cost_ratio=9).log_threshold == pytest.approx(math.log(9))
    assert CostModel(cost_ratio=9, threshold=3.5).log_threshold == 3.5


def test_unsure_band():
    costs = CostModel(cost_ratio=1, unsure_band=2.0)
    assert list(costs.labels([-5, -1.5, 0.5, 1.99, 2.0, 7])) == \
        ["ham", "unsure", "unsure", "unsure", "spam", "spam"]


def test_decide_reports_everything():
    d = CostModel(cost_ratio=math.e).decide(3.0)
    assert (d.label, d.threshold) == ("spam", pytest.approx(1.0))
    assert d.p_spam == pytest.approx(1 / (1 + math.exp(-3)))


@pytest.mark.parametrize("kwargs,message", [
    ({"cost_ratio": 0}, "cost_ratio=0 must be > 0"),
    ({"cost_ratio": -3}, "cost_ratio=-3"),
    ({"unsure_band": -1}, "unsure_band=-1"),
])
def test_bad_costs_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CostModel(**kwargs)


def test_bad_loss_matrix():
    with pytest.raises(ValueError, match="shape"):
        bayes_decision(np.array([[0.5, 0.5]]), LOSS3)
    with pytest.raises(ValueError, match="zero diagonal"):
        bayes_decision(np.array([[0.5, 0.5]]), np.ones((2, 2)))


@pytest.mark.parametrize("costs", [CostModel(), CostModel(cost_ratio=9.0),
                                   CostModel(threshold=-1.5, unsure_band=2.0)])
def test_decide_many_is_decide_of_each(costs):
    log_odds = np.array([-800.0, -3.0, -1.5, 0.0, math.log(9.0), 0.5, 2.2, 800.0, -np.inf, np.inf])
    p = np.linspace(0, 1, log_odds.size)
    assert costs.decide_many(log_odds, p) == [costs.decide(x, q) for x, q in zip(log_odds, p)]
    assert costs.decide_many(log_odds) == [costs.decide(x) for x in log_odds]
    assert costs.decide_many(np.zeros(0)) == []
    with pytest.raises(ValueError, match="3 probabilities for 10 log-odds"):
        costs.decide_many(log_odds, p[:3])
