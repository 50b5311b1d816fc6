"""textnb.commands is the Python API of every batch command: each CLI module calls one
function there, and the functions give what the commands print, without a terminal."""

import ast
from pathlib import Path

import numpy as np
import pytest

from textnb import commands
from textnb.config import FilterConfig
from textnb.mail.sources import iter_index
from textnb.modelfile import store

from conftest import PROJECT, SAMPLE, SAMPLE_INDEX, every_message

CLI = PROJECT / "textnb" / "cli"
# The one command not through textnb.commands: filter, the delivery step, must import no
# NumPy on its --server path (start-up time: docs/design/startup.md), and textnb.commands
# imports NumPy; its Python API is SpamFilter.classify and textnb.delivery.client.
NOT_THROUGH_COMMANDS = {"filter.py"}


def _scores(path: Path) -> np.ndarray:
    raws = [m.raw for m in iter_index(SAMPLE_INDEX)]
    return store.load(path).log_odds(raws)


@pytest.fixture
def trained(tmp_path) -> Path:
    path = tmp_path / "model.tnb"
    commands.train(path, FilterConfig(), index=[str(SAMPLE_INDEX)], jobs=1)
    return path


def _imported_from_commands(module: Path) -> set[str]:
    """The names of textnb.commands a CLI module uses (``from ..commands import x`` or
    ``from .. import commands`` then ``commands.x``)."""
    tree = ast.parse(module.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "commands" and node.level == 2:
            names.update(alias.name for alias in node.names)
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id == "commands"):
            names.add(node.attr)
    return names


def test_every_batch_cli_module_calls_a_function_of_commands():
    for module in sorted(CLI.glob("*.py")):
        source = module.read_text()
        if "@app.command" not in source or module.name in NOT_THROUGH_COMMANDS:
            continue
        names = _imported_from_commands(module)
        assert names, f"{module.name} does not call textnb.commands"
        assert all(callable(getattr(commands, name)) for name in names), module.name


def test_export_and_import_round_trip_in_both_formats(trained, tmp_path):
    for fmt in commands.EXPORT_FORMATS:
        document = tmp_path / f"model.{fmt}"
        summary = commands.export(trained, document, fmt)
        assert document.stat().st_size == summary["size_bytes"]
        back = tmp_path / f"back-{fmt}.tnb"
        commands.import_model(document, back, fmt)
        np.testing.assert_allclose(_scores(back), _scores(trained), rtol=1e-12, atol=1e-12)


def test_bad_formats_and_options_are_named(trained, tmp_path):
    with pytest.raises(ValueError, match="'xml' is not one textnb writes; use pmml or text"):
        commands.export(trained, tmp_path / "x", "xml")
    with pytest.raises(ValueError, match="max_features prunes PMML documents only"):
        commands.export(trained, tmp_path / "x", "text", max_features=10)
    with pytest.raises(ValueError, match="'yaml' is not one textnb writes"):
        commands.import_model(tmp_path / "x", tmp_path / "y.tnb", "yaml")
    with pytest.raises(ValueError, match="two or more models to merge, got 1"):
        commands.merge([trained], tmp_path / "merged.tnb")


def test_the_cli_formats_are_the_commands(trained):
    from textnb.cli.export import FORMATS

    assert FORMATS == commands.EXPORT_FORMATS


def test_forget_then_compact(trained):
    before = store.load(trained).n_learned
    result = commands.forget(trained, [str(SAMPLE / "spam" / "001.eml")])
    assert result["forgotten"] == {"spam": 1, "ham": 0} and result["not_found"] == 0
    after = store.load(trained).n_learned
    assert after["spam"] == before["spam"] - 1 and after["ham"] == before["ham"]
    folded = commands.compact(trained)
    assert folded["journal_records"] == 1 and folded["pruned"] is False
    assert store.load(trained).n_learned == after


def test_merge_of_two_halves_scores_as_one_model_of_all(tmp_path):
    messages = list(iter_index(SAMPLE_INDEX))
    halves = []
    for i, part in enumerate((messages[::2], messages[1::2])):
        index = tmp_path / f"half{i}.index"
        index.write_text("".join(f"{m.label} {m.source}\n" for m in part))
        halves.append(tmp_path / f"half{i}.tnb")
        commands.train(halves[-1], every_message(), index=[str(index)], jobs=1)
    whole = tmp_path / "whole.tnb"
    commands.train(whole, every_message(), index=[str(SAMPLE_INDEX)], jobs=1)
    merged = tmp_path / "merged.tnb"
    commands.merge(halves, merged)
    np.testing.assert_allclose(_scores(merged), _scores(whole), rtol=1e-9, atol=1e-9)


def test_pmml_score_of_an_export(tmp_path):
    from textnb.config import load_config

    # A Bernoulli model exports as a NaiveBayesModel (multinomial: a RegressionModel).
    bernoulli = tmp_path / "bernoulli.tnb"
    commands.train(bernoulli, load_config(None, {"model.event_model": "bernoulli"}),
                   index=[str(SAMPLE_INDEX)], jobs=1)
    document = tmp_path / "model.pmml"
    commands.export(bernoulli, document, "pmml")
    data = tmp_path / "records.csv"
    data.write_text("no such field\n1\n")
    result = commands.pmml_score(document, data)
    assert len(result["predicted"]) == 1 and result["ignored_columns"] == ["no such field"]
    assert result["probabilities"][0].sum() == pytest.approx(1.0)


def test_serve_runs_from_python_until_its_stop_event(trained, tmp_path):
    import threading
    import time

    from textnb.delivery.client import ping, score_remote

    address, stop, said = str(tmp_path / "scorer.sock"), threading.Event(), []
    thread = threading.Thread(target=commands.serve, args=(trained, address),
                              kwargs={"stop": stop, "say": said.append}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not any("SIGTERM stops" in line for line in said):
        assert thread.is_alive() and time.monotonic() < deadline, said
        time.sleep(0.05)
    assert ping(address)
    raw = next(iter_index(SAMPLE_INDEX)).raw
    verdict = score_remote(address, raw)
    assert verdict.log_odds == pytest.approx(store.load(trained).log_odds([raw])[0], abs=1e-4)
    stop.set()
    thread.join(30)
    assert not thread.is_alive()
    assert not (tmp_path / "scorer.sock").exists()


def test_daemon_commands_refuse_a_bad_setup_before_loading_a_model(tmp_path):
    from textnb.errors import TextnbError

    with pytest.raises(TextnbError, match="--user-from-peer goes with --models"):
        commands.serve(tmp_path / "missing.tnb", str(tmp_path / "s.sock"), user_from_peer=True)
    with pytest.raises(TextnbError, match="not local or address"):
        commands.milter("unix:" + str(tmp_path / "m.sock"), tmp_path / "missing.tnb",
                        recipient_user="domain")
    with pytest.raises(TextnbError, match="does not exist"):
        commands.web(tmp_path / "missing.db", tmp_path / "users.json", str(tmp_path / "s.sock"))
