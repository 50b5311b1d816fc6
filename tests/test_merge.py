"""Merging models (textnb.modelfile.merge): the merge of models trained on parts of the mail is the
model trained on all of it, bit for bit, each message counted once; differing settings and
unresolved overlaps are refused by name."""

from dataclasses import replace

import numpy as np
import pytest
from typer.testing import CliRunner

from textnb.cli import app
from textnb.config import load_config
from textnb.mail.sources import RawMessage, iter_index
from textnb.modelfile import dump, store
from textnb.modelfile.merge import MergeError, merge_filters
from textnb.modelfile.retrain import fit, forget_messages, learn_messages
from textnb.models.ledger import Ledger, message_digest
from textnb.spamfilter import SpamFilter

from conftest import SAMPLE_INDEX, every_message

runner = CliRunner()
UNLABELLED = SAMPLE_INDEX.parent / "unlabelled"


@pytest.fixture(scope="module")
def mail() -> list[RawMessage]:
    return list(iter_index(SAMPLE_INDEX))


def _model(messages, **settings) -> SpamFilter:
    """A filter fit on messages with the settings given; a setting given as None is unset
    (as in a model file saved before it existed, which --set cannot make)."""
    config = load_config(None, settings)
    for dotted in (name for name, value in settings.items() if value is None):
        section, _, key = dotted.partition(".")
        config = replace(config, **{section: replace(getattr(config, section), **{key: None})})
    f = SpamFilter(every_message(config))
    fit(f, messages)
    return f


def _flipped(messages) -> list[RawMessage]:
    return [RawMessage(m.source, m.raw, "ham" if m.label == "spam" else "spam") for m in messages]


def assert_same_model(a: SpamFilter, b: SpamFilter, raws) -> None:
    """Same counts, columns, ledger and scores, bit for bit (and so the same text dump)."""
    assert dump.dumps(a) == dump.dumps(b)
    assert np.array_equal(a.log_odds(raws), b.log_odds(raws))


def _raws(mail):
    return [m.raw for m in mail] + [p.read_bytes() for p in sorted(UNLABELLED.iterdir())]


def test_merge_equals_training_on_all_the_mail_with_shared_messages_once(mail):
    a, b = mail[:50], mail[39:]  # 11 messages in both, under the same labels
    merged, report = merge_filters([_model(a), _model(b)], ["a", "b"], mail=mail)
    assert report["duplicates"] == 11 and report["conflicts"] == 0
    assert merged.n_learned == {"ham": 60, "spam": 40} and len(merged.ledger) == 100
    assert_same_model(merged, _model(mail), _raws(mail))


def test_three_disjoint_models_add_up_without_any_mail(mail):
    parts = [mail[:30], mail[30:70], mail[70:]]
    merged, report = merge_filters([_model(p) for p in parts])
    assert report["duplicates"] == report["conflicts"] == 0
    assert_same_model(merged, _model(mail), _raws(mail))


@pytest.fixture(scope="module")
def conflicting(mail):
    """A holds the first 60 messages; B the last 50, with 5 of the shared ten relabelled."""
    a = mail[:60]
    b = _flipped(mail[50:55]) + mail[55:]
    return a, b, mail[50:55]


def test_conflicts_are_refused_by_default_and_named(mail, conflicting):
    a, b, flipped = conflicting
    with pytest.raises(MergeError, match=r"5 message\(s\) are in the inputs under different "
                       r"labels: [0-9a-f]{12} \((spam|ham) in 'a', (spam|ham) in 'b'\).*"
                       "--on-conflict first|last"):
        merge_filters([_model(a), _model(b)], ["a", "b"], mail=mail)


def test_conflict_first_keeps_the_first_label(mail, conflicting):
    a, b, flipped = conflicting
    merged, report = merge_filters([_model(a), _model(b)], mail=mail, on_conflict="first")
    assert report["conflicts"] == 5 and report["duplicates"] == 5
    expected = _model(a)
    learn_messages(expected, b[5:])  # B without its relabelled copies
    assert_same_model(merged, expected, _raws(mail))


def test_conflict_last_is_what_retraining_with_the_later_mail_does(mail, conflicting):
    a, b, _ = conflicting
    merged, _ = merge_filters([_model(a), _model(b)], mail=mail, on_conflict="last")
    expected = _model(a)
    learn_messages(expected, b)  # retrain moves a relabelled message: the later label wins
    assert_same_model(merged, expected, _raws(mail))


def test_conflict_drop_forgets_the_message(mail, conflicting):
    a, b, flipped = conflicting
    merged, _ = merge_filters([_model(a), _model(b)], mail=mail, on_conflict="drop")
    expected = _model(a)
    learn_messages(expected, b)
    forget_messages(expected, flipped)
    assert_same_model(merged, expected, _raws(mail))
    assert all(merged.ledger.label(message_digest(m.raw)) is None for m in flipped)


def test_overlaps_without_their_mail_are_refused(mail):
    with pytest.raises(MergeError, match=r"11 message\(s\) are in more than one input, 11 of "
                       "them not found.*--mail SRC or --index FILE"):
        merge_filters([_model(mail[:50]), _model(mail[39:])], mail=mail[:10])


def test_a_message_tokenised_differently_is_refused(mail):
    a, b = _model(mail[:50]), _model(mail[45:])
    digest = next(d for d in b.ledger if d in a.ledger)
    b.ledger.record(digest, b.ledger.label(digest), 12345)  # as another tokenizer would hash
    with pytest.raises(MergeError, match="tokenises differently now than when 'b' learned it"):
        merge_filters([a, b], ["a", "b"], mail=mail)


@pytest.mark.parametrize("setting, a_value, b_value, shown", [
    ("model.alpha", 0.1, 0.3, "'b' has model.alpha = 0.3, 'a' has 0.1"),
    ("model.route_alpha", 0.03, 0.05, "'b' has model.route_alpha = 0.05, 'a' has 0.03"),
    ("model.route_alpha", None, 0.03, "'b' has model.route_alpha = 0.03, 'a' has null"),
    ("tokenizer.bigrams", True, False, "'b' has tokenizer.bigrams = false, 'a' has true"),
    ("model.event_model", "multinomial", "bernoulli",
     "'b' has model.event_model = \"bernoulli\", 'a' has \"multinomial\""),
])
def test_different_settings_are_refused_by_name(mail, setting, a_value, b_value, shown):
    a = _model(mail[:50], **{setting: a_value})
    b = _model(mail[50:], **{setting: b_value})
    with pytest.raises(MergeError, match="same settings") as info:
        merge_filters([a, b], ["a", "b"])
    assert shown in str(info.value)


@pytest.mark.parametrize("order", [("a", "b"), ("b", "a")])
def test_an_unset_setting_is_never_the_fix_the_refusal_names(mail, order):
    """--set cannot unset a setting: whichever input comes first, the fix named is to
    train the model that lacks the value again with it."""
    models = {"a": _model(mail[:50], **{"model.route_alpha": 0.03}),
              "b": _model(mail[50:], **{"model.route_alpha": None})}
    with pytest.raises(MergeError, match="same settings") as info:
        merge_filters([models[n] for n in order], list(order))
    assert "train 'b' again with --set model.route_alpha=0.03" in str(info.value)


def test_untracked_messages_and_tuned_thresholds_are_noted(mail):
    a = SpamFilter(every_message()).fit(mail[:50])
    a.ledger = Ledger()  # a model from before ledgers: its overlaps cannot be seen
    b = _model(mail[50:])
    b.threshold = 2.0
    merged, report = merge_filters([a, b], ["a", "b"])
    assert report["untracked"] == {"a": 50, "b": 0}
    assert any("50 learned message(s) are not in the inputs' ledgers" in n for n in report["notes"])
    assert any("textnb tune" in n for n in report["notes"]) and merged.threshold is None
    assert merged.n_learned == {"ham": 60, "spam": 40}


def test_cli_merge(tmp_path, mail):
    paths = []
    for name, part in (("a", mail[:50]), ("b", mail[39:])):
        store.save(_model(part), tmp_path / f"{name}.tnb")
        paths.append(str(tmp_path / f"{name}.tnb"))
    out = tmp_path / "ab.tnb"
    refused = runner.invoke(app, ["merge", *paths, "--model", str(out)])
    assert refused.exit_code == 1 and "11 message(s) are in more than one input" in refused.output
    assert not out.exists()
    result = runner.invoke(app, ["merge", *paths, "--model", str(out), "--index", str(SAMPLE_INDEX)])
    assert result.exit_code == 0, result.output
    assert "merged 2 models into" in result.output and "40 spam, 60 ham" in result.output
    assert "11 message(s) were in more than one input under one label: counted once" in result.output
    assert_same_model(store.load(out), _model(mail), _raws(mail))
    one = runner.invoke(app, ["merge", paths[0], "--model", str(out)])
    assert one.exit_code == 2 and "two or more models" in one.output
    bad = runner.invoke(app, ["merge", *paths, "--model", str(out), "--on-conflict", "newest"])
    assert bad.exit_code == 2 and "'newest' is not a policy" in bad.output
    from textnb.cli.merge import CONFLICTS
    from textnb.modelfile.merge import CONFLICT_POLICIES

    assert CONFLICTS == CONFLICT_POLICIES


def test_route_alpha_models_merge_to_the_model_of_all_their_mail(mail):
    parts = [_model(mail[:45], **{"model.route_alpha": 0.03}),
             _model(mail[45:], **{"model.route_alpha": 0.03})]
    merged, _ = merge_filters(parts, ["a", "b"])
    assert merged.config.model.route_alpha == 0.03
    assert_same_model(merged, _model(mail, **{"model.route_alpha": 0.03}), _raws(mail))
