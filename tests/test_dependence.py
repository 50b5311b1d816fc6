"""Dependent evidence: one header field's clues grouped, a word pair tiled with its words;
the score still the sum of the clues `explain` lists, and the same after save and load."""

import json

import numpy as np
import pytest
import scipy.sparse as sp
from typer.testing import CliRunner

from textnb.cli import app
from textnb.config import load_config
from textnb.errors import ConfigError
from textnb.mail.sources import iter_index
from textnb.modelfile import store
from textnb.models.dependence import (NO_FIELD, Dependence, field_of, independent_entries,
                                      make_dependence)
from textnb.models.evidence import strongest
from textnb.spamfilter import SpamFilter

from conftest import SAMPLE

runner = CliRunner()

# One message's clues: ezmlm's Mailing-List line (three tokens of one field), a second
# field, a phrase with its word pairs, and a body word no pair holds.
TOKENS = ["header:mailing-list", "mailing-list:contact", "mailing-list:ezmlm",
          "received:ip:192.0.2", "take", "alook", "bi:take alook", "too", "bi:alook too",
          "offer"]
LLR = [-6.1, -6.0, -5.9, -1.0, 1.0, 3.0, 4.0, 0.5, 3.5, 2.0]


def _dependence(per_field, tile):
    index = {t: i for i, t in enumerate(TOKENS)}
    return make_dependence(TOKENS, lambda words: np.array([index.get(w, -1) for w in words]),
                           per_field, tile)


def test_a_header_fields_tokens_belong_to_that_field():
    assert field_of("header:mailing-list") == field_of("mailing-list:ezmlm") == "mailing-list"
    assert field_of("received:ip:192.0.2") == "received"
    assert field_of("header:control") == field_of("header-control:x") == "header-control"
    assert field_of("subject:free") is None and field_of("header:subject") is None
    assert field_of("bi:take alook") is None and field_of("url:example.com") is None


def test_worked_example_one_clue_per_field_and_tiling():
    C = sp.csr_matrix(np.array([LLR]))
    # One clue per field and side: the Mailing-List line's strongest (-6.1) stands for
    # it; Received is a field of its own. Body tokens are untouched.
    kept = independent_entries(C, _dependence(1, False))
    assert [t for t, k in zip(TOKENS, kept) if k] == [
        "header:mailing-list", "received:ip:192.0.2", "take", "alook", "bi:take alook", "too",
        "bi:alook too", "offer"]
    # Tiling, strongest first: "take alook" (4.0) covers take and alook; "alook too"
    # (3.5) shares alook and is dropped, and so are alook (3.0) and take (1.0); "too"
    # (0.5) overlaps only the dropped pair and stays.
    kept = independent_entries(C, _dependence(0, True))
    assert [t for t, k in zip(TOKENS, kept) if not k] == ["take", "alook", "bi:alook too"]
    # Both: the seven dependent ham clues of one field and the phrase's five clues
    # become one ham clue and two spam clues, so 8 + 8 places hold the rest.
    kept = independent_entries(C, _dependence(2, True))
    assert [t for t, k in zip(TOKENS, kept) if not k] == [
        "mailing-list:ezmlm", "take", "alook", "bi:alook too"]


def test_the_selection_ranks_what_is_left():
    C = sp.csr_matrix(np.array([LLR, [0, 0, 0, 0, 1.0, 3.0, 0, 0, 0, 2.0]]))
    C.eliminate_zeros()
    positions = strongest(C, 4, each_side=True, dependence=_dependence(1, True))
    # row 0: spam side "take alook" 4.0, "offer" 2.0; ham side -6.1, then Received's -1.0
    # (without grouping the Mailing-List line's -6.0 would take the second ham place)
    assert C.data[positions[:4]].tolist() == [-6.1, 4.0, 2.0, -1.0]
    # row 1: no pair in it, so its words are no one's dependants: alook, offer
    assert C.data[positions[4:]].tolist() == [3.0, 2.0]
    # without a k (plain naive Bayes) nothing is dropped
    assert strongest(C, 0, dependence=_dependence(1, True)).size == C.nnz


def test_columns_the_vocabulary_gained_later_are_independent():
    dep = _dependence(1, True)
    wider = sp.csr_matrix(np.array([LLR + [-7.0, 9.0]]))
    kept = independent_entries(wider, dep)
    assert kept[-2:].tolist() == [True, True]
    assert Dependence(np.array([NO_FIELD]), 1).n_columns == 1


def test_the_settings_are_checked():
    with pytest.raises(ConfigError, match="clues_per_header_field"):
        load_config(None, {"model.clues_per_header_field": -1})
    with pytest.raises(ConfigError, match="tile_word_pairs"):
        load_config(None, {"model.tile_word_pairs": "yes"})


SETTINGS = ["model.clues_per_header_field=1", "model.tile_word_pairs=true"]


@pytest.fixture(scope="module")
def dependent_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("dependence") / "model.tnb"
    args = ["train", "--model", str(path), "--index", str(SAMPLE / "index")]
    for setting in SETTINGS:
        args += ["--set", setting]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return path


def test_explains_clues_add_up_to_the_score(dependent_model):
    result = runner.invoke(app, ["explain", "--model", str(dependent_model), "--json", "-k",
                                 "100", str(SAMPLE / "unlabelled")])
    assert result.exit_code == 0, result.output
    for row in map(json.loads, result.output.splitlines()):
        shown = sum(c["log_odds"] for c in row["clues"])
        assert row["other_tokens_log_odds"] == pytest.approx(0, abs=1e-12)
        total = row["prior_log_odds"] + row["absence_log_odds"] + shown
        assert total == pytest.approx(row["log_odds"], abs=1e-9)
        fields = [field_of(c["token"]) for c in row["clues"]]
        # at most one clue per header field and side
        sides = [(f, c["log_odds"] > 0) for f, c in zip(fields, row["clues"]) if f]
        assert len(sides) == len(set(sides))
        pairs = [c["token"][3:].split(" ") for c in row["clues"] if c["token"].startswith("bi:")]
        words = {c["token"] for c in row["clues"]}
        assert not any(w in words for pair in pairs for w in pair)


def test_save_then_load_scores_identically(dependent_model, tmp_path):
    loaded = store.load(dependent_model)
    assert loaded.config.model.clues_per_header_field == 1 and loaded.config.model.tile_word_pairs
    raws = [m.raw for m in iter_index(SAMPLE / "index")]
    again = tmp_path / "again.tnb"
    store.save(loaded, again)
    np.testing.assert_array_equal(store.load(again).log_odds(raws), loaded.log_odds(raws))


def test_the_settings_change_the_scores_and_learning_grows_the_columns():
    messages = list(iter_index(SAMPLE / "index"))
    config = load_config(None, {"model.clues_per_header_field": 1, "model.tile_word_pairs": True})
    first, rest = messages[:60], messages[60:]
    grouped = SpamFilter(config).fit(first)
    plain = SpamFilter().fit(first)
    raws = [m.raw for m in rest]
    assert not np.array_equal(grouped.log_odds(raws), plain.log_odds(raws))
    n = grouped.dependence().n_columns
    grouped.learn_tokens([grouped.tokens(m.raw) for m in rest], [m.label for m in rest])
    grouped.log_odds(raws)
    assert grouped.dependence().n_columns == len(grouped.vocabulary) > n


@pytest.mark.parametrize("overrides", [
    {"model.clues_per_header_field": 1, "model.tile_word_pairs": True},
    {},  # the defaults: the route and the text apart (tests/test_route_and_text.py)
])
def test_tunes_search_scores_each_setting_with_the_dependent_clues_dropped(overrides):
    """`tune --search` ranks each fold's clues once; with dependent clues dropped (and the
    route's places apart from the text's), each setting's out-of-fold scores are still
    those it gets alone."""
    from textnb.evaluation.cross_validation import out_of_fold_log_odds
    from textnb.evaluation.tune import _search_scores, _settings, make_folds, tokenise

    base = load_config(None, overrides)
    spam_filter = SpamFilter(base)
    X, y = tokenise(spam_filter, list(iter_index(SAMPLE / "index")))
    settings = _settings(base, {"alpha": (0.1,), "max_discriminators": (0, 8, 16),
                                "max_pair_discriminators": (2, 6),
                                "evidence": ("strongest", "each-side"),
                                "model": (("multinomial", "binary"),)})
    folds = make_folds(y, 4)
    pairs, headers, dep = (spam_filter.pair_columns(), spam_filter.header_columns(),
                           spam_filter.dependence())
    for config, got in zip(settings, _search_scores(X, y, settings, folds, pairs, headers, dep)):
        want = out_of_fold_log_odds(X, y, config.model, config.features, folds, pairs, headers,
                                    dep)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)


def test_columns_classified_as_scoring_meets_them_give_the_same_scores():
    """The filter classifies a column when a scored message first holds it; scoring a few
    messages one at a time, then all at once, gives the scores of a filter whose
    dependence was made for the whole vocabulary first."""
    messages = list(iter_index(SAMPLE / "index"))
    config = load_config(None, {"model.clues_per_header_field": 1, "model.tile_word_pairs": True})
    raws = [m.raw for m in messages]
    lazy = SpamFilter(config).fit(messages)
    first = np.concatenate([lazy.log_odds([raw]) for raw in raws[:5]])
    assert 0 < int(lazy._dependence[1].sum()) < len(lazy.vocabulary)
    eager = SpamFilter(config).fit(messages)
    whole = eager.dependence()  # every column classified at once
    again = make_dependence(list(eager.vocabulary.tokens_), eager.vocabulary.columns, 1, True)
    np.testing.assert_array_equal(whole.field, again.field)
    np.testing.assert_array_equal(whole.pair_words, again.pair_words)
    expected = eager.log_odds(raws)
    np.testing.assert_array_equal(first, expected[:5])
    np.testing.assert_array_equal(lazy.log_odds(raws), expected)


def test_a_model_saved_before_the_settings_existed_keeps_every_token(dependent_model, tmp_path):
    """A model file without the keys scores as it did when it was saved: every token of a
    header field counts, and pairs beside their words."""
    import zipfile

    path = tmp_path / "old.tnb"
    with zipfile.ZipFile(dependent_model) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    meta = json.loads(members["textnb-model.json"])
    del meta["config"]["model"]["clues_per_header_field"]
    del meta["config"]["model"]["tile_word_pairs"]
    members["textnb-model.json"] = json.dumps(meta).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    old = store.load(path)
    assert old.config.model.clues_per_header_field == 0 and not old.config.model.tile_word_pairs
    assert old.dependence() is None
