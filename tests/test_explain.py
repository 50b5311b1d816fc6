"""textnb explain: a readable account of a verdict whose parts add up to the score."""

import json

import pytest
from typer.testing import CliRunner

from textnb.cli import app

from conftest import SAMPLE

runner = CliRunner()
UNLABELLED = sorted((SAMPLE / "unlabelled").iterdir())


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    path = tmp_path_factory.mktemp("explain") / "model.tnb"
    result = runner.invoke(app, ["train", "--model", str(path), "--index", str(SAMPLE / "index")])
    assert result.exit_code == 0, result.output
    return path


@pytest.mark.parametrize("route_alpha", [None, 0.03])
@pytest.mark.parametrize("combine", ["sum", "chi-square"])
@pytest.mark.parametrize("event_model", ["multinomial", "bernoulli"])
def test_json_parts_add_up_to_the_log_odds(tmp_path, event_model, combine, route_alpha):
    path = tmp_path / "m.tnb"
    route = ["--set", f"model.route_alpha={route_alpha}"] if route_alpha else []
    assert runner.invoke(app, ["train", "--model", str(path), "--index", str(SAMPLE / "index"),
                               "--event-model", event_model,
                               "--set", f"model.combine={combine}", *route]).exit_code == 0
    result = runner.invoke(app, ["explain", "--model", str(path), "--json", "-k", "4",
                                 str(SAMPLE / "unlabelled")])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert len(rows) == len(UNLABELLED)
    for row in rows:
        shown = sum(c["log_odds"] for c in row["clues"])
        total = (row["prior_log_odds"] + row["absence_log_odds"] + shown
                 + row["other_tokens_log_odds"] + row["combining_log_odds"])
        assert (row["combining_log_odds"] == 0) == (combine == "sum")
        assert total == pytest.approx(row["log_odds"], abs=1e-9)
        sides = (row["prior_log_odds"] + row["absence_log_odds"] + row["spam_clues_log_odds"]
                 + row["ham_clues_log_odds"] + row["combining_log_odds"])
        assert sides == pytest.approx(row["log_odds"], abs=1e-9)
        assert row["spam_clues_log_odds"] >= 0 >= row["ham_clues_log_odds"]
        assert len(row["clues"]) == min(4, row["tokens_used"])
        assert 0 <= row["prior_share"] <= 1
        for clue in row["clues"]:
            assert clue["llr"] * clue["count"] == pytest.approx(clue["log_odds"])
        magnitudes = [abs(c["log_odds"]) for c in row["clues"]]
        assert magnitudes == sorted(magnitudes, reverse=True)
        assert (row["log_odds"] > row["threshold"]) == (row["label"] == "spam")


def test_readable_output_says_why(trained):
    result = runner.invoke(app, ["explain", "--model", str(trained), "-k", "5", str(UNLABELLED[0])])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    verdict = lines[0].split(": ")[1]
    assert verdict in ("SPAM", "HAM", "UNSURE") and "the threshold +0.00" in lines[0]
    assert "prior log-odds" in lines[1] and "% of the evidence" in lines[1]
    assert "LLR" in lines[2] and "in spam" in lines[2]
    assert len(lines) == 3 + 5


def test_a_cost_ratio_moves_the_threshold(trained):
    result = runner.invoke(app, ["explain", "--model", str(trained), "--cost-ratio", "1e300",
                                 str(UNLABELLED[0])])
    assert "HAM: log-odds" in result.output and "threshold +690.78" in result.output
