"""The route and the text apart (model.header_discriminators): each side's strongest header
clues count beside the text's; the score is still the sum of the clues `explain` lists, the
same after save and load, and a model saved before the setting existed scores as it did."""

import json
import zipfile

import numpy as np
import pytest
from typer.testing import CliRunner

from textnb.cli import app
from textnb.config import load_config
from textnb.errors import ConfigError
from textnb.mail.sources import iter_index
from textnb.modelfile import store
from textnb.spamfilter import SpamFilter
from textnb.text.namespaces import is_header_token

from conftest import EVERY_MESSAGE, SAMPLE

runner = CliRunner()


@pytest.fixture(scope="module")
def default_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("route") / "model.tnb"
    result = runner.invoke(app, ["train", "--model", str(path), "--index", str(SAMPLE / "index"),
                                 *EVERY_MESSAGE])
    assert result.exit_code == 0, result.output
    return path


def test_the_default_keeps_header_places_apart_from_the_text():
    m = load_config(None, {}).model
    assert m.header_discriminators == 4 and m.max_discriminators == 16


def test_explains_clues_add_up_and_each_source_keeps_its_own_places(default_model):
    result = runner.invoke(app, ["explain", "--model", str(default_model), "--json", "-k",
                                 "100", str(SAMPLE / "unlabelled")])
    assert result.exit_code == 0, result.output
    rows = list(map(json.loads, result.output.splitlines()))
    assert rows
    some_route = False
    for row in rows:
        shown = sum(c["log_odds"] for c in row["clues"])
        assert row["other_tokens_log_odds"] == pytest.approx(0, abs=1e-12)
        total = row["prior_log_odds"] + row["absence_log_odds"] + shown
        assert total == pytest.approx(row["log_odds"], abs=1e-9)
        for spam_side in (True, False):
            side = [c for c in row["clues"] if (c["log_odds"] > 0) == spam_side]
            route = [c for c in side if is_header_token(c["token"])]
            assert len(route) <= 4 and len(side) - len(route) <= 8
            some_route |= bool(route)
    assert some_route  # the sample mail has headers: the route is part of the score


def test_more_clues_count_than_with_one_budget(default_model):
    """Beside the text's 16 places, the header clues take their own: a message with both
    kinds of evidence is scored on more clues than one shared budget allows."""
    messages = list(iter_index(SAMPLE / "index"))
    apart = store.load(default_model)
    shared = SpamFilter(load_config(None, {"model.header_discriminators": 0})).fit(messages)
    used_apart = [apart.explain(m, k=100).tokens_used for m in messages[:20]]
    used_shared = [shared.explain(m, k=100).tokens_used for m in messages[:20]]
    assert max(used_shared) <= 16 < max(used_apart) <= 16 + 8
    raws = [m.raw for m in messages]
    assert not np.array_equal(apart.log_odds(raws), shared.log_odds(raws))


def test_save_then_load_scores_identically(default_model, tmp_path):
    loaded = store.load(default_model)
    assert loaded.config.model.header_discriminators == 4
    raws = [m.raw for m in iter_index(SAMPLE / "index")]
    again = tmp_path / "again.tnb"
    store.save(loaded, again)
    np.testing.assert_array_equal(store.load(again).log_odds(raws), loaded.log_odds(raws))


def test_a_model_saved_before_the_setting_existed_scores_with_one_budget(default_model, tmp_path):
    path = tmp_path / "old.tnb"
    with zipfile.ZipFile(default_model) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    meta = json.loads(members["textnb-model.json"])
    del meta["config"]["model"]["header_discriminators"]
    members["textnb-model.json"] = json.dumps(meta).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    old = store.load(path)
    assert old.config.model.header_discriminators == 0
    raws = [m.raw for m in iter_index(SAMPLE / "index")]
    shared = SpamFilter(load_config(None, {"model.header_discriminators": 0}))
    shared.fit(iter_index(SAMPLE / "index"))
    np.testing.assert_allclose(old.log_odds(raws), shared.log_odds(raws), rtol=0, atol=1e-9)


def test_a_bad_value_is_refused_naming_it():
    with pytest.raises(ConfigError, match="header_discriminators.*-1"):
        load_config(None, {"model.header_discriminators": -1})


def test_info_says_how_the_clues_are_chosen(default_model):
    result = runner.invoke(app, ["info", "--model", str(default_model)])
    assert result.exit_code == 0, result.output
    assert "apart from them, each side's 4 strongest clues from the other header fields" \
        in " ".join(result.output.split())
