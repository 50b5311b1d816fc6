"""The third verdict: 'unsure' where a person's look costs less than either verdict
(Chow's reject rule, decision.review_cost), in the decision, the config, a tuned model,
`textnb tune --review-cost` and the delivery path's exit code."""

import json
import math

import numpy as np
import pytest
from scipy.special import expit, logit
from typer.testing import CliRunner

from textnb import commands
from textnb.cli import app
from textnb.config import FilterConfig, load_config
from textnb.decision import calibration as cal
from textnb.decision.costs import CostModel, review_log_odds, review_region
from textnb.errors import ConfigError
from textnb.evaluation.tune import review_point, tune
from textnb.mail.sources import iter_index
from textnb.modelfile import store

from conftest import SAMPLE_INDEX


def test_the_region_by_hand():
    # λ = 9, a look costs 0.1: spam costs 9·P(ham), ham P(spam), a look 0.1.
    assert review_region(9, 0.1) == pytest.approx((0.1, 1 - 0.1 / 9))
    assert review_region(1, 0.25) == (0.25, 0.75)
    assert review_region(1, 0.5) is None  # λ/(1+λ) = 0.5: never worth a look
    assert review_region(999, 0.0) is None


@pytest.mark.parametrize("ratio", [1.0, 9.0, 999.0])
@pytest.mark.parametrize("review_cost", [0.02, 0.1, 0.3])
def test_the_labels_are_the_least_expected_cost(ratio, review_cost):
    p = np.linspace(1e-4, 1 - 1e-6, 20001)
    costs = CostModel(cost_ratio=ratio,
                      unsure_between=review_log_odds(ratio, review_cost, None))
    labels = costs.labels(logit(p))
    expected = np.stack([p, ratio * (1 - p), np.full_like(p, review_cost)])  # ham, spam, look
    best = np.array(["ham", "spam", "unsure"], dtype=object)[np.argmin(expected, axis=0)]
    ordered = np.sort(expected, axis=0)
    clear = ordered[1] - ordered[0] > 1e-9  # ties may go either way
    np.testing.assert_array_equal(labels[clear], best[clear])


def test_a_band_that_misses_the_threshold_is_refused():
    with pytest.raises(ValueError, match="must hold the threshold"):
        CostModel(cost_ratio=1.0, unsure_between=(1.0, 2.0))


@pytest.mark.parametrize("value,message", [
    (-0.1, "decision.review_cost"), (math.inf, "decision.review_cost")])
def test_bad_review_costs_are_named(value, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, {"decision.review_cost": value})


def test_two_rules_for_unsure_are_refused():
    with pytest.raises(ConfigError, match="decision.unsure_band or decision.review_cost, not both"):
        load_config(None, {"decision.review_cost": 0.1, "decision.unsure_band": 1.0})


def test_review_point_by_hand():
    y = np.array([1, 1, 1, 0, 0, 0])
    scores = np.array([5.0, 1.0, -3.0, 2.0, -1.0, -4.0])
    r = review_point(y, scores, (-2.0, 3.0), 9.0, 0.1)
    # spam above 3: the first spam; ham at or below -2: a spam (FN) and a ham; 3 unsure.
    assert (r["fp"], r["fn"], r["unsure"], r["unsure_spam"]) == (0, 1, 3, 1)
    assert r["cost"] == pytest.approx(9 * 0 + 1 + 0.1 * 3)


@pytest.fixture(scope="module")
def tuned_with_a_look():
    return tune(FilterConfig(), iter_index(SAMPLE_INDEX), (1, 9), review_cost=0.1)


def test_tune_reports_the_three_way_rule(tuned_with_a_look):
    r = tuned_with_a_look
    for row in r.rows:
        lam, review = row["cost_ratio"], row["review"]
        between = review_log_odds(lam, 0.1, cal.log_odds_threshold(r.calibration, lam),
                                  lambda p: cal.log_odds_threshold(r.calibration, p / (1 - p)))
        assert (review["low"], review["high"]) == between
        assert review == {**review_point(r.y, r.log_odds, between, lam, 0.1),
                          "held_out_cost": review["held_out_cost"]}
        assert review["held_out_cost"] >= 0


def test_a_tuned_model_decides_by_its_calibrated_probability(tmp_path):
    path = tmp_path / "model.tnb"
    commands.train(path, FilterConfig(), index=[str(SAMPLE_INDEX)], jobs=1)
    commands.tune(path, [9], index=[str(SAMPLE_INDEX)], write=True, review_cost=0.1)
    spam_filter = store.load(path)
    assert spam_filter.config.decision.review_cost == 0.1
    low, high = spam_filter.cost_model().unsure_between
    x = np.linspace(-40, 40, 4001)
    p = cal.predict_proba(spam_filter.calibration, x)
    labels = spam_filter.cost_model().labels(x)
    # unsure iff 0.1 < P(spam) <= 1 - 0.1/9 (on the map's knots the two may differ by a tie)
    inside = (p > 0.1 + 1e-9) & (p < 1 - 0.1 / 9 - 1e-9)
    outside = (p < 0.1 - 1e-9) | (p > 1 - 0.1 / 9 + 1e-9)
    assert np.all(labels[inside] == "unsure") and not np.any(labels[outside] == "unsure")
    assert low <= spam_filter.cost_model().log_threshold <= high


def test_the_cli_prints_and_writes_the_review_cost(tmp_path):
    path = tmp_path / "model.tnb"
    commands.train(path, FilterConfig(), index=[str(SAMPLE_INDEX)], jobs=1)
    runner = CliRunner()
    out = runner.invoke(app, ["tune", "--model", str(path), "--index", str(SAMPLE_INDEX),
                              "-r", "9", "--review-cost", "0.05"])
    assert out.exit_code == 0, out.output
    assert "cost = λ·FP + FN + review cost × unsure" in out.output
    as_json = runner.invoke(app, ["tune", "--model", str(path), "--index", str(SAMPLE_INDEX),
                                  "-r", "9", "--review-cost", "0.05", "--json"])
    review = json.loads(as_json.output)["cost_ratios"][0]["review"]
    assert set(review) >= {"low", "high", "fp", "fn", "unsure", "cost", "held_out_cost"}
    bad = runner.invoke(app, ["tune", "--model", str(path), "--index", str(SAMPLE_INDEX),
                              "--review-cost", "-1"])
    assert bad.exit_code == 2


def test_an_unsure_message_exits_2_from_filter(tmp_path):
    messages = list(iter_index(SAMPLE_INDEX))
    plain = tmp_path / "plain.tnb"
    commands.train(plain, FilterConfig(), index=[str(SAMPLE_INDEX)], jobs=1)
    scores = store.load(plain).log_odds([m.raw for m in messages])
    nearest = int(np.argmin(np.abs(scores)))  # the sample's least sure message
    p = float(expit(scores[nearest]))
    # A look worth half of what the message's likelier verdict would cost at λ = 1:
    # the region (c, 1 - c) holds it.
    review_cost = min(p, 1 - p) / 2
    path = tmp_path / "model.tnb"
    commands.train(path, load_config(None, {"decision.review_cost": review_cost}),
                   index=[str(SAMPLE_INDEX)], jobs=1)
    low, high = store.load(path).cost_model().unsure_between
    assert (low, high) == pytest.approx((logit(review_cost), logit(1 - review_cost)))
    runner = CliRunner()
    out = runner.invoke(app, ["filter", "--model", str(path)], input=messages[nearest].raw)
    assert out.exit_code == 2 and b"X-TextNB-Status: unsure" in out.stdout_bytes
    other = int(np.argmax(np.abs(scores)))  # the surest: outside the region
    out = runner.invoke(app, ["filter", "--model", str(path)], input=messages[other].raw)
    assert out.exit_code in (0, 1)
