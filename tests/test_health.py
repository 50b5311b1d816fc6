"""Training health (textnb.models.health): the limits,
and that info, classify and the scorer say them."""

import json
import threading

import pytest
from typer.testing import CliRunner

from textnb.cli import app
from textnb.models.health import MAX_IMBALANCE, MIN_PER_CLASS, training_health

from conftest import SAMPLE


@pytest.mark.parametrize("spam, ham, ok, says", [
    (MIN_PER_CLASS, MIN_PER_CLASS, True, []),
    (MIN_PER_CLASS - 1, 5000, False, ["only 199 spam", "out of balance"]),
    (5000, 600, True, []),  # 8.3 to 1: within the bound
    (6000, 600, False, ["out of balance (6000 spam, 600 ham: 10 to 1)", "more ham"]),
    (0, 0, False, ["only 0 spam", "only 0 ham"]),
    (0, 400, False, ["only 0 spam"]),  # one class absent: the count says it, not a ratio
])
def test_the_limits_name_the_counts_and_the_fix(spam, ham, ok, says):
    health = training_health({"spam": spam, "ham": ham})
    assert health.ok is ok and (health.problems == []) is ok
    text = " ".join(health.problems)
    for phrase in says:
        assert phrase in text
    assert health.to_dict()["min_per_class"] == MIN_PER_CLASS
    assert health.to_dict()["max_imbalance"] == MAX_IMBALANCE


def test_info_says_when_a_model_has_too_little_training(tmp_path, sample_model_file):
    runner = CliRunner()
    result = runner.invoke(app, ["info", "--model", str(sample_model_file)])
    assert result.exit_code == 0, result.output
    assert "training:    only 40 spam messages learned (fewer than 200)" in result.output
    assert "only 60 ham messages learned" in result.output
    as_json = json.loads(runner.invoke(app, ["info", "--json", "--model",
                                             str(sample_model_file)]).output)
    assert as_json["health"]["ok"] is False and len(as_json["health"]["problems"]) == 2


def test_classify_warns_on_stderr_and_keeps_stdout_for_the_verdicts(sample_model_file):
    runner = CliRunner()  # click 8.2+: result.stdout and result.stderr kept apart
    message = SAMPLE / "spam" / "001.eml"
    result = runner.invoke(app, ["classify", "--json", "--model", str(sample_model_file),
                                 str(message)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["label"] == "spam"  # stdout: the verdicts only
    assert "textnb: warning: only 40 spam messages learned (fewer than 200)" in result.stderr
    assert "only 60 ham messages learned" in result.stderr


def test_the_scorer_says_the_health_of_the_model_a_user_gets(tmp_path, sample_model_file):
    from textnb.delivery.client import ping
    from textnb.delivery.server import ResidentModel, ScorerServer

    server = ScorerServer(ResidentModel(sample_model_file), str(tmp_path / "s.sock")).bind()
    stop = threading.Event()
    thread = threading.Thread(target=server.serve_forever, args=(stop,))
    thread.start()
    try:
        status = ping(str(tmp_path / "s.sock"))
    finally:
        stop.set()
        thread.join(timeout=15)
    assert status["health"] == "low" and (status["spam"], status["ham"]) == ("40", "60")
