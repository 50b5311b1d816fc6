"""The command line, through typer's runner, on the sample corpus."""

import json

import pytest
from typer.testing import CliRunner

from textnb._c import speedups
from textnb.cli import app

from conftest import EVERY_MESSAGE, SAMPLE

runner = CliRunner()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "model.tnb"
    result = runner.invoke(app, ["train", "--model", str(path), "--index", str(SAMPLE / "index"),
                                 *EVERY_MESSAGE])
    assert result.exit_code == 0, result.output
    assert "trained 40 spam and 60 ham" in result.output
    return path


def test_classify_json_lines(trained):
    result = runner.invoke(app, ["classify", "--model", str(trained), "--json",
                                 str(SAMPLE / "unlabelled")])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]  # stderr: training health
    assert len(rows) == 6
    assert set(rows[0]) >= {"source", "label", "log_odds", "p_spam", "threshold"}
    assert {r["label"] for r in rows} <= {"spam", "ham", "unsure"}
    assert all(0.0 <= r["p_spam"] <= 1.0 for r in rows)


def test_classify_mbox_and_stdin(trained):
    mbox = runner.invoke(app, ["classify", "--model", str(trained), str(SAMPLE / "mbox")])
    assert mbox.exit_code == 0 and len(mbox.stdout.splitlines()) == 6
    assert "fewer than 200" in mbox.stderr  # the sample model is small, and says so
    one = (SAMPLE / "unlabelled" / "001.eml").read_bytes()
    stdin = runner.invoke(app, ["classify", "--model", str(trained), "-"], input=one)
    assert stdin.exit_code == 0, stdin.output
    assert stdin.stdout.split()[0] in ("spam", "ham")


def test_cost_ratio_option(trained):
    result = runner.invoke(app, ["classify", "--model", str(trained), "--json", "--cost-ratio",
                                 "999", str(SAMPLE / "unlabelled" / "001.eml")])
    row = json.loads(result.stdout)
    assert row["threshold"] == pytest.approx(6.9067547786)


def test_info(trained):
    result = runner.invoke(app, ["info", "--model", str(trained), "--json"])
    assert result.exit_code == 0
    summary = json.loads(result.output)
    assert summary["messages"] == {"ham": 60, "spam": 40}
    text = runner.invoke(app, ["info", "--model", str(trained)])
    assert "40 spam, 60 ham" in text.output
    assert "alpha=0.1 (the route's tokens 0.03)" in text.output


def test_info_says_nothing_of_the_route_when_it_takes_alpha(sample_one_alpha_filter, tmp_path):
    from textnb.modelfile import store

    path = store.save(sample_one_alpha_filter, tmp_path / "one-alpha.tnb")
    text = runner.invoke(app, ["info", "--model", str(path)])
    assert text.exit_code == 0, text.output
    assert "alpha=0.1\n" in text.output and "route's tokens" not in text.output


def test_explain(trained):
    result = runner.invoke(app, ["explain", "--model", str(trained), "-k", "3",
                                 str(SAMPLE / "unlabelled" / "001.eml")])
    assert result.exit_code == 0, result.output
    assert "prior log-odds" in result.output and len(result.output.splitlines()) == 6


def test_train_options_and_settings(tmp_path):
    path = tmp_path / "b.tnb"
    result = runner.invoke(app, ["train", "--model", str(path), "--index", str(SAMPLE / "index"),
                                 "--event-model", "bernoulli", "--features", "tf", "--alpha",
                                 "0.5", "--set", "features.min_df=2", "--json"])
    assert result.exit_code == 0, result.output
    cfg = json.loads(result.output)["config"]
    assert cfg["model"] == {**cfg["model"], "event_model": "bernoulli", "alpha": 0.5}
    assert cfg["features"]["min_df"] == 2 and cfg["features"]["features"] == "tf"


@pytest.mark.parametrize("args,message", [
    (["train", "--index", "nope/index"], "nope/index"),
    (["train", "--spam", str(SAMPLE / "spam")], "no ham messages"),
    (["train", "--index", str(SAMPLE / "index"), "--alpha", "0"], "model.alpha=0"),
    (["train", "--index", str(SAMPLE / "index"), "--event-model", "gaussian"], "event_model"),
    (["train"], "no training messages"),
    (["classify", "--model", "/nonexistent/m.tnb", str(SAMPLE / "mbox")], "textnb train"),
])
def test_operator_errors_exit_nonzero_with_a_clear_message(args, message, tmp_path):
    if args[0] == "train":
        args = args + ["--model", str(tmp_path / "m.tnb")]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    assert message in result.output
    assert not (tmp_path / "m.tnb").exists()


def test_bad_cost_ratio(trained):
    result = runner.invoke(app, ["classify", "--model", str(trained), "--cost-ratio", "0",
                                 str(SAMPLE / "mbox")])
    assert result.exit_code == 2
    assert "must be > 0" in result.output


def test_failed_train_keeps_existing_model(trained):
    before = trained.read_bytes()
    result = runner.invoke(app, ["train", "--model", str(trained), "--spam", str(SAMPLE / "spam")])
    assert result.exit_code == 1
    assert trained.read_bytes() == before


def test_every_command_has_help_and_is_in_the_readme():
    readme = (SAMPLE.parents[1] / "README.md").read_text()
    for command in app.registered_commands:
        name = command.name
        result = runner.invoke(app, [name, "--help"])
        assert result.exit_code == 0 and len(result.output) > 100
        assert f"textnb {name}" in readme, f"README does not document 'textnb {name}'"


def _help(args: list[str]) -> str:
    """A command's --help on a terminal wide enough that no line wraps."""
    result = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("name", [None, *(c.name for c in app.registered_commands)])
def test_help_shows_no_type_beside_a_flag(name):
    text = _help([name] if name else [])
    assert "<bool>" not in text
    line = next(line for line in text.splitlines() if " --help " in line)
    assert " ".join(line.strip("│ ").split()) == "--help Show this message and exit."


@pytest.mark.parametrize("command", app.registered_commands, ids=lambda c: c.name)
def test_each_help_paragraph_prints_as_one_line(command):
    import inspect

    text = _help([command.name])
    for paragraph in inspect.getdoc(command.callback).split("\n\n"):
        assert " ".join(paragraph.split()) in text


@pytest.mark.parametrize("command", app.registered_commands, ids=lambda c: c.name)
def test_help_names_only_options_the_command_has(command):
    text = _help([command.name])
    for option in ("--engine", "--scheduler", "--jobs"):
        mentioned = option in text.replace(f"{option} <", "")  # its own row aside
        has = f" {option} " in text
        assert not mentioned or has, f"textnb {command.name} --help names {option}"


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.startswith("textnb ")
    assert f"(per-token loops in {speedups.implementation()})" in result.output


def test_evaluate_on_the_training_index(trained):
    result = runner.invoke(app, ["evaluate", "--model", str(trained), "--json", "--index",
                                 str(SAMPLE / "index")])
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)
    assert metrics["n_messages"] == 100 and metrics["n_spam"] == 40
    assert metrics["tp"] + metrics["fn"] == 40 and metrics["tn"] + metrics["fp"] == 60
    assert 0 <= metrics["one_minus_auc_pct"] <= 100
    text = runner.invoke(app, ["evaluate", "--model", str(trained), "--index", str(SAMPLE / "index")])
    assert "(1-AUC)%" in text.output and "called spam" in text.output


def test_evaluate_warns_when_the_model_learned_the_mail(trained, tmp_path):
    """The ledger knows every message trained on: their figures are optimistic."""
    for label in ("spam", "ham"):  # one new message of each class: a header line added
        raw = (SAMPLE / label / "001.eml").read_bytes()
        (tmp_path / f"{label}.eml").write_bytes(b"X-Seen-By: a newcomer\n" + raw)
    index = tmp_path / "index"
    index.write_text(f"spam {SAMPLE}/spam/002.eml\nham {SAMPLE}/ham/002.eml\n"
                     "spam spam.eml\nham ham.eml\n")
    result = runner.invoke(app, ["evaluate", "--model", str(trained), "--index", str(index)])
    assert result.exit_code == 0, result.output
    assert ("warning: 2 of 4 messages were trained on (the model's ledger holds them): these "
            "figures are optimistic") in result.stderr
    fresh = tmp_path / "fresh-index"
    fresh.write_text("spam spam.eml\nham ham.eml\n")
    result = runner.invoke(app, ["evaluate", "--model", str(trained), "--index", str(fresh)])
    assert result.exit_code == 0 and "trained on" not in result.stderr


@pytest.mark.parametrize("given, expected", [(None, "1"), ("3", "3")])
def test_the_command_line_runs_numpy_with_one_blas_thread_unless_told(given, expected):
    """OpenBLAS's threads spin at NumPy's import and serve no textnb computation
    (textnb/cli/__init__.py): the CLI limits them, and keeps a limit the user set."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    probe = ("import os, textnb.cli, numpy; print(os.environ['OPENBLAS_NUM_THREADS'], "
             "len(os.listdir('/proc/self/task')) if os.path.isdir('/proc/self/task') else 1)")
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out[0] == expected
    if given is None:
        assert out[1] == "1"  # no BLAS thread was started


def test_json_output_stays_json_when_a_tuned_model_flags_nothing_or_everything(
        tmp_path, sample_filter):
    """An infinite threshold (the map never reaches λ / (1 + λ), or starts above it) is
    written as null: Python's json would write Infinity, which no JSON reader takes."""
    import copy

    from textnb.decision import calibration
    from textnb.modelfile import store

    tuned = copy.deepcopy(sample_filter)
    tuned.calibration = calibration.fit([-3.0, -1.0, 2.0, 4.0], [0, 0, 1, 1])
    model = tmp_path / "tuned.tnb"
    store.save(tuned, model)
    message = str(sorted((SAMPLE / "unlabelled").iterdir())[0])

    def strict(text):
        return json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in {text}"))

    for ratio, label in (("999", "ham"), ("0.001", "spam")):
        for command in ("classify", "explain"):
            result = runner.invoke(app, [command, "--json", "-m", str(model), "-r", ratio,
                                         message])
            assert result.exit_code == 0, result.output
            row = strict(result.stdout.strip().splitlines()[0])
            assert (row["label"], row["threshold"]) == (label, None)
